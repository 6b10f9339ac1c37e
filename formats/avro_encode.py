"""Encode an Arrow batch of one flat record schema into Avro binary datums, column by column.

The inverse of :mod:`formats.avro_columns`. fastavro encodes a dict per record (~3 µs each, most
of a JSON -> AVRO run); for a record of primitive fields the datums of a whole batch can be built
per field instead: zig-zag varints for every row of a column at once with numpy, fixed-width
values as their little-endian bytes, strings as a length varint followed by their UTF-8. Each
field becomes one Arrow binary array holding that field's encoding per row, and Arrow joins them
row by row (``binary_join_element_wise``, a memcpy per value in C++); the joined data buffer is
the concatenated datums, in row order.

Exactly the bytes ``fastavro.schemaless_writer`` writes for ``batch.to_pylist()`` rows, or
``None`` (the caller then writes the rows one by one with fastavro): a column whose Arrow type is
not the field's, a null in a field that is not nullable, an ``int`` field that is not int32.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from formats.avro_columns import FlatField

__all__ = ["encode_datums", "encode_rows"]

_ARROW_TYPES = {
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "string": pa.string(),
    "bytes": pa.binary(),
}
_GROUPS = np.arange(10, dtype=np.uint64)
_SHIFTS = _GROUPS * np.uint64(7)
_LIMITS = np.uint64(1) << (_SHIFTS[1:])
"""A zig-zag value needs one more 7-bit group for each of these it reaches."""
_MAX_BYTES = 2**31 - 1
"""Arrow binary arrays (int32 offsets) hold at most this much: larger batches go row by row."""


def encode_datums(batch: pa.RecordBatch, fields: Sequence[FlatField]) -> bytes | None:
    """The Avro binary encoding of every row of ``batch``, concatenated, or ``None``.

    Args:
        batch: one column per field, in the schema's order, typed as
            :func:`formats.arrow_schema.avro_to_arrow` maps the field.
        fields: :func:`formats.avro_columns.flat_fields` of the Avro record schema.
    """
    encoded = encode_rows(batch, fields)
    return None if encoded is None else encoded[0]


def encode_rows(batch: pa.RecordBatch, fields: Sequence[FlatField]) -> tuple[bytes, np.ndarray] | None:
    """:func:`encode_datums`, plus where each row's datum ends in it (int64, one per row)."""
    count = batch.num_rows
    if batch.num_columns != len(fields):
        return None
    if not count:
        return b"", np.zeros(0, dtype=np.int64)
    pieces: list[pa.Array] = []
    for (_name, kind, null_index), column in zip(fields, batch.columns, strict=True):
        if column.type != _ARROW_TYPES[kind]:
            return None
        present: np.ndarray | None = None
        if column.null_count:
            if null_index < 0:
                return None
            present = ~np.asarray(column.is_null(), dtype=bool)
        if null_index >= 0:
            # the union branch index, zig-zag encoded: 0 -> 0x00, 1 -> 0x02
            value_branch, null_branch = (0, 2) if null_index == 1 else (2, 0)
            branch = np.full(count, value_branch, dtype=np.uint8)
            if present is not None:
                branch[~present] = null_branch
            pieces.append(_fixed_width(branch, 1, None))
        piece = _encode_column(column, kind, present)
        if piece is None:
            return None
        pieces.extend(piece)
    if len(pieces) == 1:
        joined = pieces[0]
    else:
        try:
            joined = pc.binary_join_element_wise(*pieces, b"", null_handling="replace")
        except (pa.ArrowInvalid, pa.ArrowCapacityError):  # beyond 2 GiB of datums
            return None
    offsets = np.frombuffer(joined.buffers()[1], dtype=np.int32, count=count + 1, offset=4 * joined.offset)
    start, stop = int(offsets[0]), int(offsets[-1])
    return joined.buffers()[2][start:stop].to_pybytes(), offsets[1:].astype(np.int64) - start


def _encode_column(column: pa.Array, kind: str, present: np.ndarray | None) -> list[pa.Array] | None:
    """Per-row encodings of one column's values (empty for null rows), as binary arrays."""
    if kind in ("int", "long"):
        values = np.asarray(column.fill_null(0) if present is not None else column, dtype=np.int64)
        return [_varints(values, present)]
    if kind in ("float", "double"):
        dtype = np.float32 if kind == "float" else np.float64
        raw = np.asarray(column.fill_null(0) if present is not None else column, dtype=dtype).copy()
        if kind == "float":
            # fastavro packs a Python float (the float32 widened) back into 4 bytes, which sets the
            # quiet bit of a signalling NaN: write the same bits
            raw.view(np.uint32)[np.isnan(raw)] |= np.uint32(0x00400000)
        width = 4 if kind == "float" else 8
        return [_fixed_width(raw.view(np.uint8), width, present)]
    if kind == "boolean":
        raw = np.asarray(column.fill_null(False) if present is not None else column, dtype=bool)
        return [_fixed_width(raw.view(np.uint8), 1, present)]
    # string / bytes: a long byte length, then the bytes
    offsets = np.frombuffer(
        column.buffers()[1], dtype=np.int32, count=len(column) + 1, offset=4 * column.offset
    )
    lengths = np.diff(offsets).astype(np.int64)
    if present is not None:
        lengths[~present] = 0  # Arrow allows bytes under a null slot: the per-row path writes none
    data = column.cast(pa.binary()) if kind == "string" else column
    return [_varints(lengths, present), data]


def _varints(values: np.ndarray, present: np.ndarray | None) -> pa.Array:
    """Zig-zag varints of int64 ``values`` (nothing for rows not ``present``), one per row."""
    zigzag = (values.view(np.uint64) << np.uint64(1)) ^ (values >> 63).view(np.uint64)
    if not (zigzag >> np.uint64(7)).any():  # every value fits one byte (small numbers, short strings)
        return _fixed_width(zigzag.astype(np.uint8), 1, present)
    lengths = 1 + (zigzag[:, None] >= _LIMITS[None, :]).sum(axis=1)
    groups = ((zigzag[:, None] >> _SHIFTS[None, :]) & np.uint64(0x7F)).astype(np.uint8)
    groups[_GROUPS[None, :].astype(np.int64) < (lengths - 1)[:, None]] |= 0x80
    if present is not None:
        lengths[~present] = 0
    data = groups[_GROUPS[None, :].astype(np.int64) < lengths[:, None]]
    return _binary(lengths, data)


def _fixed_width(raw: np.ndarray, width: int, present: np.ndarray | None) -> pa.Array:
    """``width`` bytes per row from the contiguous ``raw`` (nothing for rows not ``present``)."""
    count = len(raw) // width
    if present is None:
        offsets = np.arange(0, width * count + 1, width, dtype=np.int32)
        return pa.Array.from_buffers(pa.binary(), count, [None, pa.py_buffer(offsets), pa.py_buffer(raw)])
    lengths = present.astype(np.int64) * width
    data = raw.reshape(count, width)[present].ravel()
    return _binary(lengths, data)


def _binary(lengths: np.ndarray, data: np.ndarray) -> pa.Array:
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.Array.from_buffers(
        pa.binary(), len(lengths), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))]
    )
