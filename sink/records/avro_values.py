"""The cheap form of Confluent Avro values: the bodies of one schema id, decoded to Arrow when asked.

A run of values that all carry the same Confluent wire header (magic byte 0 and one schema id)
can be decoded column by column (:mod:`formats.avro_columns`) into one Arrow batch, which the
PARQUET format appends as it is when its file has that schema. :func:`avro_runs` splits a
partition's values into such runs (and runs of tombstones or foreign payloads, which go record
by record); the decoding itself is left until a format asks (:func:`decode_values`), so a
statement writing JSON or CSV never pays for it.

STOREAS AVRO writes such bodies as they came when its file has their schema; it only needs to
know that :func:`decode_values` would have decoded every one of them, which :func:`check_values`
answers without building the columns (no gathering of text bytes into Arrow buffers).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from formats.avro_columns import _PAD, FlatField, _Malformed, _varints, decode_columns

__all__ = ["AvroRun", "avro_runs", "check_values", "decode_values"]

_wire_header = itemgetter(slice(0, 5))

AvroRun = tuple[int, int, int | None]
"""``(start, stop, schema id)``: values ``start`` to ``stop`` of the list given to
:func:`avro_runs` and their common schema id, or ``None`` when they go record by record."""


def _schema_id(header: bytes | None) -> int | None:
    if header is None or len(header) != 5 or header[0] != 0:
        return None
    return int.from_bytes(header[1:5], "big")


def avro_runs(values: Sequence[bytes | None]) -> list[AvroRun]:
    """Split ``values`` into maximal runs of one schema id, and runs of anything else."""
    if not values:
        return []
    if None not in values:
        headers = set(map(_wire_header, values))  # type: ignore[arg-type]
        if len(headers) == 1:
            return [(0, len(values), _schema_id(headers.pop()))]
    runs: list[AvroRun] = []
    start = 0
    keys = (None if v is None else _schema_id(v[:5]) for v in values)
    for schema_id, group in groupby(keys):
        count = sum(1 for _ in group)
        runs.append((start, start + count, schema_id))
        start += count
    return runs


def decode_values(
    values: Sequence[bytes], fields: tuple[FlatField, ...], arrow_schema: pa.Schema
) -> pa.RecordBatch | None:
    """The bodies (after the 5-byte wire header) decoded into one Arrow batch, or ``None`` when
    one does not decode cleanly (the per-record path then reports it)."""
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    batch: Any = decode_columns(b"".join(values), ends - lengths + 5, ends, fields, arrow_schema)
    return batch


def check_values(values: Sequence[bytes], fields: tuple[FlatField, ...]) -> bool:
    """Whether :func:`decode_values` would decode every body (after the 5-byte wire header)
    cleanly, walked field by field as it does, without building the columns.

    The same checks in the same order: union branches 0/1, ints in range, booleans 0/1, lengths
    and fields that stay inside their record, no bytes left over, and valid UTF-8 in strings,
    which is decided without copying: a string whose bytes are all ASCII is valid, and only the
    strings holding a byte >= 0x80 are decoded one by one.
    """
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    data = b"".join(values)
    buf = np.frombuffer(data + bytes(_PAD), dtype=np.uint8)
    pos = ends - lengths + 5
    high: np.ndarray | None = None
    try:
        for _name, kind, null_index in fields:
            if null_index >= 0:
                branch, after = _varints(buf, pos)
                if ((branch != 0) & (branch != 1)).any():
                    return False
                pos = after
                if (pos > ends).any():
                    return False
                rows = np.flatnonzero(branch != null_index)
                at, limit = pos[rows], ends[rows]
            else:
                rows, at, limit = None, pos, ends
            if kind in ("int", "long"):
                number, after = _varints(buf, at)
                if kind == "int" and ((number < -(2**31)) | (number >= 2**31)).any():
                    return False
            elif kind in ("float", "double"):
                after = at + (4 if kind == "float" else 8)
            elif kind == "boolean":
                if (buf[at] > 1).any():
                    return False
                after = at + 1
            else:  # string / bytes
                size, begin = _varints(buf, at)
                after = begin + size
                if (size < 0).any() or (after > limit).any() or int(size.sum()) >= 2**31:
                    return False
                if kind == "string" and len(begin):
                    if high is None:  # where the bytes >= 0x80 are, once per batch
                        high = np.flatnonzero(buf >= 0x80)
                    odd = np.flatnonzero(np.searchsorted(high, after) != np.searchsorted(high, begin))
                    for i in odd.tolist():
                        try:
                            data[int(begin[i]) : int(after[i])].decode("utf-8")
                        except UnicodeDecodeError:
                            return False
            if (after > limit).any():
                return False
            if rows is None:
                pos = after
            else:
                pos = pos.copy()
                pos[rows] = after
    except (_Malformed, IndexError, ValueError, OverflowError):
        return False
    return bool(np.array_equal(pos, ends))
