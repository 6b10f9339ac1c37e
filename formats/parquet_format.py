"""STOREAS PARQUET: pyarrow ParquetWriter, one row group per buffered batch.

Once a file's schema is fixed, a batch goes in through its cheapest form: its joined JSON lines
parsed by Arrow straight into the file's schema (:class:`LineParser`, possibly ahead on the
batch's helper thread), or its decoded Avro columns when they have the file's schema. Otherwise,
and for the rows that fix the schema, records are converted to Arrow per call in one
``RecordBatch.from_pylist`` (C++ does the per-field work). Rows are kept as Arrow batches and
written as a row group once ``_ROW_GROUP_ROWS`` rows or ``_ROW_GROUP_BYTES`` bytes are buffered,
so memory stays bounded by one row group. Column order is the schema's field order (for schemaless values:
first appearance, see :mod:`formats.schema_inference`); the Avro -> Arrow mapping is in
:mod:`formats.arrow_schema`. A value whose schema is not a record is stored in one ``value``
column.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

import fastavro
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from fastavro.validation import ValidationError, validate

from formats._rows import ROW_ESTIMATE, RowBuilder, RowFileWriter, first_record_parser, row_error
from formats.arrow_schema import avro_to_arrow, value_column_schema
from formats.base import (
    Batch,
    FileFormat,
    FormatError,
    FormatSettings,
    FormatWriter,
    PartSink,
    Record,
    RecordFormatError,
)
from formats.codecs import DEFAULT_LEVELS, PARQUET_CODECS
from formats.json_lines_arrow import LineParser, line_parse_options
from formats.schema_evolution import Decision
from kcql.errors import RecordError

__all__ = ["ParquetFormat", "ParquetWriter"]

_ROW_GROUP_ROWS = 100_000
_ROW_GROUP_BYTES = 64 * 1024 * 1024
"""Arrow bytes buffered before a row group is written (Parquet compresses them further)."""
_EAGER_ROWS = 64
"""Calls with at least this many rows are converted at once; smaller ones are validated and batched."""
_CONVERT_ERRORS = (pa.ArrowInvalid, pa.ArrowTypeError, TypeError, ValueError, OverflowError)
class ParquetWriter(RowFileWriter):
    """Streams rows into one Parquet file."""

    def __init__(
        self, path: Path, settings: FormatSettings, codec: str, spill: PartSink | None = None
    ) -> None:
        super().__init__(path, settings, spill)
        self._rows = RowBuilder(settings, "PARQUET")
        self._codec = PARQUET_CODECS[codec]
        self._level = settings.level if settings.level is not None else DEFAULT_LEVELS.get(codec)
        self._reported = 0
        self._schema: pa.Schema | None = None
        self._wrap = False
        self._uuids = False
        self._batches: list[pa.RecordBatch] = []
        self._batch_rows = 0
        self._batch_bytes = 0
        self._writer: pq.ParquetWriter | None = None
        self._validators: tuple[tuple[str | None, Any], ...] = ()
        self._small: list[Any] = []
        self._small_records: list[Record] = []
        self._parser: LineParser | None = None
        """Set once the schema is frozen and flat and inferred: blocks of JSON lines parse in C++."""
        self._hint: _Hint | None = None
        """The partition's previous file's inferred schema and parser (:meth:`start_from`), or
        this file's own first rows' (:meth:`RowFileWriter._held_rows_parser`)."""
        self._out: pa.NativeFile | None = None
        self._encoded = 0
        """Bytes Arrow has written to the staging file (as of the last look)."""

    def _fixed(self) -> bool:
        return self._schema is not None

    def _append(self, rows: list[Any], records: Sequence[Record]) -> None:
        if not rows or self._hold(rows, records):
            return
        if len(rows) >= _EAGER_ROWS:
            self._convert_small()
            self._convert(rows, records)
            return
        # Small calls (PARTITIONBY fan-out hands each file a few records per poll) would pay
        # Arrow's fixed per-column cost per call. Validate their rows against the Avro schema
        # now, so a bad record is still reported in its own call, and convert them in bulk later.
        validators = self._validators
        for index, row in enumerate(rows):
            for part, schema in validators:
                datum = row if part is None else row.get(part)
                if datum is None and part is not None:
                    continue
                try:
                    validate(datum, schema, raise_errors=True)
                except (ValidationError, ValueError, TypeError) as exc:
                    self._small_add(rows[:index], records[:index])
                    raise RecordFormatError(
                        f"the value does not match its schema: {exc}", records[index], index
                    ) from exc
        self._small_add(rows, records)

    def _small_add(self, rows: list[Any], records: Sequence[Record]) -> None:
        self._small.extend(rows)
        self._small_records.extend(records)
        self._count += len(rows)
        if len(self._small) >= _EAGER_ROWS:
            self._convert_small()

    def _convert_small(self) -> None:
        if not self._small:
            return
        rows, records = self._small, self._small_records
        self._small, self._small_records = [], []
        self._count -= len(rows)
        # Rows that passed Avro validation but that Arrow refuses (a decimal beyond its
        # precision) were accepted in earlier calls: the file fails (discarded, Kafka replays)
        # rather than dropping the record.
        self._convert(rows, records, earlier=len(rows))

    def _fix(self) -> None:
        avro, _ = self._rows.avro_schema()
        try:
            schema = avro_to_arrow(avro)
            validators = tuple(
                (part, fastavro.parse_schema(given)) for part, given in self._rows.given_parts()
            )
        except FormatError as exc:
            raise self._unusable_schema(str(exc), exc, "PARQUET") from exc
        except Exception as exc:  # fastavro's SchemaParseException and friends: as AVRO reports them
            message = f"the record's Avro schema cannot be used: {exc}"
            raise self._unusable_schema(message, exc, "PARQUET") from exc
        self._schema, self._validators = schema, validators
        self._wrap = value_column_schema(avro)
        # fastavro decodes uuid logical types to uuid.UUID, which Arrow will not take as a string
        self._uuids = '"uuid"' in json.dumps(avro)
        if self._settings.envelope is None and self._rows.value.mode == "inferred" and not self._wrap:
            options = line_parse_options(avro)
            if options is not None:
                self._parser = LineParser(options, self._schema)
        rows, records = self._take_held()
        self._convert(rows, records, earlier=self._call_start)

    def _convert(self, rows: list[Any], records: Sequence[Record], earlier: int = 0) -> None:
        """Append ``rows`` as one batch; the first ``earlier`` of them came from earlier calls.

        A row Arrow refuses is this call's :class:`RecordFormatError` (indexed within the call),
        with the rows before it appended; one from an earlier call cannot be reported any more,
        so the file fails (:class:`FormatError`) and is discarded and replayed.
        """
        if self._uuids:
            rows = [_uuids_as_text(row) for row in rows]
        if self._wrap:
            rows = [{"value": row} for row in rows]
        try:
            batch = pa.RecordBatch.from_pylist(rows, schema=self._schema)
        except _CONVERT_ERRORS:
            # An integer in a double column beyond 2**53: Arrow will not round it, fastavro
            # (STOREAS AVRO) and Spark's JSON reader do; round it too, whichever call it came in.
            rows = [_ints_as_doubles(row, self._schema) for row in rows]
            try:
                batch = pa.RecordBatch.from_pylist(rows, schema=self._schema)
            except _CONVERT_ERRORS:
                bad = self._first_bad(rows)
                if bad:
                    self._add(pa.RecordBatch.from_pylist(rows[:bad], schema=self._schema))
                try:
                    pa.RecordBatch.from_pylist(rows[bad : bad + 1], schema=self._schema)
                except _CONVERT_ERRORS as exc:
                    raise row_error(
                        f"the value does not match its schema for Parquet: {exc}", records, bad, earlier
                    ) from exc
                raise  # pragma: no cover - the batch failed but no single row does
        self._add(batch)

    def append(self, batch: Batch) -> int:
        """Take ``batch`` through the cheapest form that gives this file the same rows.

        Until the schema is frozen, records go one by one, and only as many as freezing needs (the
        first row tells whether the schema is given; inferred schemas freeze at ``FREEZE_ROWS``),
        so a file's schema never depends on how records were batched. After that, the batch's
        cheap form when the file can take it whole (see :meth:`_cheap_rows`), else one by one.
        """
        done, total = 0, len(batch)
        while done < total:
            part = batch.slice(done) if done else batch
            if self._schema is not None:
                rows = self._cheap_rows(part)
                if rows is not None:
                    self._convert_small()  # rows of earlier small calls come first
                    for rows_batch in rows.to_batches():
                        self._add(rows_batch)
                    return total
                chunk = part
            else:
                if self._hint is None:
                    own = self._held_rows_parser(len(part))
                    if own is not None and not value_column_schema(own[0]):
                        self._hint = _Hint(*own)
                if self._hint is not None:
                    try:
                        hinted = self._fixed_from_hint(part)
                    except RecordError as exc:
                        exc.index += done
                        raise
                    if hinted >= 0:  # decided: the schema is fixed now, or it is left to the rows
                        done += hinted
                        continue
                want = max(1, self._freeze_at() - len(self._pending)) if self._pending else 1
                chunk = part.slice(0, want) if want < len(part) else part
            try:
                taken = self._write_records(chunk.records())
            except RecordError as exc:
                exc.index += done
                raise
            done += taken
            if taken < len(chunk):
                return done  # the next record starts a new file
        return done

    def prefetch(self, batch: Batch) -> bool:
        # until this file's schema is fixed, the previous file's parser: the parse it will most
        # likely want (memoised by schema, so it is taken only if the schema comes out the same)
        parser = self._parser or (self._hint.parser if self._hint is not None else None)
        if parser is None and not self._count and not self._own_schema_tried:
            parser = first_record_parser(self._settings, batch, "PARQUET")  # an empty first file
        if parser is None:
            return False
        parser.prefetch(batch)
        return True

    def successor_hint(self) -> Any:
        if self._parser is not None:
            return _Hint(self._rows.value.schema(), self._parser)
        inferred = self._settings.envelope is None and self._rows.value.mode == "inferred"
        if self._schema is not None and inferred:
            return _NOT_FLAT
        return None

    def start_from(self, hint: Any) -> None:
        if self._schema is not None or self._count:
            return
        if isinstance(hint, _Hint):
            self._hint = hint
        elif hint is _NOT_FLAT:
            # the previous file's rows fixed a schema no line parser takes: this file's most
            # likely do too, so its first rows' schema is not tried (a parse that would fail)
            self._own_schema_tried = True

    def _fixed_from_hint(self, part: Batch) -> int:
        """Fix the schema now, from the previous file's (:meth:`start_from`), when that gives the
        very same file; how many of ``part``'s records were taken one by one on the way (0 or 1),
        or -1 when it cannot be decided yet (nothing taken: the caller goes on record by record).

        An inferred schema is fixed at ``FREEZE_ROWS`` rows: merged from each record's own, fields
        in order of first appearance. Taking those rows one by one costs a new file ~5 ms on the
        consuming thread. Once the rows held and ``part`` reach ``FREEZE_ROWS``, all of ``part``
        parses into the previous file's flat schema (no other field, no other type: the parse
        refuses them), and the rows held so far (at least the first record, taken one by one
        here) infer exactly that schema (every field, in that order, of that type), merging the
        next records cannot change it: the per-record path would fix this same schema and take
        these same rows. So the schema is fixed now, and the rest of ``part`` comes from the parse
        (usually done ahead on the helper thread). Decided once per file.
        """
        hint = self._hint
        if hint is None or len(self._pending) + len(part) < self._freeze_at():
            return -1
        self._hint = None
        if hint.parser.rows(part) is None:
            return -1
        taken = 0 if self._pending else self._write_records(part.slice(0, 1).records())
        if self._pending and self._rows.value.mode == "inferred" and self._rows.value.schema() == hint.avro:
            self._fix()
        return taken

    def _cheap_rows(self, batch: Batch) -> pa.Table | None:
        """``batch``'s rows as Arrow, exactly as the per-record path would make them, or None.

        JSON lines (flat inferred schemas only) are parsed once per consumed batch, maybe ahead on
        another thread, and checked here; a slice of it takes its rows from that parse. Decoded
        Avro columns are taken when the file's schema is exactly their value schema.
        """
        parser = self._parser
        if parser is not None:
            return parser.rows(batch)
        value = self._rows.value
        if self._settings.envelope is not None or value.mode != "given" or self._wrap or self._uuids:
            return None
        described = batch.avro_schema()  # decide before anything is decoded
        if (
            described is None
            or value.evolution.decide(described[0]) is not Decision.SAME
            or not described[1].equals(self._schema)
        ):
            return None
        columns = batch.avro_columns()
        if columns is None:
            return None
        rows = columns[0]
        return pa.Table.from_batches([rows])

    def _first_bad(self, rows: list[Any]) -> int:
        for index, row in enumerate(rows):
            try:
                pa.RecordBatch.from_pylist([row], schema=self._schema)
            except _CONVERT_ERRORS:
                return index
        return len(rows)

    def _add(self, batch: pa.RecordBatch) -> None:
        self._count += batch.num_rows
        self._batches.append(batch)
        self._batch_rows += batch.num_rows
        self._batch_bytes += batch.nbytes
        if self._batch_rows >= _ROW_GROUP_ROWS or self._batch_bytes >= _ROW_GROUP_BYTES:
            self._write_row_group()

    def _write_row_group(self) -> None:
        if not self._batches:
            return
        table = pa.Table.from_batches(self._batches, schema=self._schema)
        if self._writer is None:
            self._writer = pq.ParquetWriter(
                self._native(),
                self._schema,
                compression=self._codec,
                compression_level=self._level if self._codec in ("gzip", "zstd", "brotli") else None,
                use_dictionary=_dictionary_columns(table),
            )
        self._writer.write_table(table, row_group_size=table.num_rows)
        self._batches, self._batch_rows, self._batch_bytes = [], 0, 0

    @property
    def bytes_written(self) -> int:
        # buffered Arrow bytes shrink when encoded and compressed; never report a drop
        buffered = self._batch_bytes + self._pending_bytes + ROW_ESTIMATE * len(self._small)
        if self._out is not None and not self._out.closed:
            self._encoded = self._out.tell()
        elif self._file.spills:
            self._encoded = self._file.count
        self._reported = max(self._reported, self._encoded + buffered)
        return self._reported

    def _finish(self) -> None:
        self._call_start = self._buffered()  # every row came from a write() that returned
        if self._schema is None:
            if self._pending:
                self._fix()
            else:
                self._schema = pa.schema([])
        self._convert_small()
        self._write_row_group()
        if self._writer is None:
            self._writer = pq.ParquetWriter(self._native(), self._schema, compression=self._codec)
        self._writer.close()
        self._close_native()

    def _native(self) -> pa.NativeFile:
        """Arrow's own handle on the staging file, for the Parquet encoder to write through.

        Handed a Python file object, Arrow calls its ``write`` for every page (~50 per 8 MB
        file), and each call waits for the GIL, up to the 5 ms switch interval while the
        consuming thread runs Python: encoding a file on a commit thread took ~370 ms instead of
        ~40. The staging file was created (exclusively) and is fsynced by :class:`StagingWriter`
        through its Python handle, which writes nothing itself; fsync covers the file's data
        whichever descriptor wrote it.
        """
        if self._file.spills:
            # Spilled parts are taken at the Python handle's write boundaries (it counts and
            # empties the local file), so Arrow must write through it; Arrow never seeks or reads
            # back, and takes positions from its tell(), which counts the whole file.
            return self._file  # type: ignore[return-value]
        if self._out is None:
            self._out = pa.OSFile(str(self.path), mode="w")
        return self._out

    def _close_native(self) -> None:
        if self._out is not None and not self._out.closed:
            self._encoded = self._out.tell()  # bytes_written stays readable after close
            self._out.close()

    def _abort_encoder(self) -> None:
        self._batches = []
        self._pending = []
        try:
            if self._writer is not None:
                # pyarrow's ParquetWriter closes itself on garbage collection, writing into a file
                # that is gone by then; close it now (the caller deletes the file anyway)
                writer, self._writer = self._writer, None
                writer.close()
        finally:
            self._close_native()


class _Hint(NamedTuple):
    """A Parquet file's frozen inferred value schema and its JSON-lines parser, for the next file."""

    avro: Any
    parser: LineParser


_NOT_FLAT = object()
"""The hint of a file whose inferred schema has no JSON-lines parser (nested, an array, a column
only ever null): the next file does not try its own first rows' (``_held_rows_parser``)."""


_DICTIONARY_SAMPLE = 2048
_DICTIONARY_MIN = 256
_DICTIONARY_MAX_RATIO = 0.5


def _dictionary_columns(table: pa.Table) -> bool | list[str]:
    """Columns worth dictionary-encoding, judged on the file's first row group.

    Arrow dictionary-encodes every column by default and falls back to plain pages only once the
    dictionary reaches 1 MB, so a column of mostly distinct values (ids, amounts, padding,
    timestamps) is hashed into a dictionary that is then thrown away, or, for numbers, kept with
    as many entries as rows (50,000 longs stay under 1 MB): about a third of the encoder's time
    for such records. A flat column whose first rows are more than half distinct is written plain
    from the start; the values are the same, only the page encoding differs (both are standard
    Parquet, and a fallback file already mixes them). Any nested field: Arrow's default.
    """
    if any(not (pa.types.is_primitive(f.type) or _is_text(f.type)) for f in table.schema):
        return True
    names = []
    for field, column in zip(table.schema, table.columns, strict=True):
        sample = column.slice(0, _DICTIONARY_SAMPLE)
        present = len(sample) - sample.null_count
        if present >= _DICTIONARY_MIN and not pa.types.is_boolean(field.type):
            try:
                distinct = pc.count_distinct(sample).as_py()
            except (pa.ArrowNotImplementedError, pa.ArrowTypeError):  # a type count_distinct lacks
                distinct = 0
            if distinct > _DICTIONARY_MAX_RATIO * present:
                continue
        names.append(field.name)
    if len(names) == table.num_columns:
        return True
    return names or False


def _is_text(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind))


def _ints_as_doubles(value: Any, arrow_type: Any) -> Any:
    """``value`` with every Python int that sits in a floating-point column made a float."""
    if type(value) is int:
        return float(value) if pa.types.is_floating(arrow_type) else value
    if isinstance(value, dict):
        if isinstance(arrow_type, pa.Schema) or pa.types.is_struct(arrow_type):
            fields = {arrow_type.field(i).name: arrow_type.field(i).type for i in range(len(arrow_type))}
            return {k: _ints_as_doubles(v, fields[k]) if k in fields else v for k, v in value.items()}
        if pa.types.is_map(arrow_type):
            return {k: _ints_as_doubles(v, arrow_type.item_type) for k, v in value.items()}
    elif isinstance(value, list) and (pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type)):
        return [_ints_as_doubles(v, arrow_type.value_type) for v in value]
    return value


def _uuids_as_text(value: Any) -> Any:
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, dict):
        return {k: _uuids_as_text(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_uuids_as_text(v) for v in value]
    return value


class ParquetFormat(FileFormat):
    """Parquet files; codecs UNCOMPRESSED, SNAPPY, GZIP, ZSTD, LZ4, BROTLI."""

    def __init__(self, settings: FormatSettings) -> None:
        super().__init__(settings)
        name = PARQUET_CODECS[self._codec]
        if name != "none" and not pa.Codec.is_available(name):
            raise FormatError(f"PARQUET codec {self._codec} is not available in this pyarrow build")

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return ParquetWriter(path, self.settings, self._codec, spill)

    def prefetch_first(self, batch: Batch) -> bool:
        """Parse schemaless JSON lines ahead into the schema the first record infers (see
        :func:`~formats._rows.first_record_parser`): a partition's first file has no predecessor
        whose parser could, so its first batch was parsed on the consuming thread."""
        parser = first_record_parser(self.settings, batch, "PARQUET")
        if parser is None:
            return False
        parser.prefetch(batch)
        return True
