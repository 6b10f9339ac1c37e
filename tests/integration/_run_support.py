"""Helpers for the ``test_run_*`` tests: run the real runtime + task in a thread, read files back.

Read-back is independent of our code except for the layout contract (``partitioners.is_data_key``):
files are listed with ``os.walk``/boto3 and decoded with json, fastavro, pyarrow or plain bytes.
"""

from __future__ import annotations

import io
import json
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq

from partitioners import is_data_key
from sink.config.files import ConnectorConfig, parse_connector_config
from sink.runtime.loop import RuntimeOptions, SinkRuntime
from tests.fixtures.tansu import FAST_CONSUMER

__all__ = ["RunningSink", "decode", "fast_consumer_overrides", "local_files", "make_config", "wait_for"]


def fast_consumer_overrides() -> dict[str, str]:
    """``consumer.override.*`` keys that keep group joins fast on Tansu (see the Tansu reference)."""
    keys = (
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "fetch.wait.max.ms",
        "topic.metadata.refresh.interval.ms",
    )
    return {f"consumer.override.{k}": str(FAST_CONSUMER[k]) for k in keys}


def make_config(props: dict[str, str], name: str | None = None) -> ConnectorConfig:
    """A Connect JSON config as users POST it, named uniquely (one consumer group per test)."""
    return parse_connector_config({"name": name or f"it-{uuid.uuid4().hex[:8]}", "config": props})


class RunningSink:
    """``SinkRuntime.run`` in a background thread; ``join`` stops it like SIGTERM would."""

    def __init__(self, cfg: ConnectorConfig, bootstrap: str, task_id: int = 0) -> None:
        self.runtime = SinkRuntime(cfg, RuntimeOptions(bootstrap, task_id=task_id, commit_interval=0.3))
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sink-{task_id}")
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 60) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the sink did not stop in time"


def wait_for(check: Callable[[], bool], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"{what} not reached within {timeout}s")


def local_files(root: Path, bucket: str, prefix: str) -> list[Path]:
    """Committed data files under ``root/bucket``, found by walking the directory."""
    base = root / bucket
    found = []
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            path = Path(dirpath, name)
            key = path.relative_to(base).as_posix()
            if is_data_key(key, prefix):
                found.append(path)
    return sorted(found)


def decode(data: bytes, fmt: str) -> list[Any]:
    """Rows of one file, decoded by an independent reader."""
    if fmt == "JSON":
        return [json.loads(line) for line in data.splitlines() if line]
    if fmt == "TEXT":
        return data.decode("utf-8").splitlines()
    if fmt == "BYTES":
        return [data]
    if fmt == "AVRO":
        return list(fastavro.reader(io.BytesIO(data)))
    if fmt == "PARQUET":
        return pq.read_table(io.BytesIO(data)).to_pylist()
    raise ValueError(fmt)
