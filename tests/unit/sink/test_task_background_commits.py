"""Files that put fills are committed on threads (SinkTask.background_commits), safely.

The runtime turns background commits on so that consuming goes on while a full file is finished,
uploaded and fsynced. What must not change: Kafka offsets (pre_commit) never pass a record that
is not in a committed file, a partition's files reach the index in order, and a failed commit is
raised by a later put naming its partition, after which a rewind (close + open) writes every
record exactly once. Real local storage, real cheap batches; the files are read back with the
json module. A commit is held on an Event the test releases after its assertions, and a commit
that must wait is seen waiting (:func:`~tests.unit.sink.consumed.blocked_in_wait`): no sleeps.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest
from confluent_kafka import Message

from sink.events import NullObserver
from sink.records.batch import RecordBatch
from sink.records.converters import record_converter
from sink.records.intake import BatchBuilder
from sink.records.record import TopicPartition
from sink.storage.base import TransientStorageError
from sink.task.task import SinkTask
from tests.unit.sink.consumed import blocked_in_wait, messages, until
from tests.unit.sink.test_task_put import committed, decoded, plan_for, row, start

TP, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)
BUILDER = BatchBuilder(record_converter({}))


def batch(msgs: Sequence[Message]) -> RecordBatch:
    (built,) = BUILDER.build("t", msgs[0].partition() or 0, msgs)
    assert built.json_lines() is not None  # a real cheap batch
    return built


def ids_in(root: Path) -> list[int]:
    return sorted(v["id"] for lines in decoded(committed(root)).values() for v in lines)


class Commits(NullObserver):
    """Which files became visible, per partition, in order (called from the commit threads)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.keys: dict[TopicPartition, list[str]] = {}

    def file_committed(self, tp: TopicPartition, key: str, records: int, nbytes: int, seconds: float) -> None:
        with self._lock:
            self.keys.setdefault(tp, []).append(key)

    def of(self, tp: TopicPartition) -> list[str]:
        with self._lock:
            return list(self.keys.get(tp, []))


def background_task(root: Path, *tps: TopicPartition, observer: Commits | None = None) -> SinkTask:
    """A task committing full files in the background, the way the runtime runs it."""
    task = SinkTask(observer or NullObserver())
    task.start(
        {
            "name": "c",
            "connect.s3.kcql": "-",
            "connect.storage": "local",
            "connect.local.root": str(root / "store"),
            "connect.s3.local.tmp.directory": str(root / "staging"),
        },
        plans=[plan_for(count=100)],
    )
    task.background_commits = True
    task.open(list(tps or (TP,)))
    return task


HELD_STEP = "after-pending-recorded"
"""Where a commit is held: its pending op is in the index, the file not visible yet (both protocols)."""


class HeldUpload:
    """A fault hook holding the first commit before its upload until released (then optionally
    failing it), and recording every commit step with its thread."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.release = threading.Event()
        self.holding = threading.Event()
        self.returned = threading.Event()
        self._lock = threading.Lock()
        self.steps: list[tuple[str, str]] = []

    def __call__(self, step: str) -> None:
        with self._lock:
            self.steps.append((step, threading.current_thread().name))
            first = step == HELD_STEP and not self.holding.is_set()
        if not first:
            return
        self.holding.set()
        released = self.release.wait(10)
        self.returned.set()
        assert released, "the held upload was never released"
        if self.fail:
            raise TransientStorageError("PUT of the file failed: 503 SlowDown")

    def uploads(self) -> int:
        """Commits that got as far as their upload."""
        with self._lock:
            return sum(1 for step, _ in self.steps if step == HELD_STEP)


def test_put_goes_on_while_a_full_file_is_committed(tmp_path: Path) -> None:
    task = background_task(tmp_path)
    hook = task.fault_hook = HeldUpload()
    msgs = messages([row(i) for i in range(250)])
    try:
        task.put(batch(msgs[:100]))  # full: handed to a commit thread
        assert hook.holding.wait(10)
        task.put(batch(msgs[100:250]))  # fills a second file and starts a third
        # had either put waited for the held commit, the hook would have given up and returned
        assert not hook.returned.is_set(), "put waited for a background commit"
        assert TP not in task.pre_commit({TP: 250}), "an offset passed a file still being committed"
        assert committed(tmp_path) == {} and task.files_committed == 0
        hook.release.set()
        until(lambda: task.pre_commit({TP: 250}) == {TP: 200}, "both full files are committed")
        assert task.files_committed == 2  # 50 records are in the open file
        assert all(thread.startswith("kcql-sink-commit") for _, thread in hook.steps)
        task.close([TP])  # commits the open file after the background ones
        assert ids_in(tmp_path) == list(range(250))
    finally:
        hook.release.set()
        task.stop()


def test_a_failed_background_commit_is_raised_by_the_next_put_and_nothing_after_it_commits(
    tmp_path: Path,
) -> None:
    task = background_task(tmp_path, TP, TP1)
    hook = task.fault_hook = HeldUpload(fail=True)
    p0 = messages([row(i) for i in range(400)])
    p1 = messages([row(1000 + i) for i in range(100)], partition=1)
    try:
        task.put(batch(p0[:100]))  # its commit is held, then fails
        assert hook.holding.wait(10)
        task.put(batch(p0[100:200]))  # a second full file of the partition, queued behind the first
        second = task._queue._jobs[TP][1]
        hook.release.set()
        until(lambda: second.future is not None and second.future.done(), "the partition's jobs are done")
        # the next put raises it, whichever partition it is for, naming the partition to rewind
        with pytest.raises(TransientStorageError, match="SlowDown") as raised:
            task.put(batch(p1))
        assert raised.value.partitions == {TP}  # type: ignore[attr-defined]
        assert TP not in task.pre_commit({TP: 400, TP1: 100}), "offsets passed the file that failed"
        # nothing after the failed file was committed, or the index would have skipped it
        assert hook.uploads() == 1, "a file after the failed one was uploaded"
        assert committed(tmp_path) == {}
        # what the runtime does on a retriable storage error: rewind the partitions
        task.close([TP, TP1])
        resume = task.open([TP, TP1])
        assert resume.get(TP, 0) == 0
        for start_ in range(0, 400, 100):
            task.put(batch(p0[start_ : start_ + 100]))
        task.put(batch(p1))
        task.close([TP, TP1])
        assert ids_in(tmp_path) == [*range(400), *range(1000, 1100)]
    finally:
        hook.release.set()
        task.stop()


def test_without_background_commits_a_full_file_is_committed_when_put_returns(tmp_path: Path) -> None:
    task = start(tmp_path, plan_for(count=100))
    hook = task.fault_hook = HeldUpload()
    hook.release.set()
    try:
        task.open([TP])
        task.put(batch(messages([row(i) for i in range(130)])))
        assert ids_in(tmp_path) == list(range(100))
        assert task.pre_commit({TP: 130}) == {TP: 100} and task.files_committed == 1
        assert {thread for _, thread in hook.steps} == {threading.current_thread().name}
    finally:
        task.stop()


def test_partitions_commit_in_parallel_and_each_partition_in_order(tmp_path: Path) -> None:
    """Partition 0's first upload is held: partition 1's file is committed meanwhile, partition
    0's second file is not (it waits for the first, or the index would run ahead of the data)."""
    observer = Commits()
    task = background_task(tmp_path, TP, TP1, observer=observer)
    hook = task.fault_hook = HeldUpload()
    p0 = messages([row(i) for i in range(200)])
    p1 = messages([row(1000 + i) for i in range(100)], partition=1)
    try:
        task.put(batch(p0[:100]))
        assert hook.holding.wait(10)
        task.put(batch(p0[100:]))
        second = task._queue._jobs[TP][1]
        task.put(batch(p1))
        until(lambda: observer.of(TP1), "partition 1's file is committed while partition 0's is held")
        until(lambda: blocked_in_wait(second) or observer.of(TP), "partition 0's second file waits")
        assert observer.of(TP) == [], "partition 0's second file did not wait for its first"
        assert ids_in(tmp_path) == list(range(1000, 1100))
        hook.release.set()
        task.close([TP, TP1])
        assert observer.of(TP) == [  # in offset order
            "pre/t/0/000000000099_10000_10099.json", "pre/t/0/000000000199_10100_10199.json",
        ]
        assert ids_in(tmp_path) == [*range(200), *range(1000, 1100)]
    finally:
        hook.release.set()
        task.stop()
