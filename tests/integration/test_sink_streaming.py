"""Streamed staging files on a real S3 (SeaweedFS): large files go up part by part while written.

* the multipart calls of :class:`~sink.storage.s3.S3Storage` behave as the commit needs (nothing
  visible before completion, the completed etag usable as ``CopySourceIfMatch``, abort idempotent);
* a file several parts large is committed through its upload, read back with pyarrow / json, while
  the staging directory never holds more than about a part plus one batch;
* a task dying mid-stream leaves nothing visible, and the next owner aborts the incomplete upload
  and writes every record exactly once; so does a crash between the steps of a streamed commit.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from kcql.model import FlushSettings, SinkPlan, StoreFormat
from sink.records.record import SinkRecord, TopicPartition
from sink.storage.base import PreconditionFailed
from sink.storage.s3 import S3Storage
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_support import Backend, InjectedCrash, data_keys, make_backend, raw_keys

PART = 5 << 20
TP = TopicPartition("events", 0)
N = 18_000  # ~18 MB of ~1 KB values: three full parts and a last one
BATCH = 500


@pytest.fixture
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend("s3", tmp_path, request)


def _uploads(request: pytest.FixtureRequest, bucket: str) -> list[str]:
    """Incomplete multipart uploads in the bucket, listed with boto3 directly."""
    client = request.getfixturevalue("s3_client")
    return [u["Key"] for u in client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])]


def test_s3_multipart_calls(backend: Backend, request: pytest.FixtureRequest, tmp_path: Path) -> None:
    storage, bucket = backend.storage, backend.bucket
    key = ".temp-upload/c/t/0/" + uuid.uuid4().hex
    upload_id = storage.create_multipart(bucket, key)
    first = bytes(range(256)) * (PART // 256)
    etags = [(1, storage.upload_part(bucket, key, upload_id, 1, io.BytesIO(first), len(first)))]
    etags.append((2, storage.upload_part(bucket, key, upload_id, 2, io.BytesIO(b"tail"), 4)))
    assert storage.head(bucket, key) is None  # nothing visible before completion
    assert [u.key for u in storage.list_multipart_uploads(bucket, ".temp-upload/c/t/0/")] == [key]
    assert list(storage.list_multipart_uploads(bucket, ".temp-upload/c/t/1/")) == []
    etag = storage.complete_multipart(bucket, key, upload_id, etags)
    assert backend.raw_read(key) == first + b"tail"
    assert _uploads(request, bucket) == []
    with pytest.raises(PreconditionFailed):
        storage.copy(bucket, key, "out/x", if_match='"0123456789abcdef0123456789abcdef"')
    storage.copy(bucket, key, "out/x", if_match=etag)  # the etag the commit records works as a condition
    assert backend.raw_read("out/x") == first + b"tail"

    dropped = storage.create_multipart(bucket, key + "-dropped")
    storage.upload_part(bucket, key + "-dropped", dropped, 1, io.BytesIO(b"x"), 1)
    storage.abort_multipart(bucket, key + "-dropped", dropped)
    storage.abort_multipart(bucket, key + "-dropped", dropped)  # idempotent
    assert _uploads(request, bucket) == []
    assert storage.head(bucket, key + "-dropped") is None


def _plan(backend: Backend, fmt: StoreFormat, prefix: str) -> SinkPlan:
    return SinkPlan(
        bucket=backend.bucket, prefix=prefix, source="events", format=fmt,
        flush=FlushSettings(count=N, size=10**9, interval=3600),
    )


def _config(backend: Backend, tmp_path: Path, staging: str, **extra: str) -> dict[str, str]:
    return backend.config | {
        "name": f"stream-{uuid.uuid4().hex[:6]}",
        "connect.s3.kcql": "unused: plans are given directly",
        "connect.s3.local.tmp.directory": str(tmp_path / staging),
        "connect.s3.multipart.part.size": str(PART),
    } | extra


def _records(start: int, stop: int) -> list[SinkRecord]:
    """~1 KB values that do not compress (a Parquet file must be as large as the JSON one)."""
    return [
        SinkRecord(
            "events", 0, i, 1_700_000_000_000 + i, None,
            {"id": i, "pad": random.Random(i).randbytes(500).hex()},
        )
        for i in range(start, stop)
    ]


def _count_parts(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Sizes of the parts the sink's S3 storage uploads (a spy on the real call)."""
    sizes: list[int] = []
    real = S3Storage.upload_part

    def spy(self: S3Storage, bucket: str, key: str, upload_id: str, number: int, data: Any, size: int) -> str:
        sizes.append(size)
        return real(self, bucket, key, upload_id, number, data, size)

    monkeypatch.setattr(S3Storage, "upload_part", spy)
    return sizes


def _staged(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file())


def _ids(backend: Backend, prefix: str, fmt: StoreFormat) -> Counter[int]:
    ids: Counter[int] = Counter()
    for key in data_keys(backend, prefix):
        data = backend.raw_read(key)
        if fmt is StoreFormat.PARQUET:
            ids.update(pq.read_table(io.BytesIO(data)).column("id").to_pylist())
        else:
            ids.update(json.loads(line)["id"] for line in data.splitlines())
    return ids


@pytest.mark.parametrize("fmt", [StoreFormat.JSON, StoreFormat.PARQUET])
@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_file_of_several_parts_streams_with_bounded_staging(
    backend: Backend, request: pytest.FixtureRequest, tmp_path: Path, fmt: StoreFormat, exactly_once: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    eos = {"connect.s3.exactly.once.enable": str(exactly_once).lower()}
    config = _config(backend, tmp_path, "staging", **eos)
    parts = _count_parts(monkeypatch)
    prefix = f"out-{fmt.name.lower()}"
    task = SinkTask()
    task.start(config, plans=[_plan(backend, fmt, prefix)])
    most, streamed_while_open = 0, False
    try:
        task.open([TP])
        for start in range(0, N, BATCH):
            put_records(task, _records(start, start + BATCH))
            if start + BATCH < N:  # the file is open: its parts are up, nothing visible yet
                most = max(most, _staged(tmp_path / "staging"))
                streamed_while_open |= bool(_uploads(request, backend.bucket))
                assert data_keys(backend, prefix) == []
        assert task.files_committed == 1  # flush.count = N
    finally:
        task.stop()
    assert parts and sum(parts) > 3 * PART, parts  # the file went up in parts: none staged whole
    # JSON streams as it is written; Parquet holds its row group in memory (up to 64 MB, see
    # formats.parquet_format) and writes it at close, where it streams just the same
    assert streamed_while_open is (fmt is StoreFormat.JSON)
    # a part, plus what one batch adds before the next hand-over
    assert most < PART + 700_000, f"staging held {most} bytes"
    keys = data_keys(backend, prefix)
    assert len(keys) == 1
    assert _ids(backend, prefix, fmt) == Counter(range(N))
    assert [k for k in raw_keys(backend) if k.startswith(".temp-upload/")] == []
    assert _uploads(request, backend.bucket) == []
    if fmt is StoreFormat.JSON:
        head = request.getfixturevalue("s3_client").head_object(Bucket=backend.bucket, Key=keys[0])
        assert head["ContentLength"] > 3 * PART


def _die(task: SinkTask, request: pytest.FixtureRequest) -> None:
    """The task dies: its flush timer stops (a dead process retries nothing, and a live timer
    would keep committing into later tests); what it leaves in storage stays. Its resources are
    released once the test is over."""
    assert task._timer is not None
    task._timer.stop()
    request.addfinalizer(task.stop)


def test_a_task_dying_mid_stream_leaves_nothing_visible_and_the_next_owner_cleans_up(
    backend: Backend, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    config = _config(backend, tmp_path, "staging-1")
    plan = _plan(backend, StoreFormat.JSON, "crash")
    dead = SinkTask()
    dead.start(config, plans=[plan])
    dead.open([TP])
    put_records(dead, _records(0, 8_000))  # one part up, the file open
    assert len(_uploads(request, backend.bucket)) == 1
    # the task dies here: no close, no stop (its staging directory and upload are left behind)
    _die(dead, request)
    assert data_keys(backend, "crash") == []

    task = SinkTask()
    task.start(config | {"connect.s3.local.tmp.directory": str(tmp_path / "staging-2")}, plans=[plan])
    try:
        resume = task.open([TP]).get(TP, 0)
        assert resume == 0
        assert _uploads(request, backend.bucket) == []  # recovery aborted the interrupted upload
        put_records(task, _records(resume, N))
    finally:
        task.stop()
    assert _ids(backend, "crash", StoreFormat.JSON) == Counter(range(N))
    assert [k for k in raw_keys(backend) if k.startswith(".temp-upload/")] == []


@pytest.mark.parametrize("step", ["after-upload", "after-pending-recorded", "after-copy"])
def test_a_crash_inside_a_streamed_commit_is_recovered(
    backend: Backend, request: pytest.FixtureRequest, tmp_path: Path, step: str
) -> None:
    config = _config(backend, tmp_path, "staging-1")
    plan = _plan(backend, StoreFormat.JSON, "steps")

    def crash(name: str) -> None:
        if name == step:
            raise InjectedCrash(name)

    dead = SinkTask()
    dead.start(config, plans=[plan])
    dead.fault_hook = crash
    dead.open([TP])
    with contextlib.suppress(InjectedCrash):
        put_records(dead, _records(0, N))
    _die(dead, request)
    assert dead.files_committed == 0
    # abandoned (no stop): whatever the step left is the next owner's to finish or undo

    task = SinkTask()
    task.start(config | {"connect.s3.local.tmp.directory": str(tmp_path / "staging-2")}, plans=[plan])
    try:
        resume = task.open([TP]).get(TP, 0)
        put_records(task, _records(resume, N + 1000))
        task.close([TP])  # exactly-once: the open file is committed
    finally:
        task.stop()
    assert _ids(backend, "steps", StoreFormat.JSON) == Counter(range(N + 1000))
    assert [k for k in raw_keys(backend) if k.startswith(".temp-upload/")] == []
    assert _uploads(request, backend.bucket) == []
    # data keys differ only if a commit was rolled back and replayed: each record is once anyway
    assert all(not k.startswith(".") for k in data_keys(backend, "steps"))
