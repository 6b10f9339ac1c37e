"""What AVRO and PARQUET share: turning records into rows of one file schema.

A row is the record's value (no envelope) or its envelope dict. Its schema is made of "parts"
(the value; with the envelope also the key), each either *given* (the converter's Avro schema,
tracked by :class:`~formats.schema_evolution.SchemaEvolution`) or *inferred* from schemaless
values (:mod:`formats.schema_inference`). Rows are buffered until the file's schema is fixed
("frozen": when the first block / row group is encoded); until then inferred parts keep merging.
Headers and metadata have fixed types, so they never influence the schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from formats._file import StagingWriter
from formats._unicode import lone_surrogate, surrogate_error, value_surrogate
from formats.base import Batch, FormatError, FormatSettings, PartSink, Record, RecordFormatError
from formats.envelope import envelope_avro_schema, envelope_row
from formats.json_lines_arrow import LineParser, line_parse_options
from formats.schema_evolution import Decision, SchemaEvolution, project
from formats.schema_inference import IncompatibleSchemas, avro_names, infer, merge
from kcql.errors import RecordError

__all__ = ["RowBuilder", "RowFileWriter", "row_error"]


_FLAT_TYPES = frozenset((str, float, bool, int, type(None)))
_LONG_MIN, _LONG_MAX = -(2**63), 2**63
_Shape = tuple[tuple[Any, ...], tuple[type, ...]]


def _flat_shape(value: dict[Any, Any]) -> _Shape | None:
    """Keys and value types of a dict of plain scalars, or None when anything is nested/odd.

    Two such dicts with equal shapes have equal inferred schemas (:func:`infer` looks at nothing
    else for them), which lets a file of same-shaped schemaless records skip inference. Built
    with C-level calls: it runs once per record.
    """
    types = tuple(map(type, value.values()))
    if not _FLAT_TYPES.issuperset(types):
        return None
    if int in types:
        for item in value.values():
            if type(item) is int and not _LONG_MIN <= item < _LONG_MAX:
                return None  # no Avro long: infer() raises the error
    return tuple(value), types


class _Part:
    """Schema state of the key or the value within one file."""

    __slots__ = ("evolution", "inferred", "mode", "name", "pending_shape", "shape")

    def __init__(self, name: str, compatibility: str) -> None:
        self.name = name
        self.mode: str | None = None  # None (only nulls so far), "given" or "inferred"
        self.evolution = SchemaEvolution(compatibility)
        self.inferred: Any = "null"
        self.shape: _Shape | None = None
        """Flat shape of the last committed inferred value: already merged into ``inferred``."""
        self.pending_shape: _Shape | None = None

    def check(self, value: Any, schema: Any, frozen: bool) -> tuple[Decision, Any]:
        """Decision for one value, plus the merged inferred schema to commit if accepted."""
        if value is None:
            return Decision.SAME, None
        if schema is not None:
            if self.mode == "inferred":
                return Decision.ROLL, None  # schemaless -> schema-based: new file
            if self.mode is None and frozen:
                return Decision.ROLL, None  # the file declared this part as always null
            return self.evolution.decide(schema), None
        if self.mode == "given":
            return Decision.ROLL, None
        shape = self.pending_shape = _flat_shape(value) if type(value) is dict else None
        if shape is not None and shape == self.shape:
            return Decision.SAME, self.inferred  # merging the same candidate again changes nothing
        candidate = infer(value, self.name)  # may raise IncompatibleSchemas: no Avro type at all
        if self.inferred == "null":  # the first value: its own schema, not a union with null
            return Decision.SAME, candidate
        try:
            merged = merge(self.inferred, candidate)
        except IncompatibleSchemas:
            return Decision.ROLL, None
        if frozen and merged != self.inferred:
            return Decision.ROLL, None
        return Decision.SAME, merged

    def commit(self, schema: Any, merged: Any) -> None:
        if merged is not None:
            self.mode = "inferred"
            self.inferred = merged
            self.shape = self.pending_shape
        elif schema is not None and self.mode is None and self.evolution.current is not None:
            # (a null value with a schema decided nothing: the part is still "only nulls so far")
            self.mode = "given"

    def schema(self) -> Any:
        if self.mode == "given":
            return self.evolution.current
        return self.inferred


class RowBuilder:
    """Accepts records while they fit the file's schema and turns them into rows.

    Args:
        settings: the format settings (envelope, schema compatibility).
        format_name: ``AVRO`` or ``PARQUET``, for messages.
    """

    def __init__(self, settings: FormatSettings, format_name: str) -> None:
        self.envelope = settings.envelope
        self.format_name = format_name
        self._compatibility = settings.schema_compatibility
        self.value = _Part("Value", settings.schema_compatibility)
        with_key = self.envelope is not None and self.envelope.key
        self.key = _Part("Key", settings.schema_compatibility) if with_key else None
        self.frozen = False
        self.count = 0

    def take(self, records: Sequence[Record], rows: list[Any], freeze_at: int) -> int:
        """Append rows for the longest prefix of ``records`` that fits; return its length.

        Stops (without looking at the next record) once ``freeze_at`` rows are taken while the
        schema is not frozen: the writer freezes it there and calls again with the rest. So a
        file's schema, and where it rolls, never depend on how records were split into calls
        (consumer batch sizes, which form of a batch a format used): a replay writes the same files.
        """
        envelope = self.envelope
        value_part, key_part = self.value, self.key
        for index, record in enumerate(records):
            if not self.frozen and self.count >= freeze_at:
                return index
            if not self.count and not self.frozen:
                # nothing accepted yet: forget what a rejected first record may have recorded
                value_part = self.value = _Part("Value", self._compatibility)
                if key_part is not None:
                    key_part = self.key = _Part("Key", self._compatibility)
            value = record.value
            if envelope is None and value is None:
                raise RecordFormatError(
                    f"a tombstone (null value) cannot be written as {self.format_name} without the "
                    "envelope; set store.envelope=true (tombstones are then rows with a null value)",
                    record,
                    index,
                )
            if record.value_schema is None and value is not None:
                bad = value_surrogate(record)
                if bad is not None:
                    raise surrogate_error(record, index, "value", bad, self.format_name)
            if key_part is not None and record.key_schema is None and record.key is not None:
                bad = lone_surrogate(record.key)
                if bad is not None:
                    raise surrogate_error(record, index, "key", bad, self.format_name)
            try:
                decision, merged = (
                    value_part.check(value, record.value_schema, self.frozen)
                    if envelope is None or envelope.value
                    else (Decision.SAME, None)
                )
                kdecision, kmerged = (
                    key_part.check(record.key, record.key_schema, self.frozen)
                    if key_part is not None
                    else (Decision.SAME, None)
                )
            except IncompatibleSchemas as exc:
                raise RecordFormatError(
                    f"cannot infer a {self.format_name} schema for this schemaless record: {exc}",
                    record,
                    index,
                ) from exc
            if self.count and (decision is Decision.ROLL or kdecision is Decision.ROLL):
                return index
            value_part.commit(record.value_schema, merged)
            if key_part is not None:
                key_part.commit(record.key_schema, kmerged)
            if decision is Decision.PROJECT:
                value = project(value, value_part.evolution.current)
            rows.append(value if envelope is None else envelope_row(record, envelope, value))
            self.count += 1
        return len(records)

    def take_given(self, schema: Any, count: int) -> int | None:
        """Accept ``count`` non-null values, all of the converter schema ``schema``, without
        reading them (no envelope): what :meth:`take` would decide for them, as one decision.

        Returns ``count``, ``0`` when they must start a new file, or ``None`` when only
        :meth:`take` can say (a projection onto the file's schema, which needs the values, or
        an envelope).
        """
        if self.envelope is not None or count <= 0:
            return None
        if not self.count and not self.frozen:
            self.value = _Part("Value", self._compatibility)
        part = self.value
        decision, _ = part.check(True, schema, self.frozen)  # any non-null value: only its schema counts
        if decision is Decision.ROLL:
            return 0 if self.count else None
        if decision is not Decision.SAME:
            return None
        part.commit(schema, None)
        self.count += count
        return count

    def avro_schema(self, sanitize: bool = False) -> tuple[Any, tuple[str, ...]]:
        """Fix the file's row schema and return it as Avro.

        With ``sanitize`` (AVRO), field names of *inferred* parts that are not valid Avro names
        are sanitized; the second item names the row parts whose dict keys must be renamed to
        match (``("*",)`` for the whole row when there is no envelope).
        """
        self.frozen = True
        renamed: list[str] = []

        def part_schema(part: _Part, label: str) -> Any:
            schema = part.schema()
            if sanitize and part.mode == "inferred":
                schema, changed = avro_names(schema)
                if changed:
                    renamed.append(label)
            return schema

        if self.envelope is None:
            schema = part_schema(self.value, "*")
        else:
            key = part_schema(self.key, "key") if self.key is not None else None
            schema = envelope_avro_schema(key, part_schema(self.value, "value"), self.envelope)
        return schema, tuple(renamed)

    @property
    def settled(self) -> bool:
        """Whether freezing now would lose nothing: every part has a given schema.

        Inferred parts keep merging while rows are buffered, and a part that has only seen nulls
        does not know its type yet; in both cases the caller should keep buffering a while.
        """
        parts = [self.value] if self.envelope is None or self.envelope.value else []
        if self.key is not None:
            parts.append(self.key)
        return all(p.mode == "given" for p in parts)

    def given_parts(self) -> list[tuple[str | None, Any]]:
        """``(row field, Avro schema)`` of the parts with a converter schema (``None``: the whole row)."""
        if self.envelope is None:
            return [(None, self.value.schema())] if self.value.mode == "given" else []
        parts: list[tuple[str | None, Any]] = []
        if self.envelope.value and self.value.mode == "given":
            parts.append(("value", self.value.schema()))
        if self.key is not None and self.key.mode == "given":
            parts.append(("key", self.key.schema()))
        return parts


def row_error(message: str, records: Sequence[Record], index: int, earlier: int) -> FormatError:
    """The error for row ``index`` of a conversion whose first ``earlier`` rows came from earlier
    ``append()`` calls: a record error of this call, or, for an earlier row (no longer reportable
    on its own), a failure of the whole file, which is then discarded and replayed."""
    if index < earlier:
        return FormatError(
            f"{message} ({records[index].where}), accepted in an earlier call; "
            "the file is incomplete and must be discarded"
        )
    return RecordFormatError(message, records[index], index - earlier)


FREEZE_ROWS = 1000
"""Rows held at most before a file's schema is fixed (at once when every part's schema is given):
inferred schemas, and parts only seen null so far, keep merging meanwhile."""
ROW_ESTIMATE = 100
"""Bytes assumed per held row without raw JSON text, for ``bytes_written`` before the schema."""


def first_record_parser(settings: FormatSettings, batch: Batch, format_name: str) -> LineParser | None:
    """The JSON-lines parser a new file of schemaless JSON most likely fixes its schema with, for
    parsing ``batch`` ahead before the file is open (:meth:`FileFormat.prefetch_first`).

    A new file takes its first record one by one, then (the rest of the batch permitting) fixes
    the schema those held rows infer (:meth:`RowFileWriter._held_rows_parser`): that is the
    schema the first record alone infers, which is what this builds a parser for. The parse is
    memoised on the batch by schema, so the file takes it when its schema comes out the same and
    ignores it otherwise. None when the batch has no JSON-lines form, the rows carry an envelope,
    the value's schema is given, or the line parser does not take the schema.
    """
    if settings.envelope is not None or len(batch) <= 1 or batch.json_lines(checked=False) is None:
        return None
    builder = RowBuilder(settings, format_name)
    try:
        builder.take(batch.slice(0, 1).records(), [], FREEZE_ROWS)
    except RecordError:  # the file reports it, record by record, when it takes it
        return None
    inferred = _inferred_parser(builder)
    return None if inferred is None else inferred[1]


def _inferred_parser(builder: RowBuilder) -> tuple[Any, LineParser] | None:
    """The schema ``builder``'s rows infer so far and a JSON-lines parser for it; None when the
    rows carry an envelope, the value's schema is given, or the line parser does not take it.
    One construction for a file's own parser and the guess made before the file is open, so
    the two agree on the schema their parses are memoised by."""
    value = builder.value
    if builder.envelope is not None or value.mode != "inferred":
        return None
    schema = value.schema()  # not RowBuilder.avro_schema(): that freezes the builder
    options = line_parse_options(schema)
    return None if options is None else (schema, LineParser(options, options.explicit_schema))


class RowFileWriter(StagingWriter):
    """What the AVRO and PARQUET writers share: taking records into rows around the freeze.

    Rows are held (:meth:`_hold`) until the file's schema is fixed, at :data:`FREEZE_ROWS` rows
    or at once when settled; then the subclass's :meth:`_fix` encodes them (taking them with
    :meth:`_take_held`) and its :meth:`_append` encodes every later row. Subclasses set ``_rows``.
    """

    _rows: RowBuilder

    def __init__(self, path: Any, settings: FormatSettings, spill: PartSink | None = None) -> None:
        super().__init__(path, spill)
        self._settings = settings
        self._call_start = 0
        """Rows buffered by earlier calls: a conversion error among them cannot name a record of
        this call, so the whole file must be discarded instead."""
        self._pending: list[Any] = []
        self._pending_records: list[Record] = []
        self._pending_bytes = 0
        self._own_schema_tried = False
        """Whether :meth:`_held_rows_parser` was asked (once per file; a predecessor whose rows
        were not flat sets it, so its successor does not try)."""

    def _write_records(self, records: Sequence[Record]) -> int:
        """Take the longest prefix of ``records`` that fits the file (see ``FormatWriter.append``)."""
        self._call_start = self._buffered()
        taken, total = 0, len(records)
        while True:
            part = records[taken:] if taken else records
            rows: list[Any] = []
            frozen = self._rows.frozen
            try:
                try:
                    count = self._rows.take(part, rows, self._freeze_at())
                except RecordError as exc:  # the format's, or a conversion error of the lazy view
                    self._append(rows, part[: exc.index])
                    raise
                self._append(rows, part[:count])
            except RecordError as exc:
                exc.index += taken  # relative to this call's records, as append() promises
                raise
            taken += count
            # the schema froze at _freeze_at() rows: the rest of the call is decided against it
            if taken == total or not count or frozen or not self._rows.frozen:
                return taken

    def _buffered(self) -> int:
        """Rows accepted but not converted yet because the schema is not frozen."""
        return len(self._pending)

    def _freeze_at(self) -> int:
        """Rows buffered at most before the schema is fixed."""
        return FREEZE_ROWS

    def _hold(self, rows: list[Any], records: Sequence[Record]) -> bool:
        """Hold ``rows`` while the schema is not fixed (fixing it when it may be); False once fixed."""
        if self._fixed():
            return False
        self._count += len(rows)
        self._pending.extend(rows)
        self._pending_records.extend(records)
        self._pending_bytes += sum(ROW_ESTIMATE if r.raw_value is None else len(r.raw_value) for r in records)
        if self._rows.settled or len(self._pending) >= self._freeze_at():
            self._fix()
        return True

    def _held_rows_parser(self, size: int) -> tuple[Any, LineParser] | None:
        """The schema the rows held so far infer, and a JSON-lines parser for it, to fix the
        schema from them early: asked once per file, when rows are held and ``size`` more would
        take them to ``_freeze_at()``. None when not due, or when the schema is not a flat
        inferred value schema the line parser takes.

        Taking a file's first ``FREEZE_ROWS`` records one by one costs ~25 ms on the consuming
        thread. The rows held infer exactly this schema; when the rest of the batch parses into
        it (no other field, no other type: the parse refuses them), merging them cannot change
        it, so the per-record path would fix the same schema and write the same rows (the
        formats decide: ``ParquetWriter`` through its hint, ``AvroWriter._fixed_from_own_rows``).
        """
        if self._own_schema_tried or not self._pending or len(self._pending) + size < self._freeze_at():
            return None
        self._own_schema_tried = True
        return _inferred_parser(self._rows)

    def _take_held(self) -> tuple[list[Any], list[Record]]:
        """The held rows and their records, no longer held (nor counted: the caller adds them)."""
        rows, records = self._pending, self._pending_records
        self._pending, self._pending_records, self._pending_bytes = [], [], 0
        self._count -= len(rows)
        return rows, records

    def _unusable_schema(self, message: str, exc: Exception, format_name: str) -> FormatError:
        """The error for a schema the held rows fixed but the encoder cannot use.

        When rows of earlier calls are held, they cannot be stored: the whole file must go.
        Otherwise only this call's rows are affected: they are forgotten, so the writer is empty
        and usable, and the first of them is the record error.
        """
        first = self._pending_records[0]
        if self._call_start:
            return FormatError(f"{message} ({first.where}); the file must be discarded")
        self._take_held()
        self._rows = RowBuilder(self._settings, format_name)
        return RecordFormatError(message, first, 0)

    def _fixed(self) -> bool:
        """Whether the file's schema is fixed (the encoder is set up)."""
        raise NotImplementedError

    def _fix(self) -> None:
        """Fix the schema from the held rows and encode them."""
        raise NotImplementedError

    def _append(self, rows: list[Any], records: Sequence[Record]) -> None:
        raise NotImplementedError
