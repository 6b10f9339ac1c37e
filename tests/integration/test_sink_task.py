"""SinkTask against real storage (local directory and SeaweedFS): fencing, the flush timer on an
idle partition, what close does, and the exactly-once-disabled mode."""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sink.commit.index import FencedError
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_support import (
    TOPIC,
    Backend,
    data_keys,
    make_backend,
    make_plan,
    make_record,
    raw_keys,
    read_json_records,
)

TP = TopicPartition(TOPIC, 0)


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _task(backend: Backend, tmp_path: Path, name: str, extra: dict[str, str] | None = None,
          **flush: Any) -> SinkTask:
    plan = {"bucket": backend.bucket, "prefix": f"p/{name}", "count": 100, "size": 10**9, "interval": 3600}
    plan.update(flush)
    task = SinkTask()
    task.start(
        backend.config | {"name": name, "connect.s3.kcql": "-",
                          "connect.s3.local.tmp.directory": str(tmp_path / "staging")} | (extra or {}),
        plans=[make_plan(plan)],
    )
    return task


def _ids(backend: Backend, name: str) -> Counter[int]:
    return Counter(v["id"] for _, v in read_json_records(backend, f"p/{name}"))


def test_only_the_newest_owner_can_commit(backend: Backend, tmp_path: Path) -> None:
    name = f"fence-{uuid.uuid4().hex[:6]}"
    old = _task(backend, tmp_path, name, count=3)
    new = _task(backend, tmp_path, name, count=3)
    try:
        assert old.open([TP]) == {}
        put_records(old, [make_record(0), make_record(1)])
        assert new.open([TP]) == {}  # takes the partition over: epoch 2
        with pytest.raises(FencedError) as err:
            put_records(old, [make_record(2)])  # reaches flush.count: the commit is refused
        message = str(err.value)
        assert f"partition {TOPIC}-0 is now owned by task {new.task_id} (epoch 2)" in message
        assert "fenced" in message
        assert data_keys(backend, f"p/{name}") == []
        temps = [k for k in raw_keys(backend) if k.startswith(".temp-upload/")]
        assert not temps  # the zombie removed its own temporary upload
        with pytest.raises(Exception, match="not open"):
            put_records(old, [make_record(3)])  # the fenced partition was dropped
        put_records(new, [make_record(i) for i in range(6)])
        assert new.pre_commit({TP: 6}) == {TP: 6}
    finally:
        old.stop()
        new.stop()
    assert _ids(backend, name) == Counter(range(6))


def test_fencing_in_the_weaker_mode_without_conditional_writes(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """S3 only: the local backend always has conditional writes."""
    backend = make_backend("s3", tmp_path, request)
    name = f"weak-{uuid.uuid4().hex[:6]}"
    extra = {"connect.s3.conditional.writes": "false"}
    old = _task(backend, tmp_path, name, extra, count=2)
    new = _task(backend, tmp_path, name, extra, count=2)
    try:
        old.open([TP])
        put_records(old, [make_record(0)])
        new.open([TP])
        with pytest.raises(FencedError):
            put_records(old, [make_record(1)])
        put_records(new, [make_record(0), make_record(1)])
    finally:
        old.stop()
        new.stop()
    assert _ids(backend, name) == Counter(range(2))


def test_idle_partition_is_flushed_by_the_timer(backend: Backend, tmp_path: Path) -> None:
    name = f"idle-{uuid.uuid4().hex[:6]}"
    task = _task(backend, tmp_path, name, interval=1)
    try:
        task.open([TP])
        put_records(task, [make_record(i) for i in range(3)])
        assert task.pre_commit({TP: 3}) == {}  # nothing is durable yet
        started = time.monotonic()
        while not data_keys(backend, f"p/{name}"):
            assert time.monotonic() - started < 1 + 2, "not flushed within flush.interval + 2 s"
            time.sleep(0.05)
        assert _ids(backend, name) == Counter(range(3))
        assert task.pre_commit({TP: 3}) == {TP: 3}
    finally:
        task.stop()


def test_close_commits_open_files_when_exactly_once(backend: Backend, tmp_path: Path) -> None:
    name = f"close-{uuid.uuid4().hex[:6]}"
    task = _task(backend, tmp_path, name)
    try:
        task.open([TP])
        put_records(task, [make_record(i) for i in range(5)])
        task.close([TP])
    finally:
        task.stop()
    assert _ids(backend, name) == Counter(range(5))
    again = _task(backend, tmp_path, name)
    try:
        assert again.open([TP]) == {TP: 5}
        put_records(again, [make_record(i) for i in range(3, 7)])  # a replay overlapping what is committed
        again.close([TP])
    finally:
        again.stop()
    assert _ids(backend, name) == Counter(range(7))


def test_exactly_once_disabled(backend: Backend, tmp_path: Path) -> None:
    name = f"plain-{uuid.uuid4().hex[:6]}"
    task = _task(backend, tmp_path, name, {"connect.s3.exactly.once.enable": "false"}, count=2)
    try:
        assert task.open([TP]) == {}
        put_records(task, [make_record(i) for i in range(5)])
        assert task.pre_commit({TP: 5}) == {TP: 4}  # record 4 is still in an open file
        task.close([TP])  # discarded: the Kafka offset (4) makes the next owner re-read it
    finally:
        task.stop()
    assert _ids(backend, name) == Counter(range(4))
    keys = raw_keys(backend)
    assert not [k for k in keys if k.startswith((".indexes/", ".temp-upload/"))]
    assert sorted(data_keys(backend, f"p/{name}")) == [
        f"p/{name}/{TOPIC}/0/000000000001_1700000000000_1700000000001.json",
        f"p/{name}/{TOPIC}/0/000000000003_1700000000002_1700000000003.json",
    ]


def test_index_object_format(backend: Backend, tmp_path: Path) -> None:
    name = f"idx-{uuid.uuid4().hex[:6]}"
    task = _task(backend, tmp_path, name, count=2)
    try:
        task.open([TP])
        put_records(task, [make_record(i) for i in range(3)])
    finally:
        task.stop()
    state = json.loads(backend.raw_read(f".indexes/{name}/{TOPIC}/0.json"))
    assert state == {
        "version": 2, "owner": task.task_id, "epoch": 1, "committedOffset": 1, "paths": {}, "pending": None,
    }
