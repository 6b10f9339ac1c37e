"""Streamed staging files (sink.commit.parts) against an in-memory store with S3's multipart rules.

The fake keeps incomplete uploads apart from objects (nothing is visible until completion),
refuses parts under the minimum size except the last one, and lists incomplete uploads by prefix,
as ListMultipartUploads does. Real S3 behaviour is checked in
tests/integration/test_sink_streaming.py on SeaweedFS.
"""

from __future__ import annotations

import io
import itertools
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

import pytest

import sink.task.task as task_module
from partitioners import is_data_key
from sink.commit.committer import Committer
from sink.commit.index import temp_prefix
from sink.commit.parts import StreamingUpload
from sink.records.record import SinkRecord, TopicPartition
from sink.storage.base import MultipartUpload, StorageError, TransientStorageError
from tests.batches import put_records
from tests.unit.sink.test_task_bounded import MemoryStorage

TP = TopicPartition("events", 0)
MIN_PART = 5 << 20


class StreamingMemoryStorage(MemoryStorage):
    """:class:`MemoryStorage` with multipart uploads (S3 semantics, in memory)."""

    supports_streaming = True

    def __init__(self, min_part: int = 5) -> None:
        super().__init__()
        self.min_part = min_part
        self.uploads: dict[str, tuple[str, dict[int, bytes]]] = {}
        self._ids = itertools.count()
        self.fail_parts = 0
        self.parts_sent = 0

    def create_multipart(self, bucket: str, key: str) -> str:
        if self.fail_parts:
            self.fail_parts -= 1
            raise TransientStorageError(f"start multipart upload {key} failed: SlowDown")
        upload_id = f"u{next(self._ids)}"
        self.uploads[upload_id] = (key, {})
        return upload_id

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, data: BinaryIO, size: int
    ) -> str:
        if self.fail_parts:
            self.fail_parts -= 1
            raise TransientStorageError(f"upload part {number} of {key} failed: SlowDown")
        owner, parts = self.uploads[upload_id]
        assert owner == key
        chunk = data.read(size)
        assert len(chunk) == size
        parts[number] = chunk
        self.parts_sent += 1
        return f'"p{number}-{len(chunk)}"'

    def complete_multipart(
        self, bucket: str, key: str, upload_id: str, parts: Sequence[tuple[int, str]]
    ) -> str:
        _, stored = self.uploads.pop(upload_id)
        numbers = [n for n, _ in parts]
        assert numbers == list(range(1, len(parts) + 1))
        for n in numbers[:-1]:
            assert len(stored[n]) >= self.min_part, f"part {n} is {len(stored[n])} bytes, under the minimum"
        return self._store(key, b"".join(stored[n] for n in numbers), False, None)

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        self.uploads.pop(upload_id, None)

    def list_multipart_uploads(self, bucket: str, prefix: str) -> Iterator[MultipartUpload]:
        for upload_id, (key, _) in sorted(self.uploads.items()):
            if key.startswith(prefix):
                yield MultipartUpload(key, upload_id)


def _send(upload: StreamingUpload, data: bytes) -> None:
    upload.upload_part(io.BytesIO(data), len(data))


# -- the state machine ---------------------------------------------------------------------------------


def test_parts_then_the_rest_complete_one_object_at_the_temporary_key(tmp_path: Path) -> None:
    storage = StreamingMemoryStorage()
    upload = StreamingUpload(storage, "b", ".temp-upload/c/t/0/", 5)
    assert not upload.started and storage.uploads == {}  # lazily: no upload before the first part
    _send(upload, b"aaaaa")
    _send(upload, b"bbbbbb")
    assert upload.started and upload.uploaded == 11
    assert storage.objects == {}  # nothing visible while streaming
    rest = tmp_path / "rest"
    rest.write_bytes(b"cc")
    key, etag = upload.complete(rest)
    assert key.startswith(".temp-upload/c/t/0/") and storage.objects[key] == (b"aaaaabbbbbbcc", etag)
    assert upload.complete(rest) == (key, etag)  # a retried commit does not complete twice
    assert storage.uploads == {}
    upload.committed = True
    upload.discard()  # after the commit: nothing to remove
    assert key in storage.objects


def test_an_empty_rest_adds_no_empty_part(tmp_path: Path) -> None:
    storage = StreamingMemoryStorage()
    upload = StreamingUpload(storage, "b", "t/", 5)
    _send(upload, b"12345")
    (tmp_path / "rest").write_bytes(b"")
    key, _ = upload.complete(tmp_path / "rest")
    assert storage.objects[key][0] == b"12345" and upload.parts == [(1, '"p1-5"')]


def test_discard_aborts_a_streaming_upload_and_deletes_a_completed_uncommitted_one(tmp_path: Path) -> None:
    storage = StreamingMemoryStorage()
    streaming = StreamingUpload(storage, "b", "t/", 5)
    _send(streaming, b"12345")
    streaming.discard()
    assert storage.uploads == {}

    completed = StreamingUpload(storage, "b", "t/", 5)
    _send(completed, b"12345")
    (tmp_path / "rest").write_bytes(b"x")
    key, _ = completed.complete(tmp_path / "rest")
    completed.discard()  # the commit failed after completion: the temporary object goes
    assert key not in storage.objects

    idle = StreamingUpload(storage, "b", "t/", 5)
    idle.discard()  # never started: nothing to do, and it cannot be used any more
    with pytest.raises(Exception, match="aborted"):
        _send(idle, b"12345")


def test_a_failed_part_poisons_the_upload_with_the_same_kind_of_error(tmp_path: Path) -> None:
    storage = StreamingMemoryStorage()
    upload = StreamingUpload(storage, "b", "t/", 5)
    _send(upload, b"12345")
    storage.fail_parts = 1
    with pytest.raises(TransientStorageError, match="SlowDown"):
        _send(upload, b"67890")
    (tmp_path / "rest").write_bytes(b"z")
    with pytest.raises(TransientStorageError, match="failed earlier"):  # retriable: replaying may work
        upload.complete(tmp_path / "rest")
    upload.discard()
    assert storage.uploads == {} and storage.objects == {}


def test_complete_of_a_never_started_upload_is_a_caller_error(tmp_path: Path) -> None:
    upload = StreamingUpload(StreamingMemoryStorage(), "b", "t/", 5)
    (tmp_path / "rest").write_bytes(b"z")
    with pytest.raises(Exception, match="never started"):
        upload.complete(tmp_path / "rest")


def test_recovery_aborts_only_the_partitions_incomplete_uploads() -> None:
    storage = StreamingMemoryStorage()
    committer = Committer(storage, "conn")
    mine = StreamingUpload(storage, "b", temp_prefix("conn", TP), 5)
    other = StreamingUpload(storage, "b", temp_prefix("conn", TopicPartition("events", 10)), 5)
    _send(mine, b"12345")
    _send(other, b"12345")
    committer.clean_temps("b", TP)
    assert [key for key, _ in storage.uploads.values()] == [other.key]


def test_the_base_storage_does_not_stream() -> None:
    storage = MemoryStorage()
    assert not storage.supports_streaming
    assert list(storage.list_multipart_uploads("b", "")) == []
    with pytest.raises(StorageError, match="does not stream"):
        storage.create_multipart("b", "k")


# -- through the task ---------------------------------------------------------------------------------


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> StreamingMemoryStorage:
    store = StreamingMemoryStorage(min_part=MIN_PART)
    monkeypatch.setattr(task_module, "create_storage", lambda settings: store)
    return store


def _task(
    staging: Path, tmp_path: Path, exactly_once: bool, budget: int | None = None
) -> task_module.SinkTask:
    task = task_module.SinkTask()
    config = {
        "name": "conn",
        "connect.storage": "local",  # replaced by the fake (which streams)
        "connect.local.root": str(tmp_path / "unused-root"),
        "connect.s3.local.tmp.directory": str(staging),
        "connect.s3.exactly.once.enable": str(exactly_once).lower(),
        "connect.s3.multipart.part.size": str(MIN_PART),
        "connect.s3.kcql": (
            "INSERT INTO bkt:out SELECT * FROM events STOREAS JSON "
            "PROPERTIES('flush.count'=20000, 'flush.size'=1000000000, 'flush.interval'=3600)"
        ),
    }
    if budget is not None:
        config["connect.s3.local.tmp.max.bytes"] = str(budget)
    task.start(config)
    return task


def _records(start: int, stop: int) -> list[SinkRecord]:
    pad = "x" * 1000
    return [
        SinkRecord("events", 0, i, 1_700_000_000_000, None, {"id": i, "pad": pad}) for i in range(start, stop)
    ]


def _staged(staging: Path) -> int:
    return sum(p.stat().st_size for p in staging.rglob("*") if p.is_file())


def _ids(storage: StreamingMemoryStorage) -> Counter[int]:
    ids: Counter[int] = Counter()
    for key, (data, _) in storage.objects.items():
        if is_data_key(key, "out"):
            ids.update(json.loads(line)["id"] for line in data.splitlines())
    return ids


@pytest.mark.parametrize("exactly_once", [True, False])
def test_a_large_file_streams_with_bounded_staging_and_commits_once(
    storage: StreamingMemoryStorage, tmp_path: Path, exactly_once: bool
) -> None:
    staging = tmp_path / "stage"
    task = _task(staging, tmp_path, exactly_once)
    task.open([TP])
    most = 0
    batch = 500  # ~0.5 MB of JSON lines per put
    for start in range(0, 20000, batch):
        put_records(task, _records(start, start + batch))
        most = max(most, _staged(staging))
    task.stop()
    assert storage.parts_sent >= 4  # ~20 MB in 5 MiB parts, the rest as the last part
    assert most < MIN_PART + 600_000, f"staging held {most} bytes"
    assert _ids(storage) == Counter(range(20000))
    leftovers = [k for k in storage.objects if k.startswith(".temp-upload/")]
    assert leftovers == [] and storage.uploads == {}


def test_a_crash_mid_stream_leaves_nothing_visible_and_the_next_owner_aborts_it(
    storage: StreamingMemoryStorage, tmp_path: Path
) -> None:
    crashed = _task(tmp_path / "stage-1", tmp_path, exactly_once=True)
    crashed.open([TP])
    put_records(crashed, _records(0, 8000))  # ~8 MB: one part up, the file still open
    assert len(storage.uploads) == 1
    assert not [k for k in storage.objects if is_data_key(k, "out")]
    # the task dies here: no close, no stop

    task = _task(tmp_path / "stage-2", tmp_path, exactly_once=True)
    resume = task.open([TP]).get(TP, 0)
    assert resume == 0 and storage.uploads == {}  # the interrupted upload was aborted
    put_records(task, _records(resume, 20000))
    task.stop()
    assert _ids(storage) == Counter(range(20000))


def test_the_staging_budget_counts_local_bytes_of_streamed_files(
    storage: StreamingMemoryStorage, tmp_path: Path
) -> None:
    # 8 MB budget: a streamed file holds < 5 MiB + a batch locally, so it never forces a commit,
    # although the file grows to ~20 MB
    task = _task(tmp_path / "stage", tmp_path, exactly_once=True, budget=8_000_000)
    task.open([TP])
    for start in range(0, 19000, 500):
        put_records(task, _records(start, start + 500))
    assert task.files_committed == 0
    put_records(task, _records(19000, 20000))
    assert task.files_committed == 1
    task.stop()
    assert _ids(storage) == Counter(range(20000))


def test_streaming_off_stages_files_whole(storage: StreamingMemoryStorage, tmp_path: Path) -> None:
    task = _task(tmp_path / "stage", tmp_path, exactly_once=True)
    task.streaming_uploads = False
    task.open([TP])
    put_records(task, _records(0, 8000))
    assert storage.parts_sent == 0 and _staged(tmp_path / "stage") > MIN_PART
    task.stop()


def test_a_file_that_lost_a_part_is_never_committed(storage: StreamingMemoryStorage, tmp_path: Path) -> None:
    task = _task(tmp_path / "stage", tmp_path, exactly_once=True)
    task.open([TP])
    put_records(task, _records(0, 3000))  # under a part: local only
    storage.fail_parts = 1  # the upload cannot even start: nothing went up, the local file is whole
    with pytest.raises(TransientStorageError):
        put_records(task, _records(3000, 8000))  # written locally, but not accounted for
    task.close([TP])  # exactly-once close tries to commit the open file: it must refuse it
    task.stop()
    assert not [k for k in storage.objects if is_data_key(k, "out")]
    assert storage.uploads == {}
    assert not [k for k in storage.objects if k.startswith(".temp-upload/")]


def test_a_file_needing_more_parts_than_s3_allows_fails_naming_the_settings(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("sink.commit.parts.MAX_PARTS", 3)
    upload = StreamingUpload(StreamingMemoryStorage(), "b", "t/", 5)
    _send(upload, b"12345")
    _send(upload, b"12345")
    with pytest.raises(StorageError, match=r"more than 3 parts .*multipart.part.size") as caught:
        _send(upload, b"12345")  # the third number is the last part's
    assert not caught.value.retriable
