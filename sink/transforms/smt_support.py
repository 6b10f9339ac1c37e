"""What the stock field SMTs (:mod:`sink.transforms.fields`, :mod:`sink.transforms.cast`) share.

Kafka writes every such SMT once, with ``$Key`` and ``$Value`` subclasses that only choose which
half of the record to read and replace (``operatingSchema``/``operatingValue``/``newRecord``); the
same split is :class:`FieldTransform` here. Connect schemas are Avro schemas in this project, so
the Connect notions the SMTs test (a struct, an optional schema, a field's default, the Connect
``Schema.Type``) are read off the Avro schema by the helpers below.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar

from sink.records.record import Schema, SinkRecord
from sink.transforms.base import Transform, TransformSettings, record_error

__all__ = [
    "CONNECT_DEFAULT",
    "FieldTransform",
    "bool_setting",
    "connect_type",
    "field_value",
    "java_split",
    "optional_of",
    "record_schema",
    "split_optional",
]

CONNECT_DEFAULT = {"name": "ConnectDefault", "namespace": "io.confluent.connect.avro"}
"""What Confluent's AvroData names an unnamed Connect struct (``SchemaBuilder.struct()``), so a
struct an SMT builds from nothing (HoistField, ValueToKey) reads back as the same Avro schema."""

_PRIMITIVE_TYPES = {
    "int": "INT32",
    "long": "INT64",
    "float": "FLOAT32",
    "double": "FLOAT64",
    "boolean": "BOOLEAN",
    "string": "STRING",
    "bytes": "BYTES",
    "null": "NULL",
}
_COMPLEX_TYPES = {
    "record": "STRUCT",
    "map": "MAP",
    "array": "ARRAY",
    "enum": "STRING",
    "fixed": "BYTES",
}


def split_optional(schema: Schema) -> tuple[Schema, bool]:
    """``(T, True)`` for an optional schema (``["null", T]`` or ``[T, "null"]``), else ``(schema, False)``."""
    if isinstance(schema, list) and len(schema) == 2 and "null" in schema:
        other = schema[1] if schema[0] == "null" else schema[0]
        return other, True
    return schema, False


def optional_of(schema: Schema, with_default: bool = False) -> list[Any]:
    """``schema`` made optional, as AvroData writes it: null first, or last when a default is set."""
    inner, _ = split_optional(schema)
    return [inner, "null"] if with_default else ["null", inner]


def record_schema(schema: Schema | None) -> dict[str, Any] | None:
    """The Avro record behind ``schema`` (optional or not), or ``None`` when it is no struct."""
    if schema is None:
        return None
    inner, _ = split_optional(schema)
    if isinstance(inner, dict) and inner.get("type") == "record":
        return inner
    return None


def connect_type(schema: Schema) -> str | None:
    """The Connect ``Schema.Type`` (``"INT8"``, ``"STRUCT"``, ...) of an Avro schema, ``None`` if none fits.

    int8/int16 travel as Avro ``int`` with AvroData's ``connect.type`` property; a union other than
    an optional one has no Connect type (AvroData makes it a struct the SMTs here do not read).
    """
    inner, _ = split_optional(schema)
    if isinstance(inner, str):
        return _PRIMITIVE_TYPES.get(inner)
    if isinstance(inner, dict):
        kind = inner.get("type")
        if isinstance(kind, (dict, list)):
            return connect_type(kind)
        if kind == "int" and inner.get("connect.type") in ("int8", "int16"):
            return str(inner["connect.type"]).upper()
        if isinstance(kind, str):
            return _PRIMITIVE_TYPES.get(kind) or _COMPLEX_TYPES.get(kind)
    return None


def field_value(value: dict[str, Any], field: dict[str, Any], replace_null_with_default: bool) -> Any:
    """Connect's ``Struct.get(field)`` (null becomes the field's default) or ``getWithoutDefault``."""
    found = value.get(field["name"])
    if found is None and replace_null_with_default:
        return field.get("default")
    return found


def java_split(text: str, sep: str) -> list[str]:
    """Java's ``String.split``: trailing empty strings dropped (``"a:".split(":")`` is ``["a"]``)."""
    parts = text.split(sep)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def bool_setting(settings: TransformSettings, key: str, default: bool) -> bool:
    """A ConfigDef BOOLEAN: ``true``/``false`` in any case, anything else is a config error."""
    raw = settings.get(key)
    if raw is None:
        return default
    if raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise settings.error(key, raw, "must be true or false")


class FieldTransform(Transform):
    """An SMT with ``$Key`` and ``$Value`` variants: subclasses set ``on_key``.

    Replacing the value drops ``raw_value`` (the converter's JSON text), which the JSON format
    would otherwise write through instead of the transformed value.
    """

    on_key: ClassVar[bool] = False

    def operating_schema(self, record: SinkRecord) -> Schema | None:
        return record.key_schema if self.on_key else record.value_schema

    def operating_value(self, record: SinkRecord) -> Any:
        return record.key if self.on_key else record.value

    def new_record(self, record: SinkRecord, schema: Schema | None, value: Any) -> SinkRecord:
        if self.on_key:
            return dataclasses.replace(record, key=value, key_schema=schema)
        return dataclasses.replace(record, value=value, value_schema=schema, raw_value=None)

    def require_map(self, record: SinkRecord, value: Any, purpose: str) -> dict[str, Any]:
        """Kafka's ``Requirements.requireMap``: schemaless data must be a map here."""
        if not isinstance(value, dict):
            found = "null" if value is None else type(value).__name__
            raise record_error(
                record,
                self.name,
                f"Only Map objects supported in absence of schema for [{purpose}], found: {found}",
            )
        return value

    def require_struct(
        self, record: SinkRecord, value: Any, schema: Schema, purpose: str
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Kafka's ``Requirements.requireStruct``: the struct and its record schema."""
        rec = record_schema(schema)
        if rec is None or not isinstance(value, dict):
            found = "null" if value is None else type(value).__name__
            raise record_error(
                record, self.name, f"Only Struct objects supported for [{purpose}], found: {found}"
            )
        return value, rec
