"""Record → object key: the layout contract between the sink and every reader.

The sink asks a :class:`Partitioner` for each record's partition path (the directories between
the prefix and the file name) and, when a file is committed, for the file's final key. Both are
pure functions of the plan and the record/file, which is what makes replays produce the same
keys.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, Self

from kcql.errors import RecordError

__all__ = ["Batch", "FileMeta", "PartitionError", "Record"]


class Record(Protocol):
    """What a partitioner reads of one record (``sink.records.SinkRecord`` has it)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None: ...
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any: ...
    @property
    def headers(self) -> tuple[tuple[str, Any], ...]: ...
    @property
    def where(self) -> str: ...


class Batch(Protocol):
    """What a partitioner reads of a batch: consecutive records of one topic partition."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    def __len__(self) -> int: ...
    def records(self) -> Sequence[Record]:
        """Converted when read; a record that cannot be converted raises its RecordError."""
    def slice(self, start: int, stop: int | None = None) -> Self: ...


class PartitionError(RecordError):
    """A record cannot be placed (null key with ``_key``, missing header, ...).

    The message is the Lenses text (e.g. ``Key is null, but requested to partition by whole key``)
    plus the record's topic, partition and offset; the task's error policy decides what happens.

    Attributes:
        reason: the Lenses text alone, e.g. ``Value is null.`` (stable, for tests and metrics).
        where: the record position (``SinkRecord.where``), ``""`` when not tied to a record.
        record: the record that could not be placed (for the error policy / DLQ), or ``None``.
    """

    def __init__(self, reason: str, where: str = "", record: Any = None) -> None:
        self.reason = reason
        self.where = where
        self.record = record
        offset = record.offset if record is not None else -1
        super().__init__(f"{reason} ({where})" if where else reason, offset=offset, stage="TASK_PUT")


@dataclass(frozen=True, slots=True)
class FileMeta:
    """What the final name of a committed file is built from."""

    topic: str
    partition: int
    path: str
    """Partition path of the file's writer (already escaped), ``""`` for NOPARTITION."""
    first_offset: int
    last_offset: int
    min_timestamp: int
    """Smallest record timestamp in epoch ms, ``-1`` when no record had one."""
    max_timestamp: int
    """Largest record timestamp in epoch ms, ``-1`` when no record had one."""
    record_count: int
    extension: str
    """Without the dot."""
