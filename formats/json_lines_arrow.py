"""Blocks of JSON lines parsed by Arrow straight into a file's frozen schema, when exact.

PARQUET and AVRO share it: once a file's schema is frozen and is a record of flat inferred fields
(``long``, ``double``, ``string``, ``boolean``, possibly nullable), a consumed batch's joined JSON
lines (``Batch.json_lines``) parse in one Arrow call into that schema, instead of ``json.loads``
and a dict per record. :class:`LineParser` returns ``None`` whenever the per-record path might
decide differently, so the caller falls back to it.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from formats.arrow_schema import avro_to_arrow
from formats.base import Batch

__all__ = ["LineParser", "line_parse_options"]

_EXACT_DOUBLE = 2.0**53
"""Doubles from this magnitude on may have been rounded from a JSON integer."""
_LINES, _CHECKED = "json-lines-parse", "json-lines-checked"
"""Keys of a batch's memo: Arrow's parse of its JSON lines, and the same parse checked."""
_LINE_TYPES = frozenset(("long", "double", "string", "boolean"))
"""Inferred field types whose Arrow JSON parsing matches ``json.loads`` + ``from_pylist`` exactly
(a JSON integer in a ``double`` column becomes a double in both; a field always null so far,
Avro ``null``, is excluded: a later text there rolls the file on the per-record path)."""


def line_parse_options(avro: Any) -> pa_json.ParseOptions | None:
    """Arrow JSON parse options for a file of flat inferred records, or None when not flat."""
    if not isinstance(avro, dict) or avro.get("type") != "record":
        return None
    fields = []
    for field in avro["fields"]:
        kind = field["type"]
        if isinstance(kind, list):
            branches = [b for b in kind if b != "null"]
            if len(branches) != 1:
                return None
            kind = branches[0]
        if not isinstance(kind, str) or kind not in _LINE_TYPES:
            return None
        fields.append(field["name"])
    if len(set(fields)) != len(fields):
        return None
    return pa_json.ParseOptions(
        explicit_schema=avro_to_arrow(avro), unexpected_field_behavior="error", newlines_in_values=False
    )


try:  # flat lines parsed in C (setup.py builds it when a compiler is at hand), else Arrow's reader
    from formats import _json_lines
except ImportError:  # pragma: no cover - a build without a C compiler
    _json_lines = None  # type: ignore[assignment]

_C_KINDS = {pa.int64(): "long", pa.float64(): "double", pa.string(): "string", pa.bool_(): "boolean"}


def _c_fields(schema: pa.Schema) -> tuple[tuple[str, str, bool], ...] | None:
    """The C parser's field list for ``schema`` (name, kind, nullable), or None when it cannot
    read that schema (or was not built). Only nullable fields: Arrow's reader makes every field
    of its table nullable, so a schema with a non-null field never passes :meth:`LineParser.checked`
    (inferred schemas have none: every inferred field is ``["null", T]``)."""
    if _json_lines is None:
        return None
    fields = tuple((f.name, _C_KINDS.get(f.type, ""), f.nullable) for f in schema)
    return fields if fields and all(kind and nullable for _, kind, nullable in fields) else None


class _Parsed(NamedTuple):
    """A block's parse (None when Arrow refused it) and whether the block was all ASCII."""

    table: pa.Table | None
    ascii: bool


class LineParser:
    """Parses a block of JSON lines into a table of one frozen file schema, or returns None.

    None for anything the per-record path might decide differently: a line Arrow does not parse
    into that schema (a missing/extra/retyped field, a number out of range, a malformed line),
    invalid UTF-8 (Arrow keeps it, ``json.loads`` rejects it), a non-finite double (Arrow also
    reads ``-NaN``, which ``json.loads`` rejects) and a double from 2**53 on (Arrow rounds a JSON
    integer there, the per-record path decides it).

    Two halves: :meth:`__call__` is one Arrow call, which only reads frozen state and releases
    the GIL, so it may run on another thread while the caller consumes; :meth:`checked` runs
    the checks on the caller's thread. A worker thread waits for the GIL at each crossing back
    into Python, up to the interpreter's switch interval (5 ms) while the consuming thread runs
    Python code, so the checks' dozen small Arrow calls cost far more there than here.
    """

    __slots__ = ("_checked_key", "_doubles", "_fields", "_lines_key", "_options", "_schema")

    def __init__(self, options: pa_json.ParseOptions, schema: pa.Schema) -> None:
        self._options = options
        self._schema = schema
        self._doubles = [f.name for f in schema if pa.types.is_float64(f.type)]
        self._fields = _c_fields(schema)
        # A batch's parse is memoised by schema, not by parser: the next file of a partition (a
        # new writer, a new parser, the same inferred schema) takes the parse its predecessor
        # started ahead, instead of parsing the batch again on the consuming thread.
        self._lines_key = (_LINES, schema)
        self._checked_key = (_CHECKED, schema)

    def __call__(self, data: bytes) -> pa.Table | None:
        """The parse of ``data``, unchecked; None when Arrow refuses it. The C parser
        (``formats/_json_lines.c``) reads it when it can, else Arrow's reader."""
        if self._fields is not None:
            parsed = _json_lines.parse(data, self._fields)
            if parsed is not None:
                return self._table(*parsed)
        return self.arrow(data)

    def _table(self, rows: int, columns: list[tuple[int, bytes | None, bytes, bytes | None]]) -> pa.Table:
        arrays = []
        for field, (nulls, validity, values, text) in zip(self._schema, columns, strict=True):
            buffers = [None if validity is None else pa.py_buffer(validity), pa.py_buffer(values)]
            if text is not None:
                buffers.append(pa.py_buffer(text))
            arrays.append(pa.Array.from_buffers(field.type, rows, buffers, null_count=nulls))
        return pa.Table.from_arrays(arrays, schema=self._schema)

    def arrow(self, data: bytes) -> pa.Table | None:
        """Arrow's reader's parse of ``data``, unchecked; None when it refuses it."""
        try:
            return pa_json.read_json(
                pa.py_buffer(data),
                read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1),
                parse_options=self._options,
            )
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
            return None

    def parse_batch(self, batch: Batch) -> _Parsed:
        """:meth:`__call__` of the batch's framed JSON lines (thread-safe: the batch's forms are),
        and whether they are ASCII (then their text needs no UTF-8 validation)."""
        data = batch.json_lines(checked=False)
        return _Parsed(None, False) if data is None else _Parsed(self(data), data.isascii())

    def checked_batch(self, batch: Batch) -> pa.Table | None:
        """The batch's rows, parsed (or taken from :meth:`parse_batch` run ahead) and checked."""
        parsed = batch.memo(self._lines_key, self.parse_batch)
        table = self.checked(parsed.table, ascii_text=parsed.ascii)
        return table if table is not None and table.num_rows == len(batch) else None

    def prefetch(self, batch: Batch) -> None:
        """Start :meth:`parse_batch` of ``batch`` on its helper thread (see ``FormatWriter.prefetch``)."""
        batch.ahead(self._lines_key, self.parse_batch)

    def rows(self, batch: Batch) -> pa.Table | None:
        """``batch``'s rows in the file's schema, exactly as the per-record path makes them, or None.

        The consumed batch a slice comes from is parsed and checked once (memoised on it, maybe
        parsed ahead); a slice takes its rows from that. When a line elsewhere in the consumed
        batch does not fit, the slice alone is tried.
        """
        whole, start = batch.whole()
        table = whole.memo(self._checked_key, self.checked_batch)
        if table is not None:
            return table if whole is batch else table.slice(start, len(batch))
        if whole is batch:
            return None
        return self.checked_batch(batch)

    def checked(self, table: pa.Table | None, *, ascii_text: bool = False) -> pa.Table | None:
        """``table`` (a result of :meth:`__call__`) if the per-record path would store it so.

        ``ascii_text``: the parsed text was all ASCII, so its strings are valid UTF-8 and the
        full validation (the UTF-8 of every string, most of this check's cost) is left out;
        Arrow's parser builds the rest of the table's structure itself.
        """
        if table is None:
            return None
        if not ascii_text:
            try:
                table.validate(full=True)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                return None
        if not table.schema.equals(self._schema):
            return None
        for column in self._doubles:
            values = table.column(column)
            # a NaN or an infinity makes the sum non-finite (so does a sum beyond the largest
            # double, which only values far from 2**53 reach); min_max skips NaN, not infinities
            total = pc.sum(values).as_py()
            if total is None:
                continue  # no values
            if not math.isfinite(total):
                return None
            low, high = pc.min_max(values).values()
            if max(-low.as_py(), high.as_py()) >= _EXACT_DOUBLE:
                return None
        return table
