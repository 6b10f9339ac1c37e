"""Open staging files: one :class:`PartitionWriter` per (topic, partition, partition path).

A writer streams batches of records into a staging file through the format's :class:`FormatWriter`
and tracks what the file's final name needs (first/last offset, min/max timestamp), which it reads
off the batches, never off the records. Memory per
writer is the format's encoder state only; the records themselves are on disk.

:class:`WriterPool` bounds how many writers are open at once (``connect.s3.max.open.writers``):
it keeps them in least-recently-used order so the task can commit the oldest one before opening
a new one, which keeps file handles and encoder memory flat however many distinct PARTITIONBY
values arrive.
"""

from __future__ import annotations

import contextlib
import logging
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from formats.base import FileFormat
from kcql.errors import RecordError
from partitioners.base import FileMeta
from sink.commit.staging import DISK_FULL, StagingFullError, staging_full
from sink.records.batch import RecordBatch
from sink.records.record import TopicPartition
from sink.task.descriptors import DescriptorBudget

if TYPE_CHECKING:
    from kcql.model import SinkPlan
    from sink.commit.index import PendingCommit
    from sink.commit.parts import StreamingUpload
    from sink.task.flush_policy import FlushPolicy, FlushReason

__all__ = ["TOPIC_SEPARATOR", "PartitionWriter", "WriterKey", "WriterPool", "writer_slot"]

log = logging.getLogger(__name__)

WriterKey = tuple[str, int, str]
"""(consumed topic, Kafka partition, slot): the slot is the partition path, prefixed with the
written topic and :data:`TOPIC_SEPARATOR` when a transform renamed the topic (RegexRouter), so
records of two written topics never share a file. The exactly-once index counts per slot."""

TOPIC_SEPARATOR = "\x1f"
"""Between a renamed topic and the path in a slot (a control character: in no topic or path)."""


def writer_slot(topic: str, source_topic: str, path: str) -> str:
    """The slot of records written under ``topic`` and ``path`` (see :data:`WriterKey`)."""
    return path if topic == source_topic else f"{topic}{TOPIC_SEPARATOR}{path}"


class PartitionWriter:
    """One staging file being filled. Not thread-safe: the task serialises access."""

    __slots__ = (
        "_format_writer", "broken", "extension", "finished", "first_offset", "key", "last_offset", "max_ts",
        "min_ts", "opened_at", "owed", "plan", "policy", "staging_path", "upload",
    )

    def __init__(
        self, key: WriterKey, plan: SinkPlan, file_format: FileFormat, staging_path: Path,
        policy: FlushPolicy, now: float, upload: StreamingUpload | None = None,
    ) -> None:
        self.key = key
        self.plan = plan
        self.policy = policy
        self.staging_path = staging_path
        self.extension = file_format.extension
        self.upload = upload
        """Where full parts of the file go while it is written (:mod:`sink.commit.parts`), if anywhere."""
        self.broken: StagingFullError | None = None
        """Set when a write found the staging disk full: the file may end mid-record, so it must
        never be committed (the task drops it and replays its records)."""
        with self._disk_full():
            self._format_writer = file_format.open(staging_path, upload)
        self.opened_at = now
        self.first_offset: int | None = None
        self.last_offset = -1
        self.min_ts: int | None = None
        self.max_ts: int | None = None
        self.finished = False
        self.owed: PendingCommit | None = None
        """The file the index owes for this slot (an interrupted conditional commit): this writer
        re-produces it, cut exactly at its last offset and committed under its final key; no
        flush limit applies to it (``docs/exactly-once.md``, *Rolling forward by replay*)."""

    @property
    def holds_owed_file(self) -> bool:
        """Whether this writer re-produces an owed file that is not complete yet (nothing may
        commit it: it would not be the announced file)."""
        return self.owed is not None and self.last_offset < self.owed.last_offset

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.key[0], self.key[1])

    @property
    def path(self) -> str:
        """The slot (see :data:`WriterKey`): what the exactly-once index counts offsets by."""
        return self.key[2]

    @property
    def topic(self) -> str:
        """The topic written in the file's key: the consumed one or a transform's rename."""
        slot = self.key[2]
        return slot.split(TOPIC_SEPARATOR, 1)[0] if TOPIC_SEPARATOR in slot else self.key[0]

    @property
    def directory(self) -> str:
        """The partition path (directories between the prefix and the file name)."""
        slot = self.key[2]
        return slot.split(TOPIC_SEPARATOR, 1)[1] if TOPIC_SEPARATOR in slot else slot

    @property
    def record_count(self) -> int:
        return self._format_writer.record_count

    @property
    def bytes_written(self) -> int:
        return self._format_writer.bytes_written

    @property
    def streamed(self) -> bool:
        """Whether parts of the file went up (or were tried): it must be committed from its upload,
        whose :meth:`~sink.commit.parts.StreamingUpload.complete` refuses a file that lost a part."""
        return self.upload is not None and (self.upload.started or self.upload.failed is not None)

    @property
    def local_bytes(self) -> int:
        """Bytes of the file still on local disk (all of them unless it streams)."""
        return self.bytes_written - (self.upload.uploaded if self.upload is not None else 0)

    def append(self, batch: RecordBatch) -> int:
        """Append a prefix of ``batch`` (see :meth:`FormatWriter.append`); returns how many.

        On a :class:`~kcql.errors.RecordError` the records before the failing one are in the file
        and accounted for, so the file stays consistent, and the error propagates.
        """
        if self.broken is not None:
            raise self.broken
        writer = self._format_writer
        before = writer.record_count
        try:
            with self._disk_full():
                taken = writer.append(batch)
        except RecordError:
            self._account(batch, writer.record_count - before)
            raise
        self._account(batch, taken)
        return taken

    def successor_hint(self) -> Any:
        """What the format tells the slot's next file (:meth:`FormatWriter.successor_hint`)."""
        return self._format_writer.successor_hint()

    def start_from(self, hint: Any) -> None:
        """Hand the slot's previous file's hint to the format (:meth:`FormatWriter.start_from`)."""
        self._format_writer.start_from(hint)

    def prefetch(self, batch: RecordBatch) -> bool:
        """Let the format start computing ahead for ``batch`` (:meth:`FormatWriter.prefetch`)."""
        return self._format_writer.prefetch(batch)

    def _account(self, batch: RecordBatch, count: int) -> None:
        if count <= 0:
            return
        part = batch if count >= len(batch) else batch.slice(0, count)
        if self.first_offset is None:
            self.first_offset = part.first_offset
        self.last_offset = part.last_offset
        low, high = part.timestamps()
        if low is not None and high is not None:
            self.min_ts = low if self.min_ts is None else min(self.min_ts, low)
            self.max_ts = high if self.max_ts is None else max(self.max_ts, high)

    def due(self, now: float) -> FlushReason | None:
        return self.policy.reason(self.record_count, self.bytes_written, self.opened_at, now)

    def finish(self) -> None:
        """Complete and fsync the staging file (idempotent)."""
        if self.broken is not None:
            raise self.broken
        if not self.finished:
            with self._disk_full():
                self._format_writer.close()
            self.finished = True

    @contextlib.contextmanager
    def _disk_full(self) -> Iterator[None]:
        """Turn ENOSPC/EDQUOT into :class:`StagingFullError` (naming the file) and mark the writer broken."""
        try:
            yield
        except StagingFullError as exc:
            self.broken = exc
            raise
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            self.broken = staging_full(exc, self.staging_path)
            raise self.broken from exc

    def discard(self) -> None:
        """Drop the file without committing it (its records will be replayed)."""
        if not self.finished:
            with contextlib.suppress(Exception):
                self._format_writer.abort()
            self.finished = True
        if self.upload is not None:
            self.upload.discard()  # aborts what went up, unless the file was committed from it
        with contextlib.suppress(OSError):
            self.staging_path.unlink()

    def meta(self) -> FileMeta:
        """What the final object key is built from."""
        assert self.first_offset is not None  # noqa: S101 - only non-empty files are committed
        return FileMeta(
            topic=self.topic,
            partition=self.key[1],
            path=self.directory,
            first_offset=self.first_offset,
            last_offset=self.last_offset,
            min_timestamp=-1 if self.min_ts is None else self.min_ts,
            max_timestamp=-1 if self.max_ts is None else self.max_ts,
            record_count=self.record_count,
            extension=self.extension,
        )


class WriterPool:
    """The open writers in least-recently-used order, also indexed by Kafka partition."""

    def __init__(self, max_open: int, budget: DescriptorBudget | None = None) -> None:
        self.max_open = max_open
        self.budget = budget if budget is not None else DescriptorBudget(1 << 62)
        """The process's descriptors (shared by every task's pool; see :mod:`sink.task.descriptors`)."""
        self._lru: OrderedDict[WriterKey, PartitionWriter] = OrderedDict()
        self._by_tp: dict[TopicPartition, dict[WriterKey, PartitionWriter]] = {}

    def __len__(self) -> int:
        return len(self._lru)

    def __contains__(self, writer: object) -> bool:
        return isinstance(writer, PartitionWriter) and self._lru.get(writer.key) is writer

    def get(self, key: WriterKey) -> PartitionWriter | None:
        writer = self._lru.get(key)
        if writer is not None:
            self._lru.move_to_end(key)
        return writer

    def add(self, writer: PartitionWriter) -> None:
        if writer.key not in self._lru:
            self.budget.take()
        self._lru[writer.key] = writer
        self._by_tp.setdefault(writer.tp, {})[writer.key] = writer

    def remove(self, writer: PartitionWriter) -> None:
        if self._lru.get(writer.key) is not writer:
            return
        del self._lru[writer.key]
        self.budget.give()
        tp = writer.tp
        group = self._by_tp.get(tp)
        if group is not None:
            group.pop(writer.key, None)
            if not group:
                del self._by_tp[tp]

    @property
    def full(self) -> bool:
        """At ``max.open.writers``, or the process is out of descriptors while this pool holds some
        (a pool holding none may still open one: it has nothing to commit to make room)."""
        return len(self._lru) >= self.max_open or (self.budget.spent and bool(self._lru))

    def least_recently_used(self) -> PartitionWriter | None:
        """The least recently used writer that may be committed now (``None``: none may)."""
        return next((w for w in self._lru.values() if not w.holds_owed_file), None)

    def for_partition(self, tp: TopicPartition) -> list[PartitionWriter]:
        return list(self._by_tp.get(tp, {}).values())

    def all(self) -> list[PartitionWriter]:
        return list(self._lru.values())

    def min_first_offset(self, tp: TopicPartition, excluding: PartitionWriter | None = None) -> int | None:
        """Smallest first offset over ``tp``'s writers holding records (``None`` when there are none)."""
        firsts = [
            w.first_offset for w in self._by_tp.get(tp, {}).values()
            if w is not excluding and w.first_offset is not None
        ]
        return min(firsts) if firsts else None
