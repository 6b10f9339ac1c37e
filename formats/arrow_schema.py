"""Avro schema -> Arrow schema, for PARQUET.

Avro is the project's one schema language (see :mod:`sink.records.record`), so Parquet needs exactly this
mapping, chosen to be what Spark reads most naturally:

==========================================  =============================================
Avro                                        Arrow (and Parquet / Spark)
==========================================  =============================================
record                                      struct (top level: the table's columns)
array                                       list
map                                         map<string, V>
["null", T]                                 T, nullable
boolean / int / long / float / double       bool / int32 / int64 / float32 / float64
string, enum, uuid                          string
bytes / fixed                               binary / fixed_size_binary
decimal(p, s)                               decimal128(p, s) (decimal256 above 38 digits)
timestamp-millis / -micros                  timestamp[ms / us, tz=UTC]
local-timestamp-millis / -micros            timestamp[ms / us] (no time zone)
date                                        date32
time-millis / time-micros                   time32[ms] / time64[us]
null (a part only ever null)                string, all nulls (Spark cannot read Parquet NULL)
==========================================  =============================================

Unions of several non-null types have no Parquet equivalent and are rejected with a message.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from formats.base import FormatError

__all__ = ["avro_to_arrow", "value_column_schema"]

_PRIMITIVES: dict[str, pa.DataType] = {
    "null": pa.string(),
    "boolean": pa.bool_(),
    "int": pa.int32(),
    "long": pa.int64(),
    "float": pa.float32(),
    "double": pa.float64(),
    "bytes": pa.binary(),
    "string": pa.string(),
}

_LOGICAL: dict[str, pa.DataType] = {
    "timestamp-millis": pa.timestamp("ms", tz="UTC"),
    "timestamp-micros": pa.timestamp("us", tz="UTC"),
    "local-timestamp-millis": pa.timestamp("ms"),
    "local-timestamp-micros": pa.timestamp("us"),
    "date": pa.date32(),
    "time-millis": pa.time32("ms"),
    "time-micros": pa.time64("us"),
    "uuid": pa.string(),
}


def value_column_schema(schema: Any) -> bool:
    """Whether ``schema`` is not a record, so rows must be wrapped as ``{"value": v}`` for Parquet."""
    inner = schema
    if isinstance(inner, list):
        rest = [b for b in inner if b != "null"]
        inner = rest[0] if len(rest) == 1 else None
    return not (isinstance(inner, dict) and inner.get("type") == "record")


def avro_to_arrow(schema: Any) -> pa.Schema:
    """The Arrow schema of rows described by the Avro ``schema`` (a record, or wrapped as ``value``).

    Raises:
        FormatError: the schema uses something Parquet cannot store (multi-type unions, recursion).
    """
    names: dict[str, Any] = {}
    if value_column_schema(schema):
        dtype, nullable = _field(schema, names, "value", ())
        return pa.schema([pa.field("value", dtype, nullable=nullable)])
    record = schema if isinstance(schema, dict) else next(b for b in schema if b != "null")
    dtype = _type(record, names, "", ())
    return pa.schema(list(dtype))


def _field(schema: Any, names: dict[str, Any], path: str, stack: tuple[str, ...]) -> tuple[pa.DataType, bool]:
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        if len(branches) != 1:
            if not branches:
                return pa.string(), True
            raise FormatError(
                f"the Avro union {schema} at {path or 'the top level'} has several non-null types; "
                "Parquet cannot store it (use AVRO, or a schema with one type per field)"
            )
        return _type(branches[0], names, path, stack), True
    return _type(schema, names, path, stack), schema == "null"


def _type(schema: Any, names: dict[str, Any], path: str, stack: tuple[str, ...]) -> pa.DataType:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema]
        if schema in names:
            if schema in stack:
                raise FormatError(f"the recursive Avro type {schema} at {path} cannot be stored in Parquet")
            return _type(names[schema], names, path, stack)
        raise FormatError(f"unknown Avro type {schema!r} at {path}")
    if isinstance(schema, list):
        return _field(schema, names, path, stack)[0]
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "decimal" and kind in ("bytes", "fixed"):
        precision, scale = int(schema.get("precision", 38)), int(schema.get("scale", 0))
        return pa.decimal128(precision, scale) if precision <= 38 else pa.decimal256(precision, scale)
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind in ("record", "error"):
        name = schema["name"]
        full = f"{schema['namespace']}.{name}" if schema.get("namespace") and "." not in name else name
        names[full] = names[name] = schema
        stack = (*stack, full, name)
        fields = []
        for field in schema["fields"]:
            child = f"{path}.{field['name']}" if path else field["name"]
            dtype, nullable = _field(field["type"], names, child, stack)
            fields.append(pa.field(field["name"], dtype, nullable=nullable))
        return pa.struct(fields)
    if kind == "enum":
        names[schema["name"]] = schema
        return pa.string()
    if kind == "fixed":
        names[schema["name"]] = schema
        return pa.binary(int(schema["size"]))
    if kind == "array":
        dtype, nullable = _field(schema["items"], names, f"{path}[]", stack)
        return pa.list_(pa.field("element", dtype, nullable=nullable))
    if kind == "map":
        dtype, nullable = _field(schema["values"], names, f"{path}{{}}", stack)
        return pa.map_(pa.string(), pa.field("value", dtype, nullable=nullable))
    if isinstance(kind, str | list | dict):
        return _type(kind, names, path, stack)
    raise FormatError(f"unsupported Avro schema {schema!r} at {path}")
