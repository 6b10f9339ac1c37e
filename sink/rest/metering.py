"""Per-task counters the worker reads for /metrics and /ui, without changing the sink's code.

The runtime is wrapped at two seams it already offers: the task factory (``SinkRuntime(...,
task_factory=)``) and its record converter. :class:`MeteredTask` times ``put``/``pre_commit`` and
learns which offsets became durable; :class:`MeteredConverter` counts records and bytes consumed
per topic-partition, and :meth:`MeteredTask.put_block` counts those that skip the converter
(:mod:`sink.records.blocks`). Both add a dict update per record or call, nothing more. Counters are plain
ints mutated by the task thread and read (copied) by request threads; a slightly stale read is
fine for monitoring.

Files committed, bytes written, recent files and the commit latency histogram come from a proxy
around the task's committer (``SinkTask._committer`` after ``start``): each
``commit_direct``/``commit_exactly_once`` call is one file made visible. If the task has no such
attribute, these stay at zero.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sink.records.record import SinkRecord, TopicPartition

__all__ = [
    "LATENCY_BUCKETS",
    "MeteredCommitter",
    "MeteredConverter",
    "MeteredTask",
    "TaskMetrics",
    "metered_factory",
]

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


class MeteredConverter:
    """Wraps the runtime's ``RecordConverter``: counts consumed records and bytes per partition."""

    def __init__(self, inner: Any, metrics: TaskMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    def convert(self, msg: Any) -> SinkRecord:
        tp = TopicPartition(msg.topic(), msg.partition())
        m = self._metrics
        m.records_in[tp] = m.records_in.get(tp, 0) + 1
        m.bytes_in[tp] = m.bytes_in.get(tp, 0) + len(msg.value() or b"") + len(msg.key() or b"")
        try:
            return self._inner.convert(msg)
        except Exception as exc:
            where = f"topic {msg.topic()!r} partition {msg.partition()} offset {msg.offset()}"
            text = str(exc)
            m.last_error = (time.time(), text if where in text else f"{text} ({where})")
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class MeteredTask:
    """Wraps a ``SinkTask``: times pre-commit and counts records made durable per partition."""

    def __init__(self, inner: Any, metrics: TaskMetrics) -> None:
        self.inner = inner
        self._metrics = metrics

    def start(self, config: dict[str, str]) -> None:
        self.inner.start(config)
        committer = getattr(self.inner, "_committer", None)
        if committer is not None and not isinstance(committer, MeteredCommitter):
            self.inner._committer = MeteredCommitter(committer, self._metrics)

    def open(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return self.inner.open(partitions)  # type: ignore[no-any-return]

    def put(self, records: Sequence[SinkRecord]) -> None:
        try:
            self.inner.put(records)
        except Exception as exc:
            self._metrics.last_error = (time.time(), str(exc))
            raise

    def accepts_blocks(self, topic: str) -> bool:
        probe = getattr(self.inner, "accepts_blocks", None)
        return bool(probe is not None and probe(topic))

    @property
    def background_commits(self) -> bool:
        return bool(getattr(self.inner, "background_commits", False))

    @background_commits.setter
    def background_commits(self, on: bool) -> None:
        if hasattr(self.inner, "background_commits"):
            self.inner.background_commits = on

    def records_before_blocks(self, topic: str, partition: int, offset: int) -> int:
        probe = getattr(self.inner, "records_before_blocks", None)
        return 0 if probe is None else int(probe(topic, partition, offset))

    def prepare_blocks(self, blocks: Sequence[Any]) -> int:
        probe = getattr(self.inner, "prepare_blocks", None)
        return 0 if probe is None else int(probe(blocks))

    def put_block(self, block: Any) -> int:
        """Blocks skip the converter, so their records are counted here (the written prefix only:
        the runtime converts the rest, and :class:`MeteredConverter` counts those)."""
        try:
            done: int = self.inner.put_block(block)
        except Exception as exc:
            self._metrics.last_error = (time.time(), str(exc))
            raise
        if done:
            tp = TopicPartition(block.topic, block.partition)
            m = self._metrics
            m.records_in[tp] = m.records_in.get(tp, 0) + done
            size = sum(len(msg.value() or b"") + len(msg.key() or b"") for msg in block.messages[:done])
            m.bytes_in[tp] = m.bytes_in.get(tp, 0) + size
        return done

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        safe: dict[TopicPartition, int] = self.inner.pre_commit(offsets)
        m = self._metrics
        for tp, off in safe.items():
            if off is None or off < 0:
                continue
            before = m.committed_offset.get(tp)
            if before is not None and off > before:
                m.records_committed[tp] = m.records_committed.get(tp, 0) + (off - before)
            m.committed_offset[tp] = off
        return safe

    def close(self, partitions: list[TopicPartition]) -> None:
        self.inner.close(partitions)

    def stop(self) -> None:
        self.inner.stop()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class MeteredCommitter:
    """Wraps the task's ``Committer``: times each file commit, counts files and bytes, keeps recent keys.

    Both commit methods take ``(bucket or index, staging_path, final_key, ...)``.
    """

    def __init__(self, inner: Any, metrics: TaskMetrics) -> None:
        self._inner = inner
        self._metrics = metrics

    def _timed(self, method: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        staging, final_key = args[1], args[2]
        try:
            size = Path(staging).stat().st_size
        except (OSError, TypeError):
            size = 0
        started = time.perf_counter()
        result = method(*args, **kwargs)
        self._metrics.observe_commit(time.perf_counter() - started, str(final_key), size)
        return result

    def commit_direct(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._inner.commit_direct, args, kwargs)

    def commit_exactly_once(self, *args: Any, **kwargs: Any) -> Any:
        return self._timed(self._inner.commit_exactly_once, args, kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def metered_factory(factory: Callable[[], Any], metrics: TaskMetrics) -> Callable[[], MeteredTask]:
    """A task factory for ``SinkRuntime`` that wraps each task it builds."""
    return lambda: MeteredTask(factory(), metrics)
