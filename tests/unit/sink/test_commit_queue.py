"""sink/commit/queue.py: CommitQueue runs commits on threads, partitions in parallel, each in order.

The commit function here is the test's: each job can be held on an Event until the test
releases it, or made to fail. Every "this has not happened (yet)" is proven by a condition the
test controls, never by a sleep: a job held on an Event cannot finish before the test releases
it, and :func:`~tests.unit.sink.consumed.blocked_in_wait` shows that a thread that must wait is
waiting, so it cannot go on before what it waits for is released.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from sink.commit.queue import MAX_JOBS, CommitJob, CommitQueue
from sink.records.record import TopicPartition
from tests.unit.sink.consumed import blocked_in_wait, until

TP0, TP1, TP2, TP3, TP4 = (TopicPartition("t", p) for p in range(5))


class Commits:
    """The queue's commit function: logs each job's start and end; a held job waits for its gate."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.log: list[tuple[str, str]] = []
        self.threads: dict[str, str] = {}
        self.gates: dict[str, threading.Event] = {}
        self.entered: dict[str, threading.Event] = {}
        self.failures: dict[str, BaseException] = {}

    def hold(self, name: str) -> threading.Event:
        gate = self.gates[name] = threading.Event()
        return gate

    def started(self, name: str) -> threading.Event:
        return self.entered.setdefault(name, threading.Event())

    def __call__(self, job: CommitJob[str]) -> None:
        name = job.writer
        with self._lock:
            self.log.append(("start", name))
            self.threads[name] = threading.current_thread().name
        self.started(name).set()
        gate = self.gates.get(name)
        if gate is not None:
            assert gate.wait(10), f"{name} was never released"
        if name in self.failures:
            raise self.failures[name]
        with self._lock:
            self.log.append(("end", name))

    def ended(self, name: str) -> bool:
        with self._lock:
            return ("end", name) in self.log

    def position(self, event: tuple[str, str]) -> int:
        with self._lock:
            return self.log.index(event)


def job(tp: TopicPartition, name: str, first: int | None = 0) -> CommitJob[str]:
    return CommitJob(tp, name, first, -1, "count")


@pytest.fixture
def commits() -> Commits:
    return Commits()


@pytest.fixture
def queue(commits: Commits) -> Iterator[CommitQueue[str]]:
    q: CommitQueue[str] = CommitQueue(commits)
    try:
        yield q
    finally:
        for gate in commits.gates.values():
            gate.set()
        q.close()


def test_submit_returns_while_the_commit_runs_on_a_commit_thread(
    commits: Commits, queue: CommitQueue[str]
) -> None:
    gate = commits.hold("a")
    a = job(TP0, "a", first=10)
    queue.submit(a)  # returns although the commit cannot finish before the gate opens
    assert commits.started("a").wait(10)
    assert len(queue) == 1 and queue.first_offset(TP0) == 10
    assert queue.reap() == [] and not commits.ended("a")
    gate.set()
    assert queue.drain() == [a]
    assert commits.threads["a"].startswith("kcql-sink-commit")
    assert len(queue) == 0 and queue.first_offset(TP0) is None
    assert queue.take_error() is None and queue.failure(TP0) is None


def test_partitions_commit_in_parallel_and_each_partition_in_order(
    commits: Commits, queue: CommitQueue[str]
) -> None:
    gate = commits.hold("p0-first")
    first, second, other = job(TP0, "p0-first", 0), job(TP0, "p0-second", 100), job(TP1, "p1", 0)
    queue.submit(first)
    assert commits.started("p0-first").wait(10)
    queue.submit(second)
    queue.submit(other)
    # partition 1 is not behind partition 0: its file is committed while p0's first one is held
    until(lambda: commits.ended("p1"), "partition 1's commit ends while partition 0's is held")
    # partition 0's second file waits for its first: once its thread is waiting, it cannot have
    # been committed before the gate opens (had it not waited, it would have started already)
    until(lambda: blocked_in_wait(second) or commits.started("p0-second").is_set(),
          "partition 0's second job waits or runs")
    assert not commits.started("p0-second").is_set(), "partition 0's second file did not wait for its first"
    assert queue.first_offset(TP0) == 0
    assert queue.reap() == [other]  # done jobs are reaped, the others stay in order
    gate.set()
    assert queue.drain() == [first, second]
    assert commits.position(("end", "p0-first")) < commits.position(("start", "p0-second"))


def test_a_failed_commit_stops_every_later_job_of_its_partition_and_only_of_it(
    commits: Commits, queue: CommitQueue[str]
) -> None:
    gate = commits.hold("p0-a")
    error = OSError("upload failed")
    commits.failures["p0-a"] = error
    a, b, c = job(TP0, "p0-a", 0), job(TP0, "p0-b", 100), job(TP1, "p1-a", 0)
    for each in (a, b, c):
        queue.submit(each)
    gate.set()
    done = queue.drain()
    assert done == [c]  # the failed job stays (it holds its partition's safe offset back), so does b
    assert ("start", "p0-b") not in commits.log, "a file after a failed one of its partition was committed"
    assert commits.ended("p1-a")
    assert queue.failure(TP0) is error and queue.failure(TP1) is None
    assert queue.first_offset(TP0) == 0
    assert queue.take_error() == (TP0, error)
    assert queue.take_error() is None  # reported once; failure() still says why the partition is stuck
    assert queue.failure(TP0) is error
    # a job handed over once the failure is known is not committed either
    late = job(TP0, "p0-late", 200)
    queue.submit(late)
    queue.drain()
    assert ("start", "p0-late") not in commits.log
    # dropping the partition gives back its files not committed, and forgets the failure
    assert queue.forget(TP0) == [a, b, late]
    assert queue.failure(TP0) is None and queue.first_offset(TP0) is None
    assert queue.take_error() is None
    again = job(TP0, "p0-again", 0)
    queue.submit(again)
    assert queue.drain() == [again] and commits.ended("p0-again")


def test_handing_over_one_more_job_than_the_queue_holds_waits_for_all(
    commits: Commits, queue: CommitQueue[str]
) -> None:
    tps = [TP0, TP1, TP2, TP3]
    assert len(tps) == MAX_JOBS
    gates = [commits.hold(f"j{i}") for i in range(MAX_JOBS)]
    held = [job(tp, f"j{i}") for i, tp in enumerate(tps)]
    for each in held:
        queue.submit(each)
    extra = job(TP4, "extra")
    handing = threading.Thread(target=queue.submit, args=(extra,))
    handing.start()
    until(lambda: blocked_in_wait(extra) or not handing.is_alive(), "the fifth hand-over waits or returns")
    assert handing.is_alive(), "a full queue took one more file without waiting (no back-pressure)"
    assert not commits.started("extra").is_set()
    for gate in gates:
        gate.set()
    handing.join(10)
    assert not handing.is_alive()
    assert queue.drain() == [extra]
    assert all(commits.ended(f"j{i}") for i in range(MAX_JOBS)) and commits.ended("extra")


def test_close_waits_for_every_job_and_the_queue_can_be_used_again(commits: Commits) -> None:
    queue: CommitQueue[str] = CommitQueue(commits)
    gate = commits.hold("a")
    queue.submit(job(TP0, "a"))
    closing = threading.Thread(target=queue.close)
    closing.start()
    until(lambda: blocked_in_wait(queue) or not closing.is_alive(), "close waits or returns")
    assert closing.is_alive() and not commits.ended("a"), "close returned before the commit ended"
    gate.set()
    closing.join(10)
    assert commits.ended("a")
    queue.submit(job(TP0, "b"))
    queue.close()
    assert commits.ended("b")
