"""formats.avro_encode: byte-for-byte what fastavro.schemaless_writer writes, row by row."""

from __future__ import annotations

import io
import math
import random
import struct
from typing import Any

import fastavro
import pyarrow as pa
import pytest

from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import flat_fields
from formats.avro_encode import encode_datums

_KINDS = ("boolean", "int", "long", "float", "double", "string", "bytes")
_INT_EDGES = [0, 1, -1, 63, -64, 64, -65, 2**31 - 1, -(2**31)]
_LONG_EDGES = [*_INT_EDGES, 2**63 - 1, -(2**63), 2**62, -(2**62) - 1, 2**56, 2**49 - 1]
_TEXTS = ["", "a", "é", "日本語", "🎉 emoji", "x" * 200, "nul\x00inside", "line\nbreak"]


def _value(kind: str, rng: random.Random) -> Any:
    if kind == "boolean":
        return rng.random() < 0.5
    if kind == "int":
        if rng.random() < 0.3:
            return rng.choice(_INT_EDGES)
        return rng.randint(-(2**31), 2**31 - 1) >> rng.randrange(32)
    if kind == "long":
        if rng.random() < 0.3:
            return rng.choice(_LONG_EDGES)
        return rng.randint(-(2**63), 2**63 - 1) >> rng.randrange(64)
    if kind in ("float", "double"):
        special = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1e-310, 3.4e38]
        value = rng.choice(special) if rng.random() < 0.3 else rng.uniform(-1e6, 1e6)
        return struct.unpack("<f", struct.pack("<f", value))[0] if kind == "float" else value
    if rng.random() < 0.5:
        text = rng.choice(_TEXTS)
    else:
        text = "".join(chr(rng.randrange(32, 0x2FFF)) for _ in range(rng.randrange(300)))
    return text if kind == "string" else text.encode()


def _schema(nullable: dict[str, int]) -> dict[str, Any]:
    fields = []
    for kind in _KINDS:
        branch = nullable.get(kind)
        kind_type: Any = kind if branch is None else (["null", kind] if branch == 0 else [kind, "null"])
        fields.append({"name": f"f_{kind}", "type": kind_type})
    return {"type": "record", "name": "r", "fields": fields}


def _fastavro(schema: dict[str, Any], rows: list[dict[str, Any]]) -> bytes:
    parsed = fastavro.parse_schema(schema)
    out = io.BytesIO()
    for row in rows:
        fastavro.schemaless_writer(out, parsed, row)
    return out.getvalue()


@pytest.mark.parametrize("seed", range(6))
def test_random_rows_match_fastavro_byte_for_byte(seed: int) -> None:
    rng = random.Random(seed)
    nullable = {k: rng.randrange(2) for k in _KINDS if rng.random() < 0.6}
    schema = _schema(nullable)
    rows = [
        {f"f_{k}": None if k in nullable and rng.random() < 0.3 else _value(k, rng) for k in _KINDS}
        for _ in range(rng.choice((1, 7, 500)))
    ]
    batch = pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))
    fields = flat_fields(schema)
    assert fields is not None
    assert encode_datums(batch, fields) == _fastavro(schema, batch.to_pylist())
    # a slice (non-zero array offsets) encodes just its rows
    if len(rows) > 3:
        part = batch.slice(2, len(rows) - 3)
        assert encode_datums(part, fields) == _fastavro(schema, part.to_pylist())


def test_all_null_and_single_byte_columns() -> None:
    schema = _schema(dict.fromkeys(_KINDS, 0))
    rows = [{f"f_{k}": None for k in _KINDS} for _ in range(5)]
    batch = pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))
    fields = flat_fields(schema)
    assert fields is not None
    assert encode_datums(batch, fields) == _fastavro(schema, rows) == b"\x00" * 35


def test_signalling_nan_float_gets_the_quiet_bit_like_fastavro() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "f", "type": "float"}]}
    signalling = pa.array([0x7F800001, 0xFF800005], type=pa.uint32()).view(pa.float32())
    batch = pa.RecordBatch.from_arrays([signalling], names=["f"])
    fields = flat_fields(schema)
    assert fields is not None
    assert encode_datums(batch, fields) == _fastavro(schema, batch.to_pylist())


def test_what_it_cannot_encode_is_none() -> None:
    schema = {"type": "record", "name": "r", "fields": [{"name": "f", "type": "long"}]}
    fields = flat_fields(schema)
    assert fields is not None
    nulls = pa.RecordBatch.from_arrays([pa.array([1, None], pa.int64())], names=["f"])
    assert encode_datums(nulls, fields) is None  # a null in a field that is not nullable
    wrong = pa.RecordBatch.from_arrays([pa.array([1, 2], pa.int32())], names=["f"])
    assert encode_datums(wrong, fields) is None  # not the field's Arrow type
    empty = pa.RecordBatch.from_arrays([pa.array([], pa.int64())], names=["f"])
    assert encode_datums(empty, fields) == b""
