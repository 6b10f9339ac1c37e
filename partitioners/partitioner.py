"""Record → partition path (the directories between the prefix and the file name)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar

from kcql.errors import RecordError
from kcql.model import FileNaming
from partitioners.base import Batch, PartitionError, Record
from partitioners.escaping import escape
from partitioners.fields import SegmentFn, compile_field

if TYPE_CHECKING:
    from kcql.model import SinkPlan

__all__ = ["MAX_PATH_BYTES", "MAX_SEGMENT_BYTES", "Partitioner", "default_path"]

B = TypeVar("B", bound=Batch)

MAX_SEGMENT_BYTES = 255
"""Longest directory name (UTF-8 bytes) we produce: the limit of every common local file system, so
the local backend and staging directories never fail with "File name too long" (Lenses #1719)."""
MAX_PATH_BYTES = 900
"""Longest partition path; leaves room for prefix and file name within S3's 1024-byte key limit."""


def default_path(plan: SinkPlan, topic: str, partition: int, *, topic_segment: str | None = None) -> str:
    """Partition path of the default layout (no PARTITIONBY) for one topic partition.

    ``topic_segment`` replaces the escaped topic (``example_key`` passes the ``<topic>`` placeholder).
    """
    topic_seg = escape(topic) if topic_segment is None else topic_segment
    if plan.naming == FileNaming.CONFLUENT:
        return f"{topic_seg}/partition={partition}"
    part_seg = escape(plan.padding.pad_partition(partition))
    if plan.include_keys:
        return f"topic={topic_seg}/partition={part_seg}"
    return f"{topic_seg}/{part_seg}"


class Partitioner:
    """Computes the partition path of records for one plan.

    The path is relative to the prefix (for Confluent naming, to ``prefix or "topics"``), already
    escaped, ``/``-joined, and ``""`` for NOPARTITION. It is a pure function of the plan and the
    record, so a replay after a crash puts every record in the same directory again.

    Raises:
        PartitionError: from :meth:`path_for`/:meth:`split` when a record cannot be placed
            (null key/value, missing header or timestamp, a value too long for a directory name).
    """

    __slots__ = ("_default_cache", "_fns", "_mode", "_names", "_topic_dir", "plan")

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan
        self._default_cache: dict[tuple[str, int], str] = {}
        self._fns: tuple[SegmentFn, ...] = ()
        self._names: tuple[str, ...] = ()
        self._topic_dir = plan.naming == FileNaming.CONFLUENT
        if plan.partition_by is None:
            self._mode = "none"
        elif not plan.partition_by:
            self._mode = "default"
        else:
            # PARTITIONBY _topic, _partition (the MSK-backup statement) depends only on where the
            # record came from, so it gets the default layout's per-(topic, partition) cache.
            static = all(f.kind in ("topic", "partition") for f in plan.partition_by)
            self._mode = "static" if static else "custom"
            from partitioners.instants import instant_of, zone_of

            when = (instant_of(plan.date_source), zone_of(plan.date_source))
            self._fns = tuple(compile_field(f, plan.padding, when) for f in plan.partition_by)
            if plan.include_keys:
                self._names = tuple(escape(f.display_name) + "=" for f in plan.partition_by)
            else:
                self._names = ("",) * len(self._fns)

    @property
    def is_default(self) -> bool:
        """True when the path depends only on (topic, partition): the default layout, or a
        PARTITIONBY made of ``_topic``/``_partition`` only."""
        return self._mode in ("default", "static")

    def path_for(self, record: Record) -> str:
        """The escaped partition path of ``record``."""
        mode = self._mode
        if mode == "default" or mode == "static":
            key = (record.topic, record.partition)
            path = self._default_cache.get(key)
            if path is None:
                if mode == "default":
                    path = default_path(self.plan, record.topic, record.partition)
                else:
                    path = self._compute(record)
                self._default_cache[key] = path
            return path
        if mode == "none":
            return ""
        return self._compute(record)

    def _compute(self, record: Record) -> str:
        segments = [name + fn(record) for name, fn in zip(self._names, self._fns, strict=True)]
        if self._topic_dir:
            segments.insert(0, escape(record.topic))
        path = "/".join(segments)
        if len(path) > MAX_SEGMENT_BYTES // 4:
            self._check_length(path, record)
        return path

    def split(self, batch: B) -> Iterator[tuple[str, B]]:
        """``batch`` cut into ``(path, slice)`` pairs of consecutive records with one path, in order.

        The default layout, NOPARTITION and PARTITIONBY ``_topic``/``_partition`` give one slice,
        the batch itself, and read no record. Otherwise every record is placed first; then the
        slices are yielded up to the first record that cannot be placed or converted, whose
        RecordError is raised after them, so a caller that writes each slice as it comes has
        written exactly the records before the bad one.
        """
        mode = self._mode
        if mode == "none":
            yield "", batch
            return
        if mode in ("default", "static"):
            yield self.path_for(_Origin(batch.topic, batch.partition, -1)), batch
            return
        paths: list[str] = []
        failure: RecordError | None = None
        try:
            paths.extend(map(self._compute, batch.records()))  # what it placed stays on a raise
        except PartitionError as exc:
            exc.index = len(paths)
            failure = exc
        except RecordError as exc:  # the record itself cannot be converted (its index is set)
            failure = exc
        start = 0
        for i in range(1, len(paths) + 1):
            if i == len(paths) or paths[i] != paths[start]:
                yield paths[start], batch.slice(start, i)
                start = i
        if failure is not None:
            raise failure

    @staticmethod
    def _check_length(path: str, record: Record) -> None:
        for segment in path.split("/"):
            size = len(segment.encode("utf-8"))
            if size > MAX_SEGMENT_BYTES:
                raise PartitionError(
                    f"Partition directory is {size} bytes, longer than the {MAX_SEGMENT_BYTES}-byte limit: "
                    f"{segment[:60]}...",
                    record.where,
                    record,
                )
        size = len(path.encode("utf-8"))
        if size > MAX_PATH_BYTES:
            raise PartitionError(
                f"Partition path is {size} bytes, longer than the {MAX_PATH_BYTES}-byte limit: "
                f"{path[:60]}...",
                record.where,
                record,
            )


class _Origin(NamedTuple):
    """Where a record comes from: all the default layout reads (no record is converted for it)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
    key: Any = None
    value: Any = None
    headers: tuple[tuple[str, Any], ...] = ()

    @property
    def where(self) -> str:
        return f"topic {self.topic!r} partition {self.partition}"
