"""Kafka Connect's ``Cast`` SMT (``$Key``/``$Value``), after Apache Kafka's ``Cast.java``.

Kept apart from :mod:`sink.transforms.fields` because reproducing Java's conversions is most of
it: narrowing wraps (300 as int8 is 44), a double truncates toward zero and saturates, strings
parse as ``Byte.parseByte``/``Double.parseDouble`` do (a bad one is a record error, not 0),
``Boolean.parseBoolean`` is true only for "true", and ``toString`` writes booleans as
``true``/``false``, doubles as Java does (``1.0E10``), bytes as base64 and dates in ISO 8601 UTC.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import re
import struct
from decimal import Decimal
from typing import Any

from sink.records.record import Schema, SinkRecord
from sink.transforms.base import TransformSettings, record_error
from sink.transforms.smt_support import (
    FieldTransform,
    bool_setting,
    connect_type,
    field_value,
    java_split,
    optional_of,
    split_optional,
)

__all__ = ["Cast", "CastKey", "CastValue"]

_OUTPUT_SCHEMAS: dict[str, Schema] = {
    "INT8": {"type": "int", "connect.type": "int8"},
    "INT16": {"type": "int", "connect.type": "int16"},
    "INT32": "int",
    "INT64": "long",
    "FLOAT32": "float",
    "FLOAT64": "double",
    "BOOLEAN": "boolean",
    "STRING": "string",
}
"""Cast's output types, as Avro (int8/int16 carry AvroData's ``connect.type``). BYTES is not one:
Kafka casts binary only *to* string."""
_INPUT_TYPES = {"INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES"}
_ALL_TYPES = _INPUT_TYPES | {"ARRAY", "MAP", "STRUCT"}
_INT_BITS = {"INT8": 8, "INT16": 16, "INT32": 32, "INT64": 64}
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
_JAVA_FLOAT = re.compile(r"[+-]?(NaN|Infinity|([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[fFdD]?)")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MILLIS_PER_DAY = 86_400_000


class _CastError(Exception):
    """A value Kafka's Cast refuses (its ``DataException``); becomes a record error."""


def _wrap(number: int, bits: int) -> int:
    """Java's narrowing of an integer to ``bits`` bits (two's complement wrap)."""
    half = 1 << (bits - 1)
    return (number + half) % (1 << bits) - half


def _java_integral(value: Any, bits: int) -> int:
    """``Number.byteValue``/``shortValue``/``intValue``/``longValue`` of a Python number."""
    if isinstance(value, float):
        if math.isnan(value):
            return 0
        limit = 63 if bits == 64 else 31  # (long)d or (int)d saturate, then narrow
        truncated = (
            max(-(1 << limit), min((1 << limit) - 1, int(value)))
            if math.isfinite(value)
            else ((1 << limit) - 1 if value > 0 else -(1 << limit))
        )
        return _wrap(truncated, bits)
    return _wrap(int(value), bits)


def _float32(value: float) -> float:
    """A double rounded to the nearest float32, as ``(float) d`` (overflow gives infinity)."""
    try:
        return float(struct.unpack("f", struct.pack("f", value))[0])
    except OverflowError:
        return math.copysign(math.inf, value)


def _logical_millis(value: Any) -> Any:
    """Date/Time/Timestamp as their Connect representation (``encodeLogicalType``); others unchanged."""
    if isinstance(value, dt.datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=dt.UTC)
        return (moment - _EPOCH) // dt.timedelta(milliseconds=1)
    if isinstance(value, dt.date):
        return (value - _EPOCH.date()).days
    if isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    return value


def _date_string(value: dt.date | dt.time) -> str:
    """``Values.dateFormatFor(date).format(date)``: the format is chosen by the epoch millis."""
    if isinstance(value, dt.datetime):
        millis = int(_logical_millis(value))
    elif isinstance(value, dt.date):
        millis = int(_logical_millis(value)) * _MILLIS_PER_DAY
    else:
        millis = int(_logical_millis(value))
    moment = _EPOCH + dt.timedelta(milliseconds=millis)
    ms = f"{moment.microsecond // 1000:03d}"
    if millis < _MILLIS_PER_DAY:
        return moment.strftime("%H:%M:%S.") + ms + "Z"
    if millis % _MILLIS_PER_DAY == 0:
        return moment.strftime("%Y-%m-%d")
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + ms + "Z"


def java_double_string(value: float, float32: bool = False) -> str:
    """``Double.toString`` (or ``Float.toString``): shortest digits, scientific outside [1e-3, 1e7)."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1, value) < 0 else "0.0"
    digits = repr(value)
    if float32:
        digits = next(
            (f"{value:.{p}g}" for p in range(1, 10) if _float32(float(f"{value:.{p}g}")) == value),
            repr(value),
        )
    exact = Decimal(digits)
    if 1e-3 <= abs(value) < 1e7:
        text = format(exact, "f")
        return text if "." in text else text + ".0"
    sign, numerals, exponent = exact.as_tuple()
    figures = "".join(map(str, numerals)).rstrip("0") or "0"
    power = int(exponent) + len(numerals) - 1
    mantissa = figures[0] + "." + (figures[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{power}"


def _cast(value: Any, source: str | None, schema: Schema | None, target: str) -> Any:
    """``castValueToType``: ``source`` is the Connect type from the schema, ``None`` when schemaless."""
    if value is None:
        return None
    if source is None:
        source = _schemaless_type(value)
    if source not in _INPUT_TYPES:
        raise _CastError(
            f"Cast transformation does not support casting from {source}; "
            f"supported types are {sorted(_INPUT_TYPES)}"
        )
    if isinstance(value, (dt.date, dt.time)):
        if target == "STRING":
            return _date_string(value)
        value = _logical_millis(value)
    if target == "STRING":
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float):
            return java_double_string(value, float32=source == "FLOAT32")
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(bytes(value)).decode("ascii")
        return str(value)
    if isinstance(value, str):
        value = _parse(value, target)
    elif not isinstance(value, (bool, int, float, Decimal)):
        raise _CastError(f"Unexpected type in Cast transformation: {type(value).__name__}")
    if target == "BOOLEAN":
        return value if isinstance(value, bool) else _java_integral(value, 64) != 0
    if isinstance(value, bool):
        value = int(value)
    if target in _INT_BITS:
        return _java_integral(value, _INT_BITS[target])
    return _float32(float(value)) if target == "FLOAT32" else float(value)


def _parse(text: str, target: str) -> Any:
    """Java's ``Byte.parseByte`` ... ``Double.parseDouble``, ``Boolean.parseBoolean`` of a string."""
    if target == "BOOLEAN":
        return text.lower() == "true"
    if target in _INT_BITS:
        bits = _INT_BITS[target]
        if not _JAVA_INT.fullmatch(text) or _wrap(int(text), bits) != int(text):
            raise _CastError(f"Value ({text}) was out of range for requested data type")
        return int(text)
    stripped = text.strip()
    if not _JAVA_FLOAT.fullmatch(stripped):
        raise _CastError(f"Value ({text}) was out of range for requested data type")
    return float(stripped.rstrip("fFdD").replace("Infinity", "inf"))


def _schemaless_type(value: Any) -> str:
    """``ConnectSchema.schemaType(value.getClass())`` for what the JSON converter gives."""
    for kind, name in ((bool, "BOOLEAN"), (int, "INT64"), (float, "FLOAT64"), (str, "STRING")):
        if isinstance(value, kind):
            return name
    if isinstance(value, (bytes, bytearray)):
        return "BYTES"
    if isinstance(value, dict):
        return "MAP"
    if isinstance(value, list):
        return "ARRAY"
    raise _CastError(
        f"Cast transformation was passed a value of type {type(value).__name__} "
        "which is not supported by Connect's data API"
    )


class Cast(FieldTransform):
    """``Cast``: ``spec`` is one type for the whole operating value, or ``field:type,...`` for fields.

    Without a schema a listed field missing from the map is added as null (Kafka's
    ``put(field, cast(value.get(field)))``). With one, the cast fields' Avro types change and keep
    their optionality and (cast) default.
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        raw = settings.get("spec") or ""
        mappings = settings.get_list("spec")
        if not mappings:
            raise settings.error("spec", raw, "Must specify at least one field to cast.")
        self.casts: dict[str, str] = {}
        self.whole: str | None = None
        for mapping in mappings:
            parts = java_split(mapping, ":")
            if len(parts) > 2 or not parts:
                raise settings.error("spec", raw, f"Invalid cast mapping: {mapping}")
            kind = parts[-1].strip().upper()
            if kind not in _ALL_TYPES:
                raise settings.error("spec", raw, f"Invalid type found in casting spec: {parts[-1].strip()}")
            if kind not in _OUTPUT_SCHEMAS:
                raise settings.error(
                    "spec",
                    raw,
                    f"Cast transformation does not support casting to {kind}; "
                    f"supported types are {sorted(_OUTPUT_SCHEMAS)}",
                )
            if len(parts) == 1:
                self.whole = kind
            else:
                self.casts[parts[0].strip()] = kind
        if self.whole is not None and len(mappings) > 1:
            raise settings.error(
                "spec",
                raw,
                "Cast transformations that specify a type to cast the entire value to "
                "may only specify a single cast in their spec",
            )
        self.replace_null = bool_setting(settings, "replace.null.with.default", True)
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        try:
            if schema is None:
                if self.whole is not None:
                    return self.new_record(record, None, _cast(value, None, None, self.whole))
                updated = dict(self.require_map(record, value, "cast types"))
                for field, kind in self.casts.items():
                    updated[field] = _cast(updated.get(field), None, None, kind)
                return self.new_record(record, None, updated)
            if self.whole is not None:
                new_schema = self._cast_schema(schema, self.whole)
                return self.new_record(
                    record, new_schema, _cast(value, connect_type(schema) or "UNKNOWN", schema, self.whole)
                )
            struct, rec = self.require_struct(record, value, schema, "cast types")
            fields = []
            out = {}
            for field in rec["fields"]:
                original = field_value(struct, field, self.replace_null)
                target = self.casts.get(field["name"])
                if target is None:
                    fields.append(field)
                    out[field["name"]] = original
                    continue
                new_field = {**field, "type": self._cast_schema(field["type"], target)}
                if field.get("default") is not None:
                    new_field["default"] = _cast(
                        field["default"], connect_type(field["type"]) or "UNKNOWN", field["type"], target
                    )
                fields.append(new_field)
                out[field["name"]] = _cast(
                    original, connect_type(field["type"]) or "UNKNOWN", field["type"], target
                )
        except _CastError as exc:
            raise record_error(record, self.name, str(exc)) from None
        new_rec = {k: v for k, v in rec.items() if k != "fields"}
        new_rec["fields"] = fields
        return self.new_record(record, optional_of(new_rec) if split_optional(schema)[1] else new_rec, out)

    @staticmethod
    def _cast_schema(schema: Schema, kind: str) -> Schema:
        """The Avro schema of ``kind``, optional (null where it was: first or last) when ``schema`` was."""
        _, optional = split_optional(schema)
        target = _OUTPUT_SCHEMAS[kind]
        if not optional:
            return target
        return ["null", target] if isinstance(schema, list) and schema[0] == "null" else [target, "null"]


class CastKey(Cast):
    """``Cast$Key``."""

    on_key = True


class CastValue(Cast):
    """``Cast$Value``."""

    on_key = False
