"""Bounded resources: 20,000 distinct PARTITIONBY values through one task.

The Confluent sink keeps one part buffer per encoded partition (OOM at part size x partitions)
and Lenses opens one staging file per partition value. Here at most
``connect.s3.max.open.writers`` staging files are open at once (the least recently used one is
committed first), so file descriptors stay flat, and the exactly-once index stays small however
many values pass through, also when one "hot" value keeps a file open for a long time.

The storage is an in-memory fake with real conditional-write semantics (a unit test: tens of
thousands of files on a real disk take minutes of fsyncs); the staging files are real files, on tmpfs
when the machine has one.
"""

from __future__ import annotations

import itertools
import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

import sink.task.task as task_module
from partitioners import is_data_key
from sink.records.record import SinkRecord, TopicPartition
from sink.storage.base import ObjectInfo, ObjectNotFound, PreconditionFailed, Storage, StoredObject
from sink.task.descriptors import DescriptorBudget
from tests.batches import put_records

TP = TopicPartition("events", 0)
MAX_OPEN = 64
INDEX_LIMIT = 100_000
"""Bytes an index object may reach; it is rewritten on every commit, so it must stay small."""


class MemoryStorage(Storage):
    """A dict with S3's conditional semantics; remembers the largest index object ever written."""

    def __init__(self) -> None:
        self.objects: dict[str, tuple[bytes, str]] = {}
        self._etags = itertools.count()
        self.largest_index = 0

    def uri(self, bucket: str, key: str = "") -> str:
        return f"mem://{bucket}/{key}"

    def check_bucket(self, bucket: str) -> None:
        return None

    def _store(self, key: str, data: bytes, if_none_match: bool, if_match: str | None) -> str:
        current = self.objects.get(key)
        if if_none_match and current is not None:
            raise PreconditionFailed(f"{key} exists")
        if if_match is not None and (current is None or current[1] != if_match):
            raise PreconditionFailed(f"{key} changed")
        if key.startswith(".indexes/"):
            self.largest_index = max(self.largest_index, len(data))
            assert len(data) < INDEX_LIMIT, f"index object grew to {len(data)} bytes: {data[:200]!r}..."
        etag = f'"{next(self._etags)}"'
        self.objects[key] = (data, etag)
        return etag

    def put_file(
        self, bucket: str, key: str, path: Path, *, if_none_match: bool = False, if_match: str | None = None,
        adopt: bool = False, etag: bool = True,
    ) -> str:
        return self._store(key, Path(path).read_bytes(), if_none_match, if_match)

    def put_bytes(
        self, bucket: str, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        return self._store(key, data, if_none_match, if_match)

    def get(self, bucket: str, key: str) -> StoredObject:
        if key not in self.objects:
            raise ObjectNotFound(key)
        data, etag = self.objects[key]
        return StoredObject(data, etag)

    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        if key not in self.objects:
            return None
        data, etag = self.objects[key]
        return ObjectInfo(key, len(data), etag)

    def copy(self, bucket: str, source: str, dest: str, *, if_match: str | None = None) -> None:
        if source not in self.objects:
            raise ObjectNotFound(source)
        data, etag = self.objects[source]
        if if_match is not None and etag != if_match:
            raise PreconditionFailed(f"{source} changed")
        self._store(dest, data, False, None)

    def delete(self, bucket: str, key: str) -> None:
        self.objects.pop(key, None)

    def list(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        for key in sorted(k for k in self.objects if k.startswith(prefix)):
            yield ObjectInfo(key, len(self.objects[key][0]), self.objects[key][1])


@pytest.fixture
def storage(monkeypatch: pytest.MonkeyPatch) -> MemoryStorage:
    store = MemoryStorage()
    monkeypatch.setattr(task_module, "create_storage", lambda settings: store)
    return store


@pytest.fixture
def staging(tmp_path: Path) -> Iterator[Path]:
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        import tempfile

        directory = Path(tempfile.mkdtemp(prefix="kcql-sink-bounded-", dir=shm))
        yield directory
        import shutil

        shutil.rmtree(directory, ignore_errors=True)
    else:
        yield tmp_path / "stage"


def _task(staging: Path, tmp_path: Path) -> task_module.SinkTask:
    task = task_module.SinkTask()
    task.start(
        {
            "name": "bounded",
            "connect.storage": "local",
            "connect.local.root": str(tmp_path / "unused-root"),
            "connect.s3.local.tmp.directory": str(staging),
            "connect.s3.max.open.writers": str(MAX_OPEN),
            "connect.s3.kcql": (
                "INSERT INTO bkt:out SELECT * FROM events PARTITIONBY k STOREAS JSON "
                "PROPERTIES('flush.count'=1000000, 'flush.interval'=3600)"
            ),
        }
    )
    return task


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _run(task: task_module.SinkTask, total: int, key_of: object) -> int:
    """Put ``total`` records; returns the most file descriptors seen above the start."""
    task.open([TP])
    baseline = _open_fds()
    worst = 0
    for start in range(0, total, 1000):
        batch = [
            SinkRecord("events", 0, i, 1_700_000_000_000, None, {"k": key_of(i), "id": i})  # type: ignore[operator]
            for i in range(start, min(start + 1000, total))
        ]
        put_records(task, batch)
        assert len(task._pool) <= MAX_OPEN
        worst = max(worst, _open_fds() - baseline)
    task.close([TP])
    return worst


def _committed_ids(storage: MemoryStorage) -> Counter[int]:
    ids: Counter[int] = Counter()
    for key, (data, _) in storage.objects.items():
        if is_data_key(key, "out"):
            ids.update(json.loads(line)["id"] for line in data.splitlines())
    return ids


def test_20k_distinct_values_keep_writers_and_descriptors_bounded(
    storage: MemoryStorage, staging: Path, tmp_path: Path
) -> None:
    """20,000 values are over 300 times ``MAX_OPEN``: a pool or index that grew per value would
    show it as clearly as with 100,000 (which took 45 s of the suite and proved nothing more)."""
    total = 20_000
    assert total > 300 * MAX_OPEN
    task = _task(staging, tmp_path)
    try:
        worst_fds = _run(task, total, lambda i: f"v{i}")
    finally:
        task.stop()
    assert worst_fds <= MAX_OPEN + 8, f"{worst_fds} more descriptors open than at the start"
    assert _committed_ids(storage) == Counter(range(total))
    assert sum(1 for key in storage.objects if is_data_key(key, "out")) == total
    assert not [k for k in storage.objects if k.startswith(".temp-upload/")]
    assert storage.largest_index < 2_000


def test_a_hot_value_holding_the_offset_back_does_not_grow_the_index(
    storage: MemoryStorage, staging: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every other record has the same value: that file stays open (recently used, below the
    flush limits) and holds the partition's committed offset back while 4,000 other values
    are committed. The per-path offsets kept meanwhile must not grow without bound, or every
    index write (two per commit) rewrites an ever larger object: quadratic time.

    ``MAX_PATHS_AHEAD`` is lowered to 200 so that 4,000 values (20 times the bound) suffice: the
    bounded index stays near 4 KB, an unbounded one reaches about 66 KB, far above
    ``hot_limit`` (at the real 1,000 it took 15,000 values, 12 s, to pass ``INDEX_LIMIT``)."""
    ahead = 200
    monkeypatch.setattr(task_module, "MAX_PATHS_AHEAD", ahead)
    total = 8_000
    hot_limit = 20_000
    assert total // 2 >= 20 * ahead
    task = _task(staging, tmp_path)
    try:
        _run(task, total, lambda i: "hot" if i % 2 == 0 else f"v{i}")
    finally:
        task.stop()
    assert _committed_ids(storage) == Counter(range(total))
    assert storage.largest_index < hot_limit, f"index grew to {storage.largest_index} bytes"


def _staged_bytes(directory: Path) -> int:
    return sum((Path(d) / f).stat().st_size for d, _, files in os.walk(directory) for f in files)


def test_staging_bytes_budget_commits_the_largest_files_early(storage: MemoryStorage, tmp_path: Path) -> None:
    """``connect.s3.local.tmp.max.bytes`` bounds the disk the open staging files use."""
    budget = 30_000
    staging = tmp_path / "stage"
    task = task_module.SinkTask()
    task.start(
        {
            "name": "budget",
            "connect.storage": "local",
            "connect.local.root": str(tmp_path / "unused-root"),
            "connect.s3.local.tmp.directory": str(staging),
            "connect.s3.local.tmp.max.bytes": str(budget),
            "connect.s3.kcql": (
                "INSERT INTO bkt:out SELECT * FROM events PARTITIONBY k STOREAS JSON "
                "PROPERTIES('flush.count'=1000000, 'flush.interval'=3600)"
            ),
        }
    )
    total, batch = 2_000, 20
    worst = 0
    try:
        task.open([TP])
        for start in range(0, total, batch):
            put_records(task,
                [
                    SinkRecord("events", 0, i, 1, None, {"k": f"v{i % 40}", "id": i, "pad": "p" * 300})
                    for i in range(start, start + batch)
                ]
            )
            worst = max(worst, _staged_bytes(staging))
        task.close([TP])
    finally:
        task.stop()
    assert worst <= budget + batch * 400, f"staging reached {worst} bytes with a {budget} budget"
    assert total * 300 > 10 * budget, "the data must be far larger than the budget for this to mean anything"
    assert _committed_ids(storage) == Counter(range(total))


def test_closing_hundreds_of_open_files_commits_each_once(
    storage: MemoryStorage, staging: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``close`` commits every open file of the partition. Committed out of order, each file adds
    a per-path entry to the index, and past ``MAX_PATHS_AHEAD`` the oldest file is committed
    first; that used to recurse once per file and, with 10,000 PARTITIONBY values open, ran
    past Python's stack limit, so close failed and everything was replayed."""
    monkeypatch.setattr(task_module, "MAX_PATHS_AHEAD", 20)
    total = 600
    task = task_module.SinkTask()
    task.start(
        {
            "name": "close-many",
            "connect.storage": "local",
            "connect.local.root": str(tmp_path / "unused-root"),
            "connect.s3.local.tmp.directory": str(staging),
            "connect.s3.max.open.writers": str(total),
            "connect.s3.kcql": (
                "INSERT INTO bkt:out SELECT * FROM events PARTITIONBY k STOREAS JSON "
                "PROPERTIES('flush.count'=1000000, 'flush.interval'=3600)"
            ),
        }
    )
    try:
        task.open([TP])
        # each value's file spans the others (offsets i, i + 600, i + 1200): whichever file is
        # committed, the rest of the partition's files keep committedOffset below its last offset
        records = [SinkRecord("events", 0, i, 1, None, {"k": f"v{i % total}", "id": i})
                   for i in range(3 * total)]
        put_records(task, records)
        assert len(task._pool) == total
        task.close([TP])
    finally:
        task.stop()
    assert _committed_ids(storage) == Counter(range(3 * total))
    assert storage.largest_index < INDEX_LIMIT


def test_the_process_descriptor_budget_bounds_open_files_below_max_open_writers(
    storage: MemoryStorage, staging: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``max.open.writers`` above what RLIMIT_NOFILE allows: the pool commits its least recently
    used file at the process's budget instead of failing with EMFILE."""
    budget = DescriptorBudget(40)
    monkeypatch.setattr(task_module, "process_budget", lambda: budget)
    total = 5_000
    task = _task(staging, tmp_path)  # max.open.writers = 64 > 40
    try:
        task.open([TP])
        for start in range(0, total, 500):
            put_records(task, [SinkRecord("events", 0, i, 1, None, {"k": f"v{i % 300}", "id": i})
                               for i in range(start, start + 500)])
            assert len(task._pool) <= 40
            assert budget.open == len(task._pool)
        task.close([TP])
    finally:
        task.stop()
    assert budget.open == 0, "every writer gave its descriptor back"
    assert _committed_ids(storage) == Counter(range(total))


def test_pools_of_one_process_share_the_descriptor_budget() -> None:
    """Two tasks of one worker: the second finds the budget the first spent; a pool holding no
    writer may still open one (it has nothing to commit to make room)."""
    from sink.task.writers import WriterPool

    budget = DescriptorBudget(3)
    first, second = WriterPool(10, budget), WriterPool(10, budget)
    writers = [_FakeWriter(i) for i in range(4)]
    for w in writers[:3]:
        first.add(w)  # type: ignore[arg-type]
    assert budget.spent and first.full
    assert not second.full, "an empty pool can always open one file"
    second.add(writers[3])  # type: ignore[arg-type]
    assert second.full
    first.remove(writers[0])  # type: ignore[arg-type]
    first.remove(writers[0])  # type: ignore[arg-type]  # twice: gives back once
    assert budget.open == 3
    assert first.full and second.full, "the budget is spent again by the second pool's writer"


class _FakeWriter:
    def __init__(self, n: int) -> None:
        self.key = ("slot", n)
        self.tp = TP
