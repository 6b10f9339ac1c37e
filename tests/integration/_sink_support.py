"""Shared helpers for the sink integration tests: one storage per backend, independent read-back.

Read-back never uses our own code beyond the layout contract: objects are listed raw, filtered
with ``partitioners.is_data_key`` and decoded with ``json``/``gzip`` from the standard library.
"""

from __future__ import annotations

import gzip
import json
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from partitioners import is_data_key
from sink.storage.base import Storage
from tests.batches import put_records


@dataclass
class Backend:
    """A storage backend under test, the bucket to use and the connector keys that reach it."""

    kind: str
    storage: Storage
    bucket: str
    config: dict[str, str]
    raw_list: Callable[[], list[str]]
    """Every key in the bucket, listed without our storage code (os.walk / boto3)."""
    raw_read: Callable[[str], bytes]


def make_backend(kind: str, tmp_path: Path, request: Any) -> Backend:
    if kind == "local":
        from sink.storage.local import LocalStorage

        root = tmp_path / "store"
        storage = LocalStorage(root)
        bucket = "bucket-one"
        storage.check_bucket(bucket)
        base = root / bucket

        def walk() -> list[str]:
            return sorted(
                (Path(d) / f).relative_to(base).as_posix() for d, _, files in os.walk(base) for f in files
            )

        return Backend(
            "local", storage, bucket, {"connect.storage": "local", "connect.local.root": str(root)},
            walk, lambda key: (base / key).read_bytes(),
        )
    from sink.config.settings import parse_settings
    from sink.storage.s3 import S3Storage

    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket_factory")("sink")
    config = endpoint.connect_config() | {"connect.s3.http.max.retries": "1"}
    settings = parse_settings({"name": "probe", "connect.s3.kcql": "x"} | config)
    client = request.getfixturevalue("s3_client")

    def listing() -> list[str]:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return sorted(keys)

    return Backend(
        "s3", S3Storage(settings.storage.s3), bucket, config,
        listing, lambda key: client.get_object(Bucket=bucket, Key=key)["Body"].read(),
    )


def raw_keys(backend: Backend) -> list[str]:
    return backend.raw_list()


def data_keys(backend: Backend, prefix: str = "") -> list[str]:
    return [key for key in raw_keys(backend) if is_data_key(key, prefix)]


def read_json_records(backend: Backend, prefix: str = "") -> list[tuple[str, Any]]:
    """Every JSON line of every committed data file as (key, parsed value), read independently."""
    out: list[tuple[str, Any]] = []
    for key in data_keys(backend, prefix):
        data = backend.raw_read(key)
        if key.endswith(".gz"):
            data = gzip.decompress(data)
        out.extend((key, json.loads(line)) for line in data.decode("utf-8").splitlines() if line.strip())
    return out


# -- a small driver shared by in-process tests and the SIGKILL child process -----------------------

TOPIC = "orders"


class InjectedCrash(Exception):
    """Raised by the fault hook to simulate the task dying at a commit step."""


def make_plan(spec: dict[str, Any]) -> Any:
    from kcql.model import FlushSettings, PartitionField, SinkPlan

    partitioned = bool(spec.get("partition_by"))
    return SinkPlan(
        bucket=spec["bucket"],
        prefix=spec["prefix"],
        source=TOPIC,
        flush=FlushSettings(count=spec["count"], size=spec["size"], interval=spec["interval"]),
        partition_by=(PartitionField("g", "value", ("g",)),) if partitioned else (),
        include_keys=partitioned,
    )


def make_record(offset: int, partition: int = 0) -> Any:
    from sink.records.record import SinkRecord

    return SinkRecord(
        TOPIC, partition, offset, timestamp=1_700_000_000_000 + offset,
        value={"id": offset, "p": partition, "g": offset % 3, "pad": "x" * 10},
    )


def drive(task: Any, spec: dict[str, Any], dead: threading.Event | None = None) -> int:
    """Open partition 0, put records from the resume offset to ``spec['n']``; returns the resume offset.

    ``dead``: set once the task has crashed (an injected fault on the timer thread); the driver
    stops feeding it then, as a dead task takes no more records, instead of sleeping out the
    pauses of the batches left."""
    import time

    from sink.records.record import TopicPartition

    tp = TopicPartition(TOPIC, 0)
    resume = task.open([tp]).get(tp, 0)
    offset = resume
    while offset < spec["n"]:
        batch = [make_record(o) for o in range(offset, min(offset + spec["batch"], spec["n"]))]
        put_records(task, batch)
        offset += len(batch)
        if spec.get("pause"):
            if dead is None:
                time.sleep(spec["pause"])
            elif dead.wait(spec["pause"]):
                break
    return resume


def _child_main(argv: list[str]) -> int:
    """Run the driver with a fault hook that SIGKILLs this process at the given step/occurrence."""
    import signal
    import time

    from sink.task.task import SinkTask

    spec = json.loads(argv[0])
    seen = {"count": 0}

    def hook(step: str) -> None:
        if step == spec["crash_step"]:
            seen["count"] += 1
            if seen["count"] == spec["crash_occurrence"]:
                os.kill(os.getpid(), signal.SIGKILL)

    task = SinkTask()
    task.start(spec["config"], plans=[make_plan(spec["plan"])])
    task.fault_hook = hook
    drive(task, spec)
    deadline = time.monotonic() + 20  # interval flushes happen on the timer: wait to be killed
    while time.monotonic() < deadline:
        time.sleep(0.05)
    return 3  # never reached the step: the test fails on this exit code


if __name__ == "__main__":
    import sys

    sys.exit(_child_main(sys.argv[1:]))
