"""The cheap form of Confluent Avro values: the bodies of one schema id, decoded to Arrow when asked.

A run of values that all carry the same Confluent wire header (magic byte 0 and one schema id)
can be decoded column by column (:mod:`formats.avro_columns`) into one Arrow batch, which the
PARQUET format appends as it is when its file has that schema. :func:`avro_runs` splits a
partition's values into such runs (and runs of tombstones or foreign payloads, which go record
by record); the decoding itself is left until a format asks (:func:`decode_values`), so a
statement writing JSON or CSV never pays for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from formats.avro_columns import FlatField, decode_columns

__all__ = ["AvroRun", "avro_runs", "decode_values"]

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
