"""Decode one committed file into an Arrow table, whatever its STOREAS format.

Shared by the Spark data source (executors yield the table's record batches) and by
``kcql-sink cat`` (which needs no Spark). Every format is decoded with an independent library
(pyarrow, fastavro, the csv and json modules), never with our own writers.
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
import uuid
from collections.abc import Mapping
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from kcql.errors import SinkError
from kcql.model import StoreFormat

__all__ = ["FileDecodeError", "avro_to_arrow_type", "conform", "read_table", "to_jsonable"]

_GZIP_MAGIC = b"\x1f\x8b"


class FileDecodeError(SinkError):
    """A committed file cannot be decoded as the plan's format (names the file)."""


def read_table(data: bytes, fmt: StoreFormat, *, name: str = "<file>") -> pa.Table:
    """Decode ``data`` (a whole committed file) written in ``fmt``.

    Raises:
        FileDecodeError: naming ``name`` and the format when the bytes do not decode.
    """
    try:
        if fmt == StoreFormat.PARQUET:
            return pq.read_table(pa.BufferReader(data))
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
        if fmt == StoreFormat.AVRO:
            return _read_avro(data)
        if fmt == StoreFormat.JSON:
            return _read_json(data)
        if fmt in (StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS):
            return _read_csv(data, with_headers=fmt == StoreFormat.CSV_WITHHEADERS)
        if fmt == StoreFormat.TEXT:
            lines = data.decode("utf-8").splitlines()
            return pa.table({"value": pa.array(lines, pa.string())})
        if fmt == StoreFormat.BYTES:
            return pa.table({"value": pa.array([data], pa.binary())})
    except (ValueError, TypeError, KeyError, OSError, EOFError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise FileDecodeError(f"cannot decode {name} as {fmt.value}: {exc}") from exc
    raise FileDecodeError(f"unsupported format {fmt!r} for {name}")


def _read_json(data: bytes) -> pa.Table:
    """JSON lines: pyarrow's vectorised reader first; per-line parsing for what it rejects
    (top-level non-objects, a field changing type within the file)."""
    if not data.strip():
        return pa.table({})
    try:
        table = pa_json.read_json(pa.BufferReader(data))
        # pyarrow turns ISO-looking strings into timestamps; Spark (and the writer) kept strings
        if not any(_has_timestamp(f.type) for f in table.schema):
            return table
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    rows = [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()]
    rows = [r if isinstance(r, dict) else {"value": r} for r in rows]
    try:
        return pa.Table.from_pylist(rows)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        # mixed types across records: keep each top-level field as its JSON text
        names = list(dict.fromkeys(k for r in rows for k in r))
        return pa.table({n: pa.array([_to_text(r.get(n)) for r in rows], pa.string()) for n in names})


def _has_timestamp(typ: pa.DataType) -> bool:
    if pa.types.is_timestamp(typ):
        return True
    if pa.types.is_struct(typ):
        return any(_has_timestamp(typ.field(i).type) for i in range(typ.num_fields))
    if pa.types.is_list(typ):
        return _has_timestamp(typ.value_type)
    return False


def _read_csv(data: bytes, *, with_headers: bool) -> pa.Table:
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    if with_headers:
        if not rows:
            return pa.table({})
        header, rows = rows[0], rows[1:]
    else:
        width = max((len(r) for r in rows), default=0)
        header = [f"_c{i}" for i in range(width)]
    cols = {
        h: pa.array([r[i] if i < len(r) else None for r in rows], pa.string()) for i, h in enumerate(header)
    }
    return pa.table(cols)


def _read_avro(data: bytes) -> pa.Table:
    reader = fastavro.reader(io.BytesIO(data))
    schema = reader.writer_schema
    rows: list[Any] = list(reader)
    arrow_type = avro_to_arrow_type(schema)
    if not pa.types.is_struct(arrow_type):
        return pa.table({"value": _column(list(rows), arrow_type)})
    columns = {}
    for fld in arrow_type:
        columns[fld.name] = _column([r.get(fld.name) for r in rows], fld.type)
    return pa.table(columns)


def _column(values: list[Any], typ: pa.DataType) -> pa.Array:
    """Values as ``typ``; what Arrow cannot hold that way (multi-branch unions, UUID objects)
    becomes text rather than failing the file."""
    try:
        return pa.array(values, typ)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
        return pa.array([_to_text(v) for v in values], pa.string())


_AVRO_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.null(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}


def avro_to_arrow_type(schema: Any) -> pa.DataType:
    """Map a parsed Avro schema to Arrow the way Spark's Avro reader maps it to SQL types."""
    if isinstance(schema, str):
        return _AVRO_PRIMITIVES.get(schema, pa.string())
    if isinstance(schema, list):
        branches = [s for s in schema if s != "null"]
        if len(branches) == 1:
            return avro_to_arrow_type(branches[0])
        return pa.string()  # multi-branch unions: rendered as text
    if isinstance(schema, Mapping):
        logical = schema.get("logicalType")
        kind = schema.get("type")
        if logical == "decimal" and kind in ("bytes", "fixed"):
            return pa.decimal128(int(schema.get("precision", 38)), int(schema.get("scale", 0)))
        if logical in ("timestamp-millis", "timestamp-micros"):
            return pa.timestamp("us", tz="UTC")
        if logical == "date":
            return pa.date32()
        if logical == "uuid":
            return pa.string()
        if kind == "record":
            return pa.struct([pa.field(f["name"], avro_to_arrow_type(f["type"])) for f in schema["fields"]])
        if kind == "array":
            return pa.list_(avro_to_arrow_type(schema["items"]))
        if kind == "map":
            return pa.map_(pa.string(), avro_to_arrow_type(schema["values"]))
        if kind == "enum":
            return pa.string()
        if kind == "fixed":
            return pa.binary()
        return avro_to_arrow_type(kind)
    return pa.string()


def conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """Reshape ``table`` to ``schema``: missing columns become nulls, types are cast (schema evolution)."""
    columns = []
    for fld in schema:
        if fld.name in table.column_names:
            col = table.column(fld.name)
            if col.type != fld.type:
                try:
                    col = col.cast(fld.type)
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                    col = pa.array([_to_text(v) for v in col.to_pylist()], fld.type)
            columns.append(col)
        else:
            columns.append(pa.nulls(table.num_rows, fld.type))
    return pa.Table.from_arrays(columns, schema=schema)


def _to_text(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID):
        return str(value)
    return json.dumps(to_jsonable(value), sort_keys=True)


def to_jsonable(value: Any) -> Any:
    """Make a decoded value JSON-serialisable (bytes → base64, decimals/timestamps → text)."""
    if isinstance(value, dict):
        return {str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        if value and all(isinstance(v, tuple) and len(v) == 2 for v in value):  # Arrow map → pairs
            return {str(k): to_jsonable(v) for k, v in value}
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)
