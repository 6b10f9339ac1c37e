"""Servers an outage test can take away and give back: a Tansu broker and a SeaweedFS on fixed ports.

The session fixtures (``kafka_bootstrap``, ``s3_endpoint``) must stay up for every other test, so
the outage tests start their own:

* :class:`RestartableTansu` keeps its topics and committed offsets across a SIGKILL because it
  stores them on S3 (``--storage-engine s3://bucket/``, see ``shared/reference/tansu-broker.md``
  §5), and comes back on the same port, so the sink's bootstrap address stays valid.
* :class:`RestartableSeaweed` is stopped and started again on the same ports with the same data
  directory, so what the sink committed before the outage is still there after it; optionally
  with an IAM config (``-s3.config``), so that a wrong secret key is really refused.

Both wait for readiness by polling with a deadline, never by sleeping.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from sink.quickstart.embedded import (
    _MASTER_TOML,
    S3Endpoint,
    _pick_ports,
    _s3_answers,
    free_port,
    make_client,
    tansu_binary,
    weed_binary,
)

__all__ = [
    "RestartableSeaweed", "RestartableTansu", "SteadyProducer",
    "connector_config", "topic_contents", "wait_until",
]


def wait_until(check: Any, timeout: float, what: str, every: float = 0.1) -> None:
    """Poll ``check()`` until it is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(every)
    raise AssertionError(f"{what} not reached within {timeout}s")


def _connects(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
    except OSError:
        return False
    return True


class RestartableTansu:
    """A Tansu broker with S3 storage on one fixed loopback port: :meth:`kill` and :meth:`start` again."""

    def __init__(self, storage: S3Endpoint, bucket: str, log_dir: Path) -> None:
        self.storage = storage
        self.bucket = bucket
        self.log_path = log_dir / "tansu.log"
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> None:
        url = f"tcp://127.0.0.1:{self.port}"
        env = {
            **os.environ,
            "AWS_ENDPOINT": self.storage.url,
            "AWS_ALLOW_HTTP": "true",
            "AWS_ACCESS_KEY_ID": self.storage.access_key,
            "AWS_SECRET_ACCESS_KEY": self.storage.secret_key,
            "AWS_DEFAULT_REGION": self.storage.region,
        }
        start = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                [tansu_binary(), "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", f"s3://{self.bucket}/"],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
            )
        proc = self.process

        def ready() -> bool:
            if proc.poll() is not None:  # the port was taken (Tansu exits 0): say so below
                raise AssertionError(f"tansu exited with {proc.returncode}:\n{self._log_since(start)}")
            return b"ready in" in self.log_path.read_bytes()[start:] and _connects(self.port)

        wait_until(ready, timeout, f"tansu on {self.bootstrap}", every=0.02)

    def _log_since(self, offset: int) -> str:
        return self.log_path.read_bytes()[offset:].decode(errors="replace")[-3000:]

    def kill(self) -> None:
        """SIGKILL: a crash, not a shutdown (S3 storage keeps what was acknowledged)."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> RestartableTansu:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.kill()


def iam_config(access_key: str, secret_key: str) -> dict[str, Any]:
    """A SeaweedFS ``-s3.config`` with one identity allowed everything: other keys are refused."""
    return {
        "identities": [
            {
                "name": "sink",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }


class _WeedExited(AssertionError):
    """``weed`` exited while starting (a port was taken)."""


class RestartableSeaweed:
    """``weed server -s3`` on fixed ports and a kept data directory: :meth:`stop`, :meth:`start` again."""

    def __init__(self, log_dir: Path, iam: tuple[str, str] | None = None) -> None:
        self.master, self.volume, self.filer, self.s3 = _pick_ports(4)
        self.data_dir = Path(tempfile.mkdtemp(prefix="seaweedfs-outage-"))
        (self.data_dir / "master.toml").write_text(_MASTER_TOML)
        self.log_path = log_dir / "seaweedfs.log"
        self.iam = iam
        self.endpoint_keys = iam or ("any", "any-secret")
        self.endpoint = S3Endpoint(f"http://127.0.0.1:{self.s3}", *self.endpoint_keys)
        self.process: subprocess.Popen[bytes] | None = None
        self.started = False

    def _args(self) -> list[str]:
        m, v, f, s = self.master, self.volume, self.filer, self.s3
        args = [
            weed_binary(), "server", f"-dir={self.data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={m}", f"-master.port.grpc={m + 10000}",
            f"-volume.port={v}", f"-volume.port.grpc={v + 10000}",
            f"-filer.port={f}", f"-filer.port.grpc={f + 10000}",
            "-s3", f"-s3.port={s}", f"-s3.port.grpc={s + 10000}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]
        if self.iam is not None:
            config = self.data_dir / "s3.json"
            config.write_text(json.dumps(iam_config(*self.iam)))
            args.append(f"-s3.config={config}")
        return args

    def start(self, timeout: float = 60.0, probe_bucket: str | None = None, attempts: int = 3) -> None:
        """Start (again) and wait until S3 answers; with ``probe_bucket``, until an object there can be
        written and read back.

        ``weed`` exits when one of its ports is taken, and its gRPC ports (HTTP + 10000) lie in the
        kernel's ephemeral range, where another process's client socket may sit for a moment: a
        first start then moves to other ports, a restart (which must keep the S3 port) tries again.
        """
        for attempt in range(attempts):
            try:
                self._start_once(timeout, probe_bucket)
                self.started = True
                return
            except _WeedExited:
                if attempt == attempts - 1:
                    raise
                if not self.started:
                    self.master, self.volume, self.filer, self.s3 = _pick_ports(4)
                    self.endpoint = S3Endpoint(f"http://127.0.0.1:{self.s3}", *self.endpoint_keys)

    def _start_once(self, timeout: float, probe_bucket: str | None) -> None:
        with self.log_path.open("ab") as log_file:
            self.process = subprocess.Popen(
                self._args(), stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                cwd=self.data_dir,
            )
        proc = self.process
        client = make_client(self.endpoint)

        def ready() -> bool:
            if proc.poll() is not None:
                raise _WeedExited(f"weed exited with {proc.returncode}: see {self.log_path}")
            if not _s3_answers(self.endpoint.url):
                return False
            try:
                if probe_bucket is not None:  # the volume server is back too: a write and a read
                    client.put_object(Bucket=probe_bucket, Key=".probe", Body=b"x")
                    client.get_object(Bucket=probe_bucket, Key=".probe")["Body"].read()
                    client.delete_object(Bucket=probe_bucket, Key=".probe")
                else:
                    client.list_buckets()
            except Exception:
                return False
            return True

        wait_until(ready, timeout, f"SeaweedFS on {self.endpoint.url}", every=0.3)

    def stop(self) -> None:
        """SIGKILL (an outage, not a maintenance window); the data directory is kept."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    def remove(self) -> None:
        self.stop()
        shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RestartableSeaweed:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            self.remove()


class SteadyProducer:
    """Produces ``{"n": i, ...}`` to ``topic`` at about ``rate`` records/s on a thread, until ``total``.

    ``acked`` holds the (topic, partition, offset) of every record the broker acknowledged: the
    expected set, independent of the sink. Delivery is retried by librdkafka across a broker
    outage (``message.timeout.ms`` covers it), so a record is either acknowledged or reported.
    """

    def __init__(self, bootstrap: str, topic: str, total: int, rate: float, partitions: int) -> None:
        import threading

        from confluent_kafka import Producer

        self.topic = topic
        self.total = total
        self.rate = rate
        self.partitions = partitions
        self.acked: set[tuple[str, int, int]] = set()
        self.failures: list[str] = []
        self.sent = 0
        self._producer = Producer({
            "bootstrap.servers": bootstrap, "linger.ms": 5, "message.timeout.ms": 600_000,
            "enable.idempotence": False, "log_level": 0,
        })
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="steady-producer")

    def start(self) -> SteadyProducer:
        self._thread.start()
        return self

    def _delivered(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failures.append(str(err))
        else:
            self.acked.add((msg.topic(), msg.partition(), msg.offset()))

    def _run(self) -> None:
        began = time.monotonic()
        kinds = ("a", "b", "c", "d")
        while self.sent < self.total and not self._stop.is_set():
            due = int((time.monotonic() - began) * self.rate) + 1
            while self.sent < min(due, self.total):
                i = self.sent
                value = json.dumps({"n": i, "kind": kinds[i % 4], "pad": "x" * (i % 37)}).encode()
                try:
                    self._producer.produce(self.topic, value=value, key=str(i).encode(),
                                           partition=i % self.partitions, on_delivery=self._delivered)
                except BufferError:
                    break
                self.sent += 1
            self._producer.poll(0.05)
        while self._producer.flush(1) > 0 and not self._stop.is_set():
            pass

    def join(self, timeout: float) -> None:
        """Wait until every record is acknowledged (AssertionError otherwise)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), f"producer still busy after {timeout}s ({self.sent} sent)"
        assert not self.failures and len(self.acked) == self.total, (len(self.acked), self.failures[:3])

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def connector_config(work: Path, topic: str, bucket: str, storage: dict[str, str], **extra: str) -> Path:
    """A ``kcql-sink run`` config: JSON envelopes of ``topic`` into ``bucket:data`` (count and
    interval flushes), fast group joins on Tansu; ``extra`` keys win."""
    import uuid

    from chaos.crash import FAST_CONSUMER

    kcql = (
        f"INSERT INTO {bucket}:data SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
        "PROPERTIES('store.envelope'=true, 'flush.count'=200, 'flush.interval'=2)"
    )
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": kcql,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "connect.s3.local.tmp.directory": str(work / "staging"),
        **FAST_CONSUMER,
        **storage,
        **extra,
    }
    work.mkdir(parents=True, exist_ok=True)
    path = work / "connector.json"
    path.write_text(json.dumps({"name": f"outage-{uuid.uuid4().hex[:8]}", "config": props}, indent=2))
    return path


def topic_contents(bootstrap: str, topic: str, partitions: int, at_least: int, timeout: float = 60) -> set[
    tuple[str, int, int]
]:
    """Every (topic, partition, offset) the topic holds, read back by a plain consumer.

    The expected set of an outage run: a produce request the broker stored just before it was
    killed may be retried by the producer and stored twice, so the topic (not the acknowledgements)
    says what the sink must write. Reads until ``at_least`` records and then an empty second.
    """
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"readback-{topic}", "enable.auto.commit": False,
        "fetch.wait.max.ms": 50, "log_level": 0,
    })
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    seen: set[tuple[str, int, int]] = set()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            batch = [m for m in consumer.consume(1000, timeout=1.0) if m.error() is None]
            seen.update((topic, m.partition() or 0, m.offset() or 0) for m in batch)
            if not batch and len(seen) >= at_least:
                return seen
    finally:
        consumer.close()
    raise AssertionError(f"{topic}: read {len(seen)} of at least {at_least} records within {timeout}s")
