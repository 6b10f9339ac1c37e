"""Per-task counters the worker reads for /metrics and /ui: a :class:`~sink.events.SinkObserver`.

The worker passes a task's :class:`TaskMetrics` to its runtime as the observer; the runtime and
the task report records consumed, files committed, offsets committed and record errors to it,
and nothing here reaches into their internals. Counters are plain ints and dicts mutated by the
task's threads and read (copied) by request threads; a slightly stale read is fine for
monitoring. Commit events also come from the task's commit threads, so the commit counters share
one lock.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Mapping

from sink.events import Outcome
from sink.records.record import TopicPartition

__all__ = ["LATENCY_BUCKETS", "TaskMetrics"]

LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class TaskMetrics:
    """Counters of one task, kept across restarts of its runtime (Prometheus counters never go down)."""

    def __init__(self) -> None:
        self.records_in: dict[TopicPartition, int] = {}
        self.bytes_in: dict[TopicPartition, int] = {}
        self.records_committed: dict[TopicPartition, int] = {}
        self.committed_offset: dict[TopicPartition, int] = {}
        self.commit_buckets = [0] * (len(LATENCY_BUCKETS) + 1)
        self.commit_sum = 0.0
        self.commit_count = 0
        self.failures = 0
        self.errors_tolerated = 0
        """Bad records skipped under the error policy (logged or dead-lettered)."""
        self.dead_lettered = 0
        self.files_committed = 0
        self.bytes_out = 0
        self.recent_files: deque[str] = deque(maxlen=20)
        self.last_error: tuple[float, str] | None = None
        """(unix time, message) of the last record error or warning the task had, for /ui."""
        self.restarts = 0
        self._rate_samples: deque[tuple[float, int]] = deque(maxlen=30)
        self._lock = threading.Lock()

    def observe_commit(self, seconds: float, key: str, size: int) -> None:
        """One file committed to storage in ``seconds``."""
        with self._lock:
            self.files_committed += 1
            self.bytes_out += size
            self.recent_files.append(key)
            self.commit_buckets[bisect.bisect_left(LATENCY_BUCKETS, seconds)] += 1
            self.commit_sum += seconds
            self.commit_count += 1

    def total_in(self) -> int:
        return sum(dict(self.records_in).values())

    def rate(self) -> float:
        """Records/s consumed over the last ~30 s of reads (sampled when /ui or /metrics is read)."""
        now, total = time.monotonic(), self.total_in()
        with self._lock:
            self._rate_samples.append((now, total))
            while len(self._rate_samples) > 1 and now - self._rate_samples[0][0] > 30:
                self._rate_samples.popleft()
            first_t, first_n = self._rate_samples[0]
        return (total - first_n) / (now - first_t) if now > first_t else 0.0

    # -- SinkObserver ---------------------------------------------------------------------------

    def records_consumed(self, tp: TopicPartition, records: int, nbytes: int) -> None:
        self.records_in[tp] = self.records_in.get(tp, 0) + records
        self.bytes_in[tp] = self.bytes_in.get(tp, 0) + nbytes

    def file_committed(self, tp: TopicPartition, key: str, records: int, nbytes: int, seconds: float) -> None:
        self.observe_commit(seconds, key, nbytes)

    def offsets_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        for tp, offset in offsets.items():
            before = self.committed_offset.get(tp)
            if before is not None and offset > before:
                self.records_committed[tp] = self.records_committed.get(tp, 0) + (offset - before)
            self.committed_offset[tp] = offset

    def record_failed(
        self, tp: TopicPartition, offset: int, stage: str, message: str, outcome: Outcome
    ) -> None:
        self.last_error = (time.time(), message)
        if outcome != "stopped":
            self.errors_tolerated += 1
        if outcome == "dead_lettered":
            self.dead_lettered += 1
