"""Decode many Avro bodies of one flat record schema straight into Arrow columns.

Decoding Confluent Avro one record at a time (fastavro, then a dict per record, then Arrow) costs
about 4 µs per record before anything is written, several times what consuming it costs. For the
commonest value schema, a record of primitive fields, the bodies of a whole batch can instead be
decoded column by column with numpy: every record's read position advances field by field in one
vectorised step, so the Python work is per field, not per record.

Only what can be decoded exactly as fastavro + ``RecordBatch.from_pylist`` would is accepted:
``boolean``, ``int``, ``long``, ``float``, ``double``, ``string``, ``bytes`` fields, each possibly
in a ``["null", T]`` union, with no logical types. Any body that does not decode cleanly (a varint
longer than 10 bytes, a string running past its record, bytes left over, invalid UTF-8, a union
branch that does not exist) makes :func:`decode_columns` return ``None``; the caller then decodes
those records one by one and the per-record path reports the bad one.

The numpy decoding still costs a dozen array operations per field, each a few microseconds
however few records it covers, so a batch of 2,000 took ~0.3 ms. ``formats/_avro_flat.c`` walks
the bodies once, record by record and field by field, with the same rules, in about half of
that with the Arrow arrays built: joined bodies (letting go of the GIL for a megabyte or more),
or the consumed values where they lie (:func:`decode_bodies`). It is used when it was built
(:data:`NATIVE`), and the numpy version here (``decode_columns_py``), which the tests hold it to,
runs otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType
from typing import Any

import numpy as np
import numpy.ma  # imported with this module, not on the first batch (see below)
import pyarrow as pa

# pa.array(ndarray) asks whether its argument is a numpy.ma.MaskedArray, and numpy imports
# numpy.ma lazily on that first attribute access: ~15 ms inside the first batch's decoding (its
# latency, and a benchmark's timed window), where importing it above puts it at start-up.

__all__ = ["NATIVE", "FlatField", "decode_bodies", "decode_columns", "field_codes", "flat_fields", "native"]

_PRIMITIVES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
_WINDOW = np.arange(10, dtype=np.int64)
_SHIFTS = (np.arange(10, dtype=np.uint64) * np.uint64(7)).astype(np.uint64)
_PAD = 10
"""Zero bytes after the joined bodies, so that a 10-byte varint window never reads past the end."""

FlatField = tuple[str, str, int]
"""(name, primitive type, index of the ``null`` branch: -1 when the field is not nullable)."""

_CODES = {"boolean": "b", "int": "i", "long": "l", "float": "f", "double": "d", "string": "s", "bytes": "y"}
_DTYPES: dict[str, Any] = {"b": np.bool_, "i": "<i4", "l": "<i8", "f": "<f4", "d": "<f8"}


def _load() -> ModuleType | None:
    try:
        from formats import _avro_flat
    except ImportError:
        return None
    return _avro_flat


_native = _load()
NATIVE = _native is not None
"""Whether ``formats/_avro_flat.c`` was built and decodes (and checks) the bodies."""


def native() -> ModuleType | None:
    """The C module, or None (looked up at each call, so a test can take it away)."""
    return _native


@lru_cache(maxsize=256)
def field_codes(fields: tuple[FlatField, ...]) -> tuple[bytes, bytes]:
    """The C module's description of ``fields``: one kind letter per field, and one byte per
    field saying where its null branch is (0: not nullable, 1: branch 0, 2: branch 1)."""
    kinds = "".join(_CODES[kind] for _name, kind, _null in fields).encode("ascii")
    nulls = bytes(null + 1 for _name, _kind, null in fields)
    return kinds, nulls


class _Malformed(Exception):
    """A body does not decode cleanly: leave the whole batch to the per-record path."""


def flat_fields(schema: Any) -> tuple[FlatField, ...] | None:
    """The fields of a flat record schema, or ``None`` when the schema is anything else."""
    if not isinstance(schema, dict) or schema.get("type") != "record" or not schema.get("fields"):
        return None
    out: list[FlatField] = []
    for field in schema["fields"]:
        kind = field.get("type")
        null_index = -1
        if isinstance(kind, list):
            if len(kind) != 2 or "null" not in kind:
                return None
            null_index = kind.index("null")
            kind = kind[1 - null_index]
        if not isinstance(kind, str) or kind not in _PRIMITIVES:
            return None
        out.append((field["name"], kind, null_index))
    return tuple(out)


def _varints(buf: np.ndarray, pos: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Zig-zag varints (Avro int/long) at ``pos``: (values as int64, positions after them).

    Byte by byte over the varints still going, not a 10-byte window for each: ids and lengths
    take 1-3 bytes, so the window's 10 gathers and shifts per value were mostly wasted work.
    """
    first = buf[pos]
    more = np.flatnonzero(first & 0x80)
    if not len(more):  # the common case (short strings, small numbers): one byte each
        raw1 = first.astype(np.int64)
        return (raw1 >> 1) ^ -(raw1 & 1), pos + 1
    raw = (first & 0x7F).astype(np.uint64)
    after = pos + 1
    for k in range(1, 10):
        at = after[more]
        byte = buf[at]
        if k == 9 and (byte > 1).any():  # also a 10th byte that goes on: longer than 10 bytes
            raise _Malformed("varint beyond 64 bits")
        raw[more] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        after[more] = at + 1
        more = more[(byte & 0x80) != 0]
        if not len(more):
            break
    values = (raw >> np.uint64(1)).view(np.int64) ^ -(raw & np.uint64(1)).view(np.int64)
    return values, after


def _fixed(buf: np.ndarray, pos: np.ndarray, width: int, dtype: str) -> np.ndarray:
    return np.ascontiguousarray(buf[pos[:, None] + _WINDOW[:width]]).view(dtype).ravel()


def decode_columns(
    data: bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    fields: Sequence[FlatField],
    schema: pa.Schema,
    *,
    padded: bool = False,
    header: int = 0,
) -> pa.RecordBatch | None:
    """Decode the bodies ``data[starts[i] + header:ends[i]]`` into one batch of ``schema``, or ``None``.

    Args:
        data: the bodies, concatenated (with anything in between, e.g. wire-format headers).
        starts, ends: int64 arrays, where each body (or the ``header`` before it) starts, and
            where each body ends, in ``data``.
        fields: :func:`flat_fields` of the writer schema the bodies were written with.
        schema: the Arrow schema of that Avro schema (:func:`formats.arrow_schema.avro_to_arrow`).
        padded: ``data`` already ends with ``_PAD`` zero bytes after the last body (as values
            joined by :func:`sink.records.avro_values.join_values` do): not copied to add them.
        header: bytes before each body to skip (5: a Confluent wire header).
    """
    c = native()
    if c is None:
        at = starts + header if header else starts
        return decode_columns_py(data, at, ends, fields, schema, padded=padded)
    kinds, nulls = field_codes(tuple(fields))
    columns = c.decode(data, np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(ends, np.int64),
                       header, kinds, nulls)
    return _batch(columns, fields, len(starts), schema)


def decode_bodies(
    values: list[bytes], fields: Sequence[FlatField], schema: pa.Schema, *, header: int = 0
) -> pa.RecordBatch | None:
    """:func:`decode_columns` of ``values`` (each ``header`` bytes, then a body) as they lie:
    the C module walks the list, so the values are not joined first (a copy of every byte);
    without it they are joined and decoded with numpy."""
    c = native()
    if c is None:
        lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        ends = np.cumsum(lengths)
        return decode_columns_py(b"".join(values), ends - lengths + header, ends, fields, schema)
    kinds, nulls = field_codes(tuple(fields))
    return _batch(c.decode_values(values, header, kinds, nulls), fields, len(values), schema)


def _batch(
    columns: list[tuple[bytes, bytes | None, bytes | None]] | None, fields: Sequence[FlatField], count: int,
    schema: pa.Schema,
) -> pa.RecordBatch | None:
    """The C decoder's columns as one Arrow batch (``None``: a body did not decode cleanly)."""
    if columns is None:
        return None
    arrays = [_array(column, field, count) for column, field in zip(columns, fields, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _array(column: tuple[bytes, bytes | None, bytes | None], field: FlatField, count: int) -> pa.Array:
    """One column of the C decoder as Arrow, built as :func:`_column` builds it (same buffers,
    so the same ``nbytes``, which a file's size and so ``flush.size`` count)."""
    values, present, offsets = column
    kind = field[1]
    dtype = _PRIMITIVES[kind]
    mask = None if present is None else ~np.frombuffer(present, np.bool_)
    if offsets is None:
        return pa.array(np.frombuffer(values, _DTYPES[_CODES[kind]]), type=dtype, mask=mask)
    buffers = [None, pa.py_buffer(offsets), pa.py_buffer(values)]
    nulls = 0 if mask is None else int(np.count_nonzero(mask))
    if nulls:
        buffers[0] = pa.py_buffer(np.packbits(~mask, bitorder="little"))  # type: ignore[operator]
    return pa.Array.from_buffers(dtype, count, buffers, nulls)


def decode_columns_py(
    data: bytes,
    starts: np.ndarray,
    ends: np.ndarray,
    fields: Sequence[FlatField],
    schema: pa.Schema,
    *,
    padded: bool = False,
) -> pa.RecordBatch | None:
    """:func:`decode_columns` with numpy (bodies at ``data[starts[i]:ends[i]]``), the C module's reference."""
    buf = np.frombuffer(data if padded else data + bytes(_PAD), dtype=np.uint8)
    count = len(starts)
    pos = starts.astype(np.int64, copy=True)
    try:
        columns = [_column(buf, pos, ends, count, field) for field in fields]
        batch = pa.RecordBatch.from_arrays(columns, schema=schema)
        batch.validate(full=True)  # UTF-8 of every string
    except (_Malformed, pa.ArrowInvalid, ValueError, OverflowError, IndexError):
        return None
    if not np.array_equal(pos, ends):  # bytes left over after the last field
        return None
    return batch


def _column(buf: np.ndarray, pos: np.ndarray, ends: np.ndarray, count: int, field: FlatField) -> pa.Array:
    """Decode one field of every record, advancing ``pos`` in place."""
    _name, kind, null_index = field
    if null_index >= 0:
        branch, after = _varints(buf, pos)
        if ((branch != 0) & (branch != 1)).any():
            raise _Malformed("union branch out of range")
        present = branch != null_index
        pos[:] = after
        if (pos > ends).any():
            raise _Malformed("union branch runs past its record")
        rows = np.flatnonzero(present)
    else:
        present = None
        rows = None
    at = pos if rows is None else pos[rows]
    if kind in ("int", "long"):
        values, after = _varints(buf, at)
        if kind == "int" and ((values < -(2**31)) | (values >= 2**31)).any():
            raise _Malformed("int out of range")
        dense: np.ndarray = values.astype(np.int32 if kind == "int" else np.int64)
    elif kind in ("float", "double"):
        width = 4 if kind == "float" else 8
        dense = _fixed(buf, at, width, "<f4" if width == 4 else "<f8")
        if width == 4:
            # the per-record path goes float32 -> Python float -> float32, which sets the quiet
            # bit of a signalling NaN (0x7f800001 -> 0x7fc00001): write the same bits
            dense.view(np.uint32)[np.isnan(dense)] |= np.uint32(0x00400000)
        after = at + width
    elif kind == "boolean":
        raw = buf[at]
        if (raw > 1).any():
            raise _Malformed("boolean byte other than 0/1")
        dense = raw.astype(bool)
        after = at + 1
    else:  # string / bytes: a long length, then the bytes
        lengths, begin = _varints(buf, at)
        after = begin + lengths
        if (lengths < 0).any() or (after > (ends if rows is None else ends[rows])).any():
            raise _Malformed("string runs past its record")
        if rows is None:
            pos[:] = after
        else:
            pos[rows] = after
        return _binary(buf, begin, lengths, count, rows, present, _PRIMITIVES[kind])
    if rows is None:
        pos[:] = after
        if (pos > ends).any():
            raise _Malformed("field runs past its record")
        return pa.array(dense, type=_PRIMITIVES[kind])
    pos[rows] = after
    if (pos > ends).any():
        raise _Malformed("field runs past its record")
    full = np.zeros(count, dtype=dense.dtype)
    full[rows] = dense
    return pa.array(full, type=_PRIMITIVES[kind], mask=~present)


def _binary(
    buf: np.ndarray, begin: np.ndarray, lengths: np.ndarray, count: int, rows: np.ndarray | None,
    present: np.ndarray | None, dtype: pa.DataType,
) -> pa.Array:
    """A string/binary array from the byte ranges ``[begin, begin + lengths)`` (of ``rows``).

    The ranges lie in record order in ``buf``, so ``begin[0], end[0], begin[1], end[1], ...`` are
    the offsets of a string array over ``buf`` itself, built without copying, whose even elements
    are the values and odd ones the bytes between them; Arrow's ``take`` of the even ones copies
    each value's bytes in one ``memcpy``. (Gathering them byte by byte through an int64 index
    array, as :func:`_gathered` does, cost ~0.3 µs per record of the bench's orders.) Nothing is
    checked here: the caller validates the batch's UTF-8.
    """
    n = len(begin)
    if n == 0 or len(buf) >= 2**31:
        return _gathered(buf, begin, lengths, count, rows, present, dtype)
    bounds = np.empty(2 * n, dtype=np.int64)
    bounds[0::2] = begin
    bounds[1::2] = begin + lengths
    if (np.diff(bounds) < 0).any():  # not in order (not the bodies of one joined batch)
        return _gathered(buf, begin, lengths, count, rows, present, dtype)
    spans = pa.Array.from_buffers(
        dtype, 2 * n - 1, [None, pa.py_buffer(bounds.astype(np.int32)), pa.py_buffer(buf)]
    )
    even = np.arange(0, 2 * n, 2, dtype=np.int32)
    if rows is None or present is None:
        taken = spans.take(pa.array(even))
    else:
        index = np.zeros(count, dtype=np.int32)
        index[rows] = even
        taken = spans.take(pa.array(index, mask=~present))
    if taken.null_count:
        return taken
    # take allocates a validity bitmap even when nothing is null; without it the array's nbytes
    # (which a file's bytes_written, and so flush.size, counts) are the per-record path's
    _validity, offsets, chars = taken.buffers()
    return pa.Array.from_buffers(dtype, count, [None, offsets, chars])


def _gathered(
    buf: np.ndarray, begin: np.ndarray, lengths: np.ndarray, count: int, rows: np.ndarray | None,
    present: np.ndarray | None, dtype: pa.DataType,
) -> pa.Array:
    """:func:`_binary` byte by byte, for ranges that are not in order or a buffer beyond 2 GiB."""
    full_lengths = lengths if rows is None else np.zeros(count, dtype=np.int64)
    if rows is not None:
        full_lengths[rows] = lengths
    offsets = np.zeros(count + 1, dtype=np.int64)
    np.cumsum(full_lengths, out=offsets[1:])
    total = int(offsets[-1])
    if total >= 2**31:
        raise _Malformed("more than 2 GiB of text in one batch")
    if total:
        starts_out = offsets[:-1] if rows is None else offsets[:-1][rows]
        index = np.repeat(begin - starts_out, lengths)
        index += np.arange(total, dtype=np.int64)
        chars = buf[index]
    else:
        chars = np.zeros(0, dtype=np.uint8)
    validity = None
    null_count = 0
    if present is not None:
        null_count = int(count - present.sum())
        validity = pa.py_buffer(np.packbits(present, bitorder="little")) if null_count else None
    return pa.Array.from_buffers(
        dtype, count, [validity, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(chars)], null_count
    )
