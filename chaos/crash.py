"""Crash chaos for ``kcql-sink run``: SIGKILL the real process at random moments, restart, check.

One :class:`Scenario` = one topic, one connector, ``kills`` SIGKILLs of the whole process group
(the runner and any task children), then a final run that drains the topic and is stopped with
SIGTERM. Kill moments are random times after start (before assignment, mid-batch, mid-flush)
and, on S3, also *in-flight* requests: the fault proxy parks a file's upload (to ``.temp-upload/``
in the copy protocol, straight to its final key in the conditional one) or an index write (a
commit step) and the harness kills the sink while that request hangs. Then it drops it, as the
socket of a dead process would be, or (half of the upload kills, at random) forwards it a few
seconds later, while the next run recovers: a zombie's upload landing after its successor took over.

The verdict comes from :mod:`chaos.reader` (an independent read of the storage) against the
broker's watermarks: every (topic, partition, offset) exactly once.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.proxy import FaultProxy, Rule
from chaos.reader import Triple, compare, read_local, read_s3

__all__ = [
    "REPO",
    "Cell",
    "S3Target",
    "Scenario",
    "drain",
    "prepare",
    "produce",
    "produce_numbered",
    "run_scenario",
    "start_sink",
]

log = logging.getLogger(__name__)

UPLOAD_PATH = r"/(\.temp-upload|data)/"
"""A file's upload: to a temporary key (copy protocol) or straight to its final key (conditional);
an S3 copy is a PUT to the final key too."""

REPO = Path(__file__).resolve().parent.parent

SESSION_TIMEOUT_MS, HEARTBEAT_MS = (6000, 500) if os.environ.get("BROKERS") else (2000, 200)
"""Tansu completes a group join about ``session.timeout.ms`` / 2 after it starts (whole seconds,
at least 1 s), and a stopping member's close waits for that join: 2,000 ms makes each ~1 s
instead of 3 s. Kafka refuses a session timeout below its ``group.min.session.timeout.ms``
(6,000 by default), so against ``BROKERS`` the tests keep 6,000."""

#: Consumer settings that keep group joins on Tansu short (see the Tansu reference).
FAST_CONSUMER = {
    "consumer.override.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "consumer.override.heartbeat.interval.ms": str(HEARTBEAT_MS),
    "consumer.override.fetch.wait.max.ms": "50",
    "consumer.override.topic.metadata.refresh.interval.ms": "1000",
}

KINDS = ("a", "b", "c", "d")


@dataclass
class S3Target:
    """Where S3 cells write: the SeaweedFS endpoint, a boto3 client, the proxy in front."""

    connect_config: dict[str, str]
    client: Any
    proxy: FaultProxy


@dataclass
class Scenario:
    """One cell of the chaos matrix."""

    flush: str = "count"  # count | size | interval
    storage: str = "local"  # local | s3
    partition_by: bool = False
    records: int = 5_000
    partitions: int = 3
    kills: int = 3
    kill_window: tuple[float, float] = (1.0, 8.0)
    inflight_kills: bool = True  # S3 only: some kills while an upload / index write is parked
    protocol: str = "auto"  # connect.s3.commit.protocol: auto (conditional here) | conditional | copy
    pad: int = 0
    """Bytes of padding per value (0: a few, varying). The ``multipart`` flush needs big values."""
    values: str = "json"
    """``json`` (schemaless JSON, files with the envelope) or ``avro``: Confluent Avro values
    through the registry, STOREAS AVRO without an envelope, so the bodies are written through as
    they came (the pass-through, docs/formats.md) and records are told apart by their ``n``."""
    drain_timeout: float = 300.0
    seed: int = 0
    name: str = field(default="")

    def __post_init__(self) -> None:
        if not self.name:
            pb = "partitionby" if self.partition_by else "default"
            protocol = "" if self.protocol == "auto" else f"-{self.protocol}"
            values = "-avro" if self.values == "avro" else ""
            self.name = f"{self.storage}-{self.flush}-{pb}{protocol}{values}"

    def kcql(self, topic: str) -> str:
        flush = {
            "count": f"'flush.count'={max(50, self.records // 40)}, 'flush.interval'=4",
            "size": "'flush.size'=32768, 'flush.count'=100000000, 'flush.interval'=4",
            "interval": "'flush.interval'=1, 'flush.count'=100000000",
            # files of several 5 MiB parts, streamed to S3 while they are written (MULTIPART_PART_SIZE)
            "multipart": f"'flush.count'={max(50, self.records // (2 * self.partitions))}, "
                         "'flush.size'=1000000000, 'flush.interval'=30",
        }[self.flush]
        partition = " PARTITIONBY kind" if self.partition_by else ""
        if self.values == "avro":  # no envelope: it would need every record decoded
            return (
                f"INSERT INTO chaos:data SELECT * FROM `{topic}`{partition} STOREAS `AVRO` "  # noqa: S608
                f"PROPERTIES({flush})"
            )
        return (
            f"INSERT INTO chaos:data SELECT * FROM `{topic}`{partition} STOREAS `JSON` "  # noqa: S608
            f"PROPERTIES('store.envelope'=true, {flush})"
        )


MULTIPART_PART_SIZE = 5 * 1024 * 1024
"""``connect.s3.multipart.part.size`` of the ``multipart`` cells: S3's smallest part, so that a
file of a few thousand padded records streams up in several parts (in-flight kills hit them)."""


AVRO_VALUE = {
    "type": "record",
    "name": "ChaosValue",
    "namespace": "chaos",
    "fields": [
        {"name": "n", "type": "long"},
        {"name": "kind", "type": "string"},
        {"name": "pad", "type": "string"},
    ],
}
"""The ``avro`` cells' value schema: the JSON cells' value, flat, so the sink writes it through."""


def produce(bootstrap: str, topic: str, records: int, partitions: int, pad: int = 0) -> set[Triple]:
    """Produce ``records`` JSON values ``{"n": i, "kind": ...}`` round-robin over the partitions.

    Returns the (topic, partition, offset) of every record as the broker acknowledged it in the
    delivery reports: the expected set, independent of anything the sink says.
    """
    return set(produce_numbered(bootstrap, topic, records, partitions, pad).values())


def produce_numbered(
    bootstrap: str, topic: str, records: int, partitions: int, pad: int = 0, registry: str | None = None
) -> dict[int, Triple]:
    """:func:`produce`, JSON or, when ``registry`` is given, Confluent Avro (confluent-kafka's own
    serializer, the schema :data:`AVRO_VALUE` registered under ``<topic>-value``); returns each
    record's acknowledged (topic, partition, offset) by its ``n``."""
    acked: dict[int, Triple] = {}
    failures: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            acked[int(msg.key())] = (msg.topic(), msg.partition(), msg.offset())

    encode: Any = lambda value: json.dumps(value).encode()  # noqa: E731
    if registry is not None:
        from confluent_kafka.schema_registry import SchemaRegistryClient
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        serializer = AvroSerializer(SchemaRegistryClient({"url": registry}), json.dumps(AVRO_VALUE))
        context = SerializationContext(topic, MessageField.VALUE)
        encode = lambda value: serializer(value, context)  # noqa: E731
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 5000})
    for i in range(records):
        value = encode({"n": i, "kind": KINDS[i % len(KINDS)], "pad": "x" * (pad or i % 37)})
        while True:
            try:
                prod.produce(
                    topic, value=value, key=str(i).encode(), partition=i % partitions, on_delivery=on_delivery
                )
                break
            except BufferError:
                prod.poll(0.1)
        if i % 1_000 == 0:
            prod.poll(0)
    if prod.flush(120) != 0 or failures or len(acked) != records:
        raise RuntimeError(f"{topic}: {len(acked)}/{records} acknowledged, errors: {failures[:3]}")
    return acked


def start_sink(config: Path, bootstrap: str, log_path: Path) -> subprocess.Popen[bytes]:
    """``kcql-sink run CONFIG`` in its own process group (so SIGKILL reaches its task children)."""
    env = {k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"}
    env["KCQL_SINK_LOG_LEVEL"] = "INFO"
    return subprocess.Popen(
        [sys.executable, "-m", "sink.cli", "run", str(config), "--bootstrap-servers", bootstrap],
        stdout=log_path.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,
        env=env,
    )


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)


def _stop(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        return -9


@dataclass
class Cell:
    """A prepared cell: topic produced, connector config written, storage ready to read back."""

    scenario: Scenario
    topic: str
    expected: set[Triple]
    by_n: dict[int, Triple] | None
    """How the ``avro`` cells' files (no envelope) name a record: its ``n``; ``None`` for JSON."""
    config: Path
    work: Path
    bucket: str
    s3: S3Target | None

    def read(self) -> tuple[Counter[Triple], int]:
        """What the storage holds now (independent reader) and how many data files."""
        if self.s3 is not None:
            return read_s3(self.s3.client, self.bucket, "data", self.by_n)
        return read_local(self.work / "out", self.bucket, "data", self.by_n)

    def verdict(self) -> dict[str, int]:
        """:func:`chaos.reader.compare` of the expected set against the storage."""
        seen, files = self.read()
        return {**compare(self.expected, seen), "files": files}


def prepare(
    scn: Scenario, bootstrap: str, workdir: Path, s3: S3Target | None = None, registry: str | None = None,
    **extra: str,
) -> Cell:
    """Create the topic, produce ``scn.records``, write the connector config (``extra`` keys win).
    ``registry``: the Schema Registry's URL, which the ``avro`` cells need."""
    if scn.values == "avro" and registry is None:
        raise ValueError(f"{scn.name}: an avro cell needs a Schema Registry")
    work = workdir / scn.name
    work.mkdir(parents=True, exist_ok=True)
    topic = f"chaos-{scn.name}-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, num_partitions=scn.partitions)])[topic].result(timeout=20)
    avro_registry = registry if scn.values == "avro" else None
    by_n = produce_numbered(bootstrap, topic, scn.records, scn.partitions, scn.pad, avro_registry)

    props: dict[str, str] = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": scn.kcql(topic),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "connect.s3.local.tmp.directory": str(work / "staging"),
        "connect.s3.commit.protocol": scn.protocol,
        **FAST_CONSUMER,
    }
    if scn.values == "avro":
        props["value.converter"] = "io.confluent.connect.avro.AvroConverter"
        props["value.converter.schema.registry.url"] = str(registry)
    bucket = "chaos"
    if scn.storage == "s3":
        if s3 is None:
            raise ValueError(f"{scn.name}: an S3 cell needs an S3Target")
        bucket = f"chaos-{uuid.uuid4().hex[:10]}"
        s3.client.create_bucket(Bucket=bucket)
        props["connect.s3.kcql"] = props["connect.s3.kcql"].replace("chaos:data", f"{bucket}:data", 1)
        props.update(s3.connect_config)
        props["connect.s3.custom.endpoint"] = s3.proxy.url
    else:
        props["connect.storage"] = "local"
        props["connect.local.root"] = str(work / "out")
    if scn.flush == "multipart":
        props["connect.s3.multipart.part.size"] = str(MULTIPART_PART_SIZE)
    props.update(extra)
    config = work / "connector.json"
    config.write_text(json.dumps({"name": f"chaos-{uuid.uuid4().hex[:8]}", "config": props}, indent=2))
    return Cell(
        scn, topic, set(by_n.values()), by_n if scn.values == "avro" else None, config, work, bucket,
        s3 if scn.storage == "s3" else None,
    )


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def drain(cell: Cell, bootstrap: str, log_path: Path, timeout: float) -> tuple[bool, int]:
    """Run the sink until every expected record is in storage, then SIGTERM it: (drained, exit code)."""
    proc = start_sink(cell.config, bootstrap, log_path)
    deadline = time.monotonic() + timeout
    drained = False
    try:
        # SIGTERM before the runner installed its handlers would kill it (-15) and say nothing about
        # a graceful stop: wait until it has joined the group, even when storage is already complete.
        while time.monotonic() < deadline and proc.poll() is None and "assigned" not in _text(log_path):
            time.sleep(0.2)
        while time.monotonic() < deadline and proc.poll() is None:
            began = time.monotonic()
            seen, _files = cell.read()
            if all(seen[t] for t in cell.expected):
                drained = True
                break
            # reading storage back costs in proportion to what it holds: look again soon while a
            # read is cheap, and keep the reader to a quarter of the time the sink has
            time.sleep(min(2.0, max(0.2, 3 * (time.monotonic() - began))))
    finally:
        rc = _stop(proc)
    return drained, rc


def run_scenario(
    scn: Scenario, bootstrap: str, workdir: Path, s3: S3Target | None = None, registry: str | None = None
) -> dict[str, Any]:
    """Produce, crash ``scn.kills`` times, drain, read back; returns the cell's summary row.
    ``registry``: the Schema Registry's URL (the ``avro`` cells)."""
    rng = random.Random(scn.seed)  # noqa: S311 - chaos timing, not security
    began = time.monotonic()
    cell = prepare(scn, bootstrap, workdir, s3, registry)
    work, config, bucket = cell.work, cell.config, cell.bucket
    kinds: Counter[str] = Counter()
    logs: list[Path] = []
    for i in range(scn.kills):
        log_path = work / f"run-{i:02d}.log"
        logs.append(log_path)
        mode = "time"
        rule: Rule | None = None
        if scn.storage == "s3" and s3 is not None and scn.inflight_kills and i % 3 != 0:
            mode = "upload" if i % 3 == 1 else "index"
            path = UPLOAD_PATH if mode == "upload" else r"/\.indexes/"
            rule = s3.proxy.add(
                Rule("hold", method="PUT", path=rf"^/{bucket}{path}", skip=rng.randint(0, 3), delay=60)
            )
        proc = start_sink(config, bootstrap, log_path)
        wait = rng.uniform(*scn.kill_window)
        if rule is not None:
            if not rule.hit.wait(wait + 20):
                mode = "time"  # nothing to park (e.g. drained already): still a kill
        else:
            time.sleep(wait)
        early = proc.poll()
        _kill_group(proc)
        if rule is not None and s3 is not None:
            late = mode == "upload" and rule.hit.is_set() and rng.random() < 0.5
            if late:  # the dead task's upload reaches the store while the next run recovers
                mode = "late-upload"
                threading.Timer(rng.uniform(1.0, 5.0), rule.release.set).start()
            else:
                rule.drop = True
                rule.release.set()
            s3.proxy.clear()
        if early is not None:
            kinds["exited-before-kill"] += 1
            log.warning("%s: run %d exited with %s before its kill", scn.name, i, early)
        kinds[mode] += 1
        log.info("%s: kill %d/%d (%s after %.1fs)", scn.name, i + 1, scn.kills, mode, wait)

    final_log = work / "run-final.log"
    logs.append(final_log)
    drained, rc = drain(cell, bootstrap, final_log, scn.drain_timeout)
    verdict = cell.verdict()
    files = verdict.pop("files")
    tracebacks = sum("Traceback" in p.read_text(errors="replace") for p in logs if p.exists())
    row = {
        "cell": scn.name,
        "records": scn.records,
        "kills": dict(kinds),
        "faults_injected": scn.kills,
        **verdict,
        "files": files,
        "drained": drained,
        "final_exit": rc,
        "logs_with_traceback": tracebacks,
        "seconds": round(time.monotonic() - began, 1),
        "scenario": {k: v for k, v in asdict(scn).items() if k not in ("name",)},
        "workdir": str(work),
    }
    row["ok"] = (
        verdict["lost"] == 0
        and verdict["duplicated"] == 0
        and verdict["unexpected"] == 0
        and drained
        and rc == 0
        and tracebacks == 0
    )
    return row
