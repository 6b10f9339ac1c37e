"""Background commits: full files committed on threads while the consumer goes on.

Finishing, uploading and fsyncing a file takes tens of milliseconds; a task that filled a file
need not wait for it. :class:`CommitQueue` runs those commits on up to :data:`MAX_JOBS` threads,
different partitions in parallel and each partition's files one after the other, in the order
they were handed over (a partition's index must advance file by file).

Ownership (docs/exactly-once.md, "Background commits"): while the queue holds a job of a
partition, that partition's index and its failure belong to the queue. The task never writes
such an index itself: every foreground commit, ``open``, ``close`` and ``stop`` calls
:meth:`CommitQueue.drain` first. A failed job stops every later job of its partition (the index
must not pass records that are not stored) until the task drops the partition
(:meth:`CommitQueue.forget`) and opens it again. The queue's own state (its jobs and failures)
is guarded by its lock, since jobs end on the commit threads.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from sink.records.record import TopicPartition

__all__ = ["MAX_JOBS", "CommitJob", "CommitQueue"]

MAX_JOBS = 4
"""Files in the queue at most (and threads); handing over one more waits for all of them."""

W = TypeVar("W")


@dataclass
class CommitJob(Generic[W]):
    """One finished file (its ``writer``) waiting to be committed."""

    tp: TopicPartition
    writer: W
    first_offset: int | None
    """The file's first record: the partition's safe offset stays below it until committed."""
    committed_after: int
    """The partition's committed offset once this file is in (computed when it was handed over)."""
    reason: str
    future: Future[None] | None = field(default=None, repr=False)
    ended: bool = field(default=False, repr=False)
    """Its commit returned or raised (set under the queue's lock, before the future is done)."""
    error: BaseException | None = field(default=None, repr=False)


class CommitQueue(Generic[W]):
    """Runs ``commit(job)`` for each job on a thread, a partition's jobs in order.

    Args:
        commit: commits one job's file; raises on failure (kept, see :meth:`take_error`).
    """

    def __init__(self, commit: Callable[[CommitJob[W]], None]) -> None:
        self._commit = commit
        self._lock = threading.Lock()
        self._jobs: dict[TopicPartition, list[CommitJob[W]]] = {}
        self._failed: dict[TopicPartition, BaseException] = {}
        """A partition whose commit failed: no later file of it may be committed."""
        self._unreported: dict[TopicPartition, BaseException] = {}
        self._reported: set[TopicPartition] = set()
        """Partitions whose failure :meth:`take_error` gave out (once is enough)."""
        self._pool: ThreadPoolExecutor | None = None
        self._ended = False
        """A job ended since the last reap: :meth:`reap`, called on every poll (several times
        per consumed batch), has nothing to look for otherwise."""

    def __len__(self) -> int:
        with self._lock:
            return sum(map(len, self._jobs.values()))

    def submit(self, job: CommitJob[W]) -> None:
        """Commit ``job`` on a thread after the partition's earlier jobs (waits when the queue is full)."""
        if len(self) >= MAX_JOBS:
            self.drain()  # back-pressure: memory and staging space of finished files
        with self._lock:
            jobs = self._jobs.setdefault(job.tp, [])
            previous = jobs[-1].future if jobs else None
            jobs.append(job)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=MAX_JOBS, thread_name_prefix="kcql-sink-commit")
        job.future = self._pool.submit(self._run, job, previous)

    def _run(self, job: CommitJob[W], previous: Future[None] | None) -> None:
        # previous was submitted earlier to the same FIFO pool, so it is running or done when this
        # job starts: waiting for it cannot deadlock
        if previous is not None:
            wait([previous])
        error: BaseException | None = None
        try:
            self._attempt(job)
        except BaseException as exc:
            error = exc
            raise
        finally:
            with self._lock:
                if error is not None:
                    self._failed.setdefault(job.tp, error)
                job.error, job.ended, self._ended = error, True, True

    def _attempt(self, job: CommitJob[W]) -> None:
        with self._lock:
            failed = self._failed.get(job.tp)
        if failed is not None:
            raise failed  # an earlier file of this partition is not stored
        self._commit(job)

    def failure(self, tp: TopicPartition) -> BaseException | None:
        """Why a commit of ``tp`` failed (no later file of it may be committed), or None."""
        with self._lock:
            return self._failed.get(tp)

    def first_offset(self, tp: TopicPartition) -> int | None:
        """The smallest first offset of ``tp``'s files in the queue (in flight, or failed)."""
        with self._lock:
            firsts = [j.first_offset for j in self._jobs.get(tp, ()) if j.first_offset is not None]
        return min(firsts) if firsts else None

    def reap(self) -> list[CommitJob[W]]:
        """Remove and return the jobs that are committed. A failed job stays (it holds its
        partition's safe offset back) and its error is kept for :meth:`take_error`."""
        done: list[CommitJob[W]] = []
        if not self._ended:  # read without the lock: a job ending now is seen by the next reap
            return done
        with self._lock:
            self._ended = False
            for tp in list(self._jobs):
                jobs = self._jobs[tp]
                while jobs and jobs[0].ended:
                    if jobs[0].error is not None:
                        if tp not in self._reported:
                            self._unreported.setdefault(tp, jobs[0].error)
                        break
                    done.append(jobs.pop(0))
                if not jobs:
                    del self._jobs[tp]
        return done

    def drain(self) -> list[CommitJob[W]]:
        """Wait for every job, then :meth:`reap`."""
        with self._lock:
            futures = [j.future for jobs in self._jobs.values() for j in jobs if j.future is not None]
        if futures:
            wait(futures)
        return self.reap()

    def take_error(self) -> tuple[TopicPartition, BaseException] | None:
        """The first commit failure not reported yet, and its partition."""
        self.reap()
        with self._lock:
            if not self._unreported:
                return None
            tp = next(iter(self._unreported))
            self._reported.add(tp)
            return tp, self._unreported.pop(tp)

    def forget(self, tp: TopicPartition) -> list[CommitJob[W]]:
        """Drop ``tp``: wait for its jobs, and return those not committed (their files must be
        discarded; the partition's next owner replays their records)."""
        self.drain()
        with self._lock:
            left = self._jobs.pop(tp, [])
            self._failed.pop(tp, None)
            self._unreported.pop(tp, None)
            self._reported.discard(tp)
        return left

    def close(self) -> None:
        """Wait for every job and stop the threads."""
        self.drain()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        with self._lock:
            self._failed.clear()
            self._unreported.clear()
            self._reported.clear()
