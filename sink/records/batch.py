"""The one batch type: consecutive records of one topic partition, from the consumer to the file.

The runtime builds a :class:`RecordBatch` per run of consumed messages (:mod:`sink.records.intake`)
and hands it to the task, whose partitioner cuts it into slices (:meth:`RecordBatch.slice`), one
per file, and whose format writers append the slices. A batch is immutable and carries:

* what file names and offsets need, without converting anything: first/last offset, the
  timestamps, the offset of any record;
* the cheap forms its messages have, each holding exactly the records of the per-record view:
  the joined one-line JSON text (:mod:`sink.records.json_text`), the Arrow columns of decoded
  flat Avro (:mod:`sink.records.avro_values`), decoded only when a format asks, and the Avro
  bodies of such a run as they came (for an Avro file of that very schema);
* always the per-record view (:meth:`RecordBatch.records`), which converts each message when it is
  first read and raises the record's :class:`~kcql.errors.RecordError` (with its index and stage)
  at the first bad one.

Slices share their origin's messages, converted records and cheap forms, so no record is
converted twice and a form is computed once per consumed run. :meth:`RecordBatch.memo` and
:meth:`RecordBatch.ahead` let a format compute something once per batch, possibly on a helper
thread while the consumer fetches the next messages (PARQUET parses JSON lines there).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import Any, TypeVar, overload

import numpy as np
import pyarrow as pa
from confluent_kafka import Message

from formats.avro_wire import WireValues
from sink.records import avro_values
from sink.records.avro_values import Joined
from sink.records.json_text import valid_lines
from sink.records.record import SinkRecord
from sink.records.scan import timestamp_range
from sink.records.scan import values as message_values

__all__ = ["Convert", "RecordBatch", "RecordView", "Source", "batches_of"]

T = TypeVar("T")

Convert = Callable[[Message], SinkRecord]
"""Turns one consumed message into its record, raising the record's RecordError."""

_key = Message.key
_value = Message.value
_offset = Message.offset


class Source:
    """What every slice of one batch shares: the messages (or records), the converted records and
    the cheap forms. Built by :mod:`sink.records.intake` (or :func:`batches_of`); not used directly."""

    __slots__ = (
        "_avro", "_bodies", "_decoded", "_joined", "_json_ends", "_json_valid", "_offsets",
        "avro", "check_json", "convert", "executor", "json", "messages", "records",
        "transformed", "values",
    )

    def __init__(
        self,
        messages: Sequence[Message] | None,
        records: list[SinkRecord | None],
        convert: Convert | None = None,
        *,
        json: bytes | None = None,
        values: list[bytes] | None = None,
        check_json: bool = True,
        avro: Callable[[], tuple[Any, Any, pa.Schema] | None] | None = None,
        executor: Executor | None = None,
        transformed: bool = False,
        joined: Joined | None = None,
    ) -> None:
        self.messages = messages
        self.records = records
        self.convert = convert
        self.json = json
        """The values joined by ``\\n`` when every one is a one-line JSON object."""
        self.values = values
        """The values of :attr:`json` (the builder has them already), or ``None``: read again."""
        self.check_json = check_json
        self.avro = avro
        """``() -> (writer schema, flat fields, Arrow schema)`` of the values' schema id, or None."""
        self.executor = executor
        self.transformed = transformed
        """The records came out of transforms: ``messages[i]`` is the message record ``i`` was
        made from (a fan-out repeats it), and only the records have the right timestamps."""
        self._offsets: list[int] | None = None
        self._json_ends: np.ndarray | None = None
        self._json_valid: bool | None = None
        self._avro: tuple[pa.RecordBatch, Any] | None = None
        self._decoded = False
        self._bodies: tuple[Any] | None = None
        self._joined = joined
        """The values joined (Avro runs; given by the builder, which joined them to find the run)."""

    def __len__(self) -> int:
        return len(self.records)

    def record(self, i: int, index: int) -> SinkRecord:
        """Record ``i``, converted on first use; a failure names ``index`` (the caller's position)."""
        record = self.records[i]
        if record is None:
            assert self.convert is not None and self.messages is not None  # noqa: S101
            try:
                record = self.records[i] = self.convert(self.messages[i])
            except Exception as exc:
                if hasattr(exc, "index"):
                    exc.index = index
                raise
        return record

    def offset(self, i: int) -> int:
        if self.messages is not None:
            return _offset(self.messages[i]) or 0
        record = self.records[i]
        assert record is not None  # noqa: S101 - record sources are converted
        return record.offset

    def offsets(self) -> list[int]:
        if self._offsets is None:
            if self.messages is not None:
                self._offsets = list(map(_offset, self.messages))  # type: ignore[arg-type]
            else:
                self._offsets = [r.offset for r in self.records]  # type: ignore[union-attr]
        return self._offsets

    def json_lines(self, start: int, stop: int, checked: bool) -> bytes | None:
        data = whole_text = self.json
        if data is None or whole_text is None:
            return None
        whole = start == 0 and stop == len(self.records)
        if not whole:
            if self._json_ends is None:
                lengths = np.fromiter(map(len, map(_value, self.messages)), np.int64, len(self.records))  # type: ignore[arg-type]
                self._json_ends = np.cumsum(lengths + 1) - 1
            ends = self._json_ends
            data = data[(int(ends[start - 1]) + 1 if start else 0) : int(ends[stop - 1])]
        if not checked or not self.check_json:
            return data
        if self._json_valid is None:
            values: list[bytes] = self.values or list(map(_value, self.messages))  # type: ignore[arg-type]
            self._json_valid = valid_lines(values, whole_text)
        if self._json_valid or whole:
            return data if self._json_valid else None
        part: list[bytes] = list(map(_value, self.messages[start:stop]))  # type: ignore[arg-type,index]
        return data if valid_lines(part, data) else None

    def avro_schema(self) -> tuple[Any, pa.Schema] | None:
        """The values' writer schema and its Arrow schema (a registry lookup, cached; no decoding)."""
        if self.avro is None:
            return None
        try:
            columns = self.avro()
        except Exception:  # noqa: BLE001 - the per-record path reports registry problems per record
            return None
        return None if columns is None else (columns[0], columns[2])

    def avro_columns(self, start: int, stop: int) -> tuple[pa.RecordBatch, Any] | None:
        if self.avro is None:
            return None
        if not self._decoded:
            from sink.records.avro_values import decode_values

            self._decoded = True
            try:
                columns = self.avro()
            except Exception:  # noqa: BLE001 - the per-record path reports registry problems per record
                columns = None
            if columns is not None:
                writer, fields, arrow_schema = columns
                batch = decode_values(self._joined_values(), fields, arrow_schema)
                self._avro = None if batch is None else (batch, writer)
        if self._avro is None:
            return None
        batch, writer = self._avro
        if start or stop != len(self.records):
            batch = batch.slice(start, stop - start)
        return batch, writer


    def avro_bodies(self, start: int, stop: int) -> tuple[Sequence[bytes], Any] | None:
        """The values as consumed (5-byte Confluent header, then the body) and their writer
        schema, when every body of the run would decode cleanly column by column (checked once
        per run, without building the columns, :func:`~sink.records.avro_values.check_joined`;
        or known from :meth:`avro_columns` when they were decoded already): a body is written
        through only when the per-record path would have read it without an error, and read the
        same. So only the flat record schemas of :meth:`avro_columns` have them. The values come
        as :class:`~formats.avro_wire.WireValues`, which give the bodies' sizes and the bodies
        joined in bulk."""
        if self.transformed or self.messages is None or self.avro is None:
            return None
        if self._bodies is None:
            self._bodies = self._checked_writer()
        writer = self._bodies[0]
        if writer is None:
            return None
        return WireValues(self._joined_values().values, start, stop), writer

    def _joined_values(self) -> Joined:
        if self._joined is None:
            assert self.messages is not None  # noqa: S101 - only message sources have Avro runs
            # a run of one schema id: no tombstones among the values
            self._joined = Joined(message_values(self.messages))  # type: ignore[arg-type]
        return self._joined

    def _checked_writer(self) -> tuple[Any]:
        """``(writer schema,)`` when every body of the run checks, else ``(None,)``."""
        assert self.avro is not None and self.messages is not None  # noqa: S101
        try:
            columns = self.avro()
        except Exception:  # noqa: BLE001 - the per-record path reports registry problems per record
            columns = None
        if columns is None:
            return (None,)
        if self._decoded:
            return (columns[0] if self._avro is not None else None,)
        joined = self._joined_values()
        ok = avro_values.check_joined(joined, columns[1])
        return (columns[0] if ok else None,)


class MappedSource(Source):
    """Records of another batch, each mapped by a function when first read (a projection), with
    the origin's decoded Avro columns mapped by ``columns`` when it gives them (see
    :meth:`RecordBatch.mapped`). No JSON text form: the text is the unmapped value."""

    __slots__ = ("_columns", "_map", "_origin")

    def __init__(
        self,
        origin: RecordBatch,
        map_record: Callable[[SinkRecord], SinkRecord],
        columns: Callable[[Any], tuple[Any, pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]] | None]
        | None,
    ) -> None:
        messages = origin._src.messages
        part = None if messages is None else messages[origin._start : origin._stop]
        super().__init__(part, [None] * len(origin), executor=origin._src.executor, transformed=True)
        self._origin = origin
        self._map = map_record
        self._columns = columns

    def record(self, i: int, index: int) -> SinkRecord:
        record = self.records[i]
        if record is None:
            try:
                record = self.records[i] = self._map(self._origin._src.record(self._origin._start + i, index))
            except Exception as exc:
                if hasattr(exc, "index"):
                    exc.index = index
                raise
        return record

    def offset(self, i: int) -> int:
        return self._origin.offset_at(i)

    def offsets(self) -> list[int]:
        if self._offsets is None:
            origin = self._origin
            self._offsets = origin._src.offsets()[origin._start : origin._stop]
        return self._offsets

    def json_lines(self, start: int, stop: int, checked: bool) -> bytes | None:
        return None

    def avro_bodies(self, start: int, stop: int) -> tuple[Sequence[bytes], Any] | None:
        """None: the bodies are the unmapped values (a projection changes what a file holds)."""
        return None

    def origin_slice(self, start: int, stop: int) -> RecordBatch:
        return self._origin.slice(start, stop)

    def _mapped_columns(self) -> tuple[Any, pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]] | None:
        if self._columns is None:
            return None
        described = self._origin.avro_schema()
        return None if described is None else self._columns(described[0])

    def avro_schema(self) -> tuple[Any, pa.Schema] | None:
        mapped = self._mapped_columns()
        return None if mapped is None else (mapped[0], mapped[1])

    def avro_columns(self, start: int, stop: int) -> tuple[pa.RecordBatch, Any] | None:
        mapped = self._mapped_columns()
        if mapped is None:
            return None
        whole = self._origin.avro_columns()
        if whole is None:
            return None
        batch = mapped[2](whole[0])
        if start or stop != len(self.records):
            batch = batch.slice(start, stop - start)
        return batch, mapped[0]


class RecordView(Sequence[SinkRecord]):
    """The records of a batch, each converted when first read (see :meth:`RecordBatch.records`)."""

    __slots__ = ("_src", "_start", "_stop")

    def __init__(self, src: Source, start: int, stop: int) -> None:
        self._src = src
        self._start = start
        self._stop = stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, i: int) -> SinkRecord: ...
    @overload
    def __getitem__(self, i: slice) -> RecordView: ...
    def __getitem__(self, i: int | slice) -> SinkRecord | RecordView:
        n = self._stop - self._start
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise ValueError("a record view slices with step 1 only")
            return RecordView(self._src, self._start + start, self._start + max(start, stop))
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._src.record(self._start + i, i)

    def __iter__(self) -> Iterator[SinkRecord]:
        record = self._src.record
        start = self._start
        for i in range(start, self._stop):
            yield record(i, i - start)


class RecordBatch:
    """Consecutive records of one topic partition in offset order (see the module docstring).

    Offsets never fall; they repeat only where a transform fanned one message out into several
    records, which share its offset.

    Satisfies the batch protocols the formats and partitioners read (``formats.base.Batch``,
    ``partitioners.base.Batch``). Never empty.
    """

    __slots__ = ("_memo", "_src", "_start", "_stop", "_whole", "partition", "source_topic", "topic")

    def __init__(
        self, topic: str, partition: int, src: Source, start: int = 0, stop: int | None = None,
        whole: RecordBatch | None = None, *, source_topic: str | None = None,
    ) -> None:
        self.topic = topic
        """The records' topic: the consumed one, or what a transform renamed it to (RegexRouter)."""
        self.partition = partition
        self.source_topic = topic if source_topic is None else source_topic
        """The topic the records were consumed from: whose partition offsets and index they move."""
        self._src = src
        self._start = start
        self._stop = len(src) if stop is None else stop
        self._whole = whole
        self._memo: dict[Hashable, Any] | None = None

    @classmethod
    def of(cls, records: Sequence[SinkRecord]) -> RecordBatch:
        """A batch of records already converted (one topic partition, offset order): for callers
        that drive a task directly (tests, embedding)."""
        if not records:
            raise ValueError("a batch holds at least one record")
        topic, partition = records[0].topic, records[0].partition
        if any(r.topic != topic or r.partition != partition for r in records):
            raise ValueError("a batch holds records of one topic partition; use batches_of()")
        return cls(topic, partition, Source(None, list(records)))

    def __len__(self) -> int:
        return self._stop - self._start

    def __repr__(self) -> str:
        return f"RecordBatch({self.topic}-{self.partition}, offsets {self.first_offset}..{self.last_offset})"

    # -- where the records are ------------------------------------------------------------------

    @property
    def first_offset(self) -> int:
        return self._src.offset(self._start)

    @property
    def last_offset(self) -> int:
        return self._src.offset(self._stop - 1)

    def offset_at(self, index: int) -> int:
        """The Kafka offset of record ``index`` (negative counts from the end)."""
        if index < 0:
            index += len(self)
        return self._src.offset(self._start + index)

    def index_of(self, offset: int) -> int:
        """The position of the record with Kafka offset ``offset``.

        Raises:
            ValueError: no record of this batch has that offset.
        """
        offsets = self._src.offsets()
        i = bisect.bisect_left(offsets, offset, self._start, self._stop)
        if i == self._stop or offsets[i] != offset:
            raise ValueError(f"offset {offset} is not in {self!r}")
        return i - self._start

    def count_through(self, offset: int) -> int:
        """How many records have an offset at or below ``offset`` (a prefix: offsets never fall)."""
        return bisect.bisect_right(self._src.offsets(), offset, self._start, self._stop) - self._start

    def timestamps(self) -> tuple[int | None, int | None]:
        """Smallest and largest record timestamp (epoch ms); ``None`` when no record has one."""
        src = self._src
        if isinstance(src, MappedSource):  # a mapping (projection) keeps the timestamps
            return src.origin_slice(self._start, self._stop).timestamps()
        if src.messages is None or src.transformed:
            part = src.records[self._start : self._stop]
            stamps = [r.timestamp for r in part if r is not None and r.timestamp is not None]
            return (min(stamps), max(stamps)) if stamps else (None, None)
        return timestamp_range(src.messages, self._start, self._stop)

    def nbytes(self) -> int:
        """Bytes of the keys and values as consumed (records given already converted: 0)."""
        messages = self._src.messages
        if messages is None:
            return 0
        part = messages[self._start : self._stop]
        values: int = sum(map(len, filter(None, map(_value, part))))  # type: ignore[arg-type]
        keys: int = sum(map(len, filter(None, map(_key, part))))  # type: ignore[arg-type]
        return values + keys

    def message(self, index: int) -> Message | None:
        """The consumed message of record ``index`` (for the dead-letter queue); ``None`` for a
        batch of records given already converted."""
        messages = self._src.messages
        return None if messages is None else messages[self._start + index]

    # -- the forms ------------------------------------------------------------------------------

    def records(self) -> RecordView:
        """Every record, converted when first read; the first bad one raises its RecordError."""
        return RecordView(self._src, self._start, self._stop)

    def json_lines(self, *, checked: bool = True) -> bytes | None:
        """See ``formats.base.Batch.json_lines``."""
        return self._src.json_lines(self._start, self._stop, checked)

    def avro_columns(self) -> tuple[pa.RecordBatch, Any] | None:
        """See ``formats.base.Batch.avro_columns``."""
        return self._src.avro_columns(self._start, self._stop)

    def avro_schema(self) -> tuple[Any, pa.Schema] | None:
        """See ``formats.base.Batch.avro_schema``."""
        return self._src.avro_schema()

    def avro_bodies(self) -> tuple[Sequence[bytes], Any] | None:
        """See ``formats.base.Batch.avro_bodies``."""
        return self._src.avro_bodies(self._start, self._stop)

    # -- slices and shared work -----------------------------------------------------------------

    def slice(self, start: int, stop: int | None = None) -> RecordBatch:
        """Records ``start`` to ``stop`` (positions in this batch) as a batch sharing this one's forms."""
        n = len(self)
        stop = n if stop is None else min(stop, n)
        if not 0 <= start < stop:
            raise ValueError(f"slice {start}:{stop} of {n} records is empty or out of range")
        if start == 0 and stop == n:
            return self
        whole = self._whole or self
        return RecordBatch(
            self.topic, self.partition, self._src, self._start + start, self._start + stop, whole,
            source_topic=self.source_topic,
        )

    def mapped(
        self,
        map_record: Callable[[SinkRecord], SinkRecord],
        columns: Callable[[Any], tuple[Any, pa.Schema, Callable[[pa.RecordBatch], pa.RecordBatch]] | None]
        | None = None,
    ) -> RecordBatch:
        """This batch with each record mapped by ``map_record`` when first read (its errors are
        raised in place, as conversion errors are). ``columns(writer schema)`` may give the
        mapped writer schema, its Arrow schema and a function mapping this batch's decoded Avro
        columns to the mapped ones, so a format can take the Arrow form instead of the records."""
        src = MappedSource(self, map_record, columns)
        return RecordBatch(self.topic, self.partition, src, source_topic=self.source_topic)

    def whole(self) -> tuple[RecordBatch, int]:
        """The batch this one was sliced from (itself if not sliced) and where it starts in it."""
        whole = self._whole
        if whole is None:
            return self, 0
        return whole, self._start - whole._start

    def memo(self, key: Hashable, compute: Callable[[RecordBatch], T]) -> T:
        """``compute(self)``, once per batch and key; waits for :meth:`ahead`'s thread if it ran it."""
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        if key in memo:
            value = memo[key]
            if isinstance(value, _Ahead):
                value = memo[key] = value.future.result()
            return value  # type: ignore[no-any-return]
        value = memo[key] = compute(self)
        return value

    def ahead(self, key: Hashable, compute: Callable[[RecordBatch], Any]) -> None:
        """Start ``compute(self)`` on the batch's helper thread for a later :meth:`memo`."""
        executor = self._src.executor
        if executor is None:
            return
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        if key not in memo:
            memo[key] = _Ahead(executor.submit(compute, self))


class _Ahead:
    """A :meth:`RecordBatch.memo` value still being computed on the helper thread."""

    __slots__ = ("future",)

    def __init__(self, future: Future[Any]) -> None:
        self.future = future


def batches_of(records: Sequence[SinkRecord]) -> list[RecordBatch]:
    """Records already converted, cut into batches at each change of topic partition."""
    out: list[RecordBatch] = []
    start = 0
    for i in range(1, len(records) + 1):
        if i == len(records) or (records[i].topic, records[i].partition) != (
            records[start].topic, records[start].partition
        ):
            out.append(RecordBatch.of(records[start:i]))
            start = i
    return out
