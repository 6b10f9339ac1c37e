"""A ``kcql-sink worker`` subprocess for the worker tests: started on a free port, stopped by PID."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from sink.quickstart.embedded import free_port

__all__ = ["REPO", "Worker"]

REPO = Path(__file__).parent.parent.parent


class Worker:
    """One worker process; ``url(path)`` builds request URLs; ``stop()`` sends SIGTERM and waits."""

    def __init__(self, state_dir: Path, bootstrap: str | None, log_path: Path, *extra: str) -> None:
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("KAFKA_BOOTSTRAP_SERVERS", "KCQL_SINK_BASIC_AUTH")
        }
        args = [
            sys.executable,
            "-m",
            "sink.cli",
            "-v",
            "worker",
            "--port",
            str(self.port),
            "--state-dir",
            str(state_dir),
        ]
        if bootstrap:
            args += ["--bootstrap-servers", bootstrap]
        self._log = log_path.open("a")
        started = time.monotonic()
        self.proc = subprocess.Popen(
            [*args, *extra], stdout=self._log, stderr=subprocess.STDOUT, env=env, cwd=REPO
        )
        while True:
            try:
                requests.get(self.base + "/", timeout=0.5)
                break
            except requests.ConnectionError:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"worker exited with {self.proc.returncode}: {self.log()}") from None
                if time.monotonic() - started > 20:
                    self.stop()
                    raise RuntimeError(f"worker did not answer within 20 s: {self.log()}") from None
                time.sleep(0.05)
        self.startup_seconds = time.monotonic() - started

    def url(self, path: str) -> str:
        return self.base + path

    def get(self, path: str, **kw: Any) -> requests.Response:
        return requests.get(self.url(path), timeout=60, **kw)

    def post(self, path: str, **kw: Any) -> requests.Response:
        return requests.post(self.url(path), timeout=60, **kw)

    def put(self, path: str, **kw: Any) -> requests.Response:
        return requests.put(self.url(path), timeout=60, **kw)

    def patch(self, path: str, **kw: Any) -> requests.Response:
        return requests.patch(self.url(path), timeout=60, **kw)

    def delete(self, path: str, **kw: Any) -> requests.Response:
        return requests.delete(self.url(path), timeout=60, **kw)

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text()

    def wait_status(self, name: str, connector: str, tasks: str | None = None, timeout: float = 60) -> dict:
        deadline = time.monotonic() + timeout
        body: dict = {}
        while time.monotonic() < deadline:
            body = self.get(f"/connectors/{name}/status").json()
            if body.get("connector", {}).get("state") == connector and (
                tasks is None or (body["tasks"] and all(t["state"] == tasks for t in body["tasks"]))
            ):
                return body
            time.sleep(0.1)
        raise AssertionError(f"{name} did not reach {connector}/{tasks}: {body}")

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM (tasks commit and stop), then SIGKILL if it hangs. Returns the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        return self.proc.returncode
