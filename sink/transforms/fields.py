"""Kafka Connect's stock field SMTs, each with its ``$Key`` and ``$Value`` variant.

After Apache Kafka's ``connect/transforms`` (``InsertField``, ``ReplaceField``, ``MaskField``,
``ValueToKey``, ``ExtractField``, ``HoistField``, ``Flatten``; ``Cast`` is in
:mod:`sink.transforms.cast`): same settings, same results, same records refused. A struct is a
``dict``; with a schema (``value_schema``/``key_schema``, an Avro schema) the schema changes with
the value, without one the SMT works on the dict alone (Connect's "schemaless" mode).

Where Kafka throws ``DataException`` (or any other exception) for a record, the transform raises
a record error with stage ``TRANSFORMATION``, so the error policy can dead-letter that record.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from decimal import Decimal
from typing import Any

from sink.records.record import Schema, SinkRecord
from sink.transforms.base import Transform, TransformSettings, record_error
from sink.transforms.cast import CastKey, CastValue
from sink.transforms.smt_support import (
    CONNECT_DEFAULT,
    FieldTransform,
    bool_setting,
    connect_type,
    field_value,
    java_split,
    optional_of,
    record_schema,
    split_optional,
)

__all__ = ["FIELD_TRANSFORMS"]

_REPLACE_NULL = "replace.null.with.default"
_UTC = dt.UTC


def _with_fields(rec: dict[str, Any], fields: list[dict[str, Any]]) -> dict[str, Any]:
    """A copy of record schema ``rec`` (name, namespace, doc...: ``copySchemaBasics``) with new fields."""
    out = {k: v for k, v in rec.items() if k != "fields"}
    out["fields"] = fields
    return out


def _same_optionality(original: Schema, new_record: dict[str, Any]) -> Schema:
    """``new_record`` optional when ``original`` was (the SMTs keep the operating schema's optionality)."""
    _, optional = split_optional(original)
    return optional_of(new_record) if optional else new_record


def _field(name: str, schema: Schema, optional: bool) -> dict[str, Any]:
    """A new Avro field: optional ones are ``["null", T]`` with a null default, as AvroData writes them."""
    if optional:
        return {"name": name, "type": optional_of(schema), "default": None}
    return {"name": name, "type": schema}


class _InsertSpec:
    """A field name with Kafka's optionality suffix: ``!`` required, ``?`` (or none) optional."""

    def __init__(self, spec: str) -> None:
        self.optional = not spec.endswith("!")
        self.name = spec[:-1] if spec.endswith(("!", "?")) else spec


class InsertField(FieldTransform):
    """``InsertField``: adds the record's topic, partition, offset, timestamp and/or a static string.

    Without a schema the timestamp is epoch milliseconds; with one it is a ``timestamp-millis``
    long, whose Python value (as fastavro and the converters here give it) is a UTC ``datetime``.
    A null operating value (a tombstone) passes unchanged.
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        specs = {}
        for key in ("topic.field", "partition.field", "offset.field", "timestamp.field", "static.field"):
            raw = settings.get(key)
            specs[key] = _InsertSpec(raw) if raw is not None else None
        self.topic, self.partition, self.offset, self.timestamp, self.static = specs.values()
        self.static_value = settings.get("static.value")
        self.replace_null = bool_setting(settings, _REPLACE_NULL, True)
        if all(spec is None for spec in specs.values()):
            raise settings.error("topic.field", "", "No field insertion configured")
        if self.static is not None and self.static_value is None:
            raise settings.error(
                "static.value", "", f"No value specified for static field: {self.static.name}"
            )
        settings.check_all_used()

    def _inserts(self, record: SinkRecord, timestamp: Any) -> list[tuple[_InsertSpec, Any, Schema]]:
        ts_schema = {"type": "long", "logicalType": "timestamp-millis"}
        out: list[tuple[_InsertSpec, Any, Schema]] = []
        for spec, value, schema in (
            (self.topic, record.topic, "string"),
            (self.partition, record.partition, "int"),
            (self.offset, record.offset, "long"),
            (self.timestamp, timestamp, ts_schema),
            (self.static, self.static_value, "string"),
        ):
            if spec is not None:
                out.append((spec, value, schema))
        return out

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        if schema is None:
            updated = dict(self.require_map(record, value, "field insertion"))
            for spec, inserted, _ in self._inserts(record, record.timestamp):
                if inserted is not None:
                    updated[spec.name] = inserted
            return self.new_record(record, None, updated)
        struct, rec = self.require_struct(record, value, schema, "field insertion")
        ts = None
        if record.timestamp is not None:
            ts = dt.datetime.fromtimestamp(0, _UTC) + dt.timedelta(milliseconds=record.timestamp)
        fields = list(rec["fields"])
        updated = {f["name"]: field_value(struct, f, self.replace_null) for f in fields}
        names = {f["name"] for f in fields}
        for spec, inserted, field_schema in self._inserts(record, ts):
            if spec.name in names:
                raise record_error(
                    record, self.name, f"Cannot create field because of field name duplication {spec.name}"
                )
            if inserted is None and not spec.optional:
                raise record_error(
                    record, self.name, f'Invalid value: null used for required field: "{spec.name}"'
                )
            names.add(spec.name)
            fields.append(_field(spec.name, field_schema, spec.optional))
            updated[spec.name] = inserted
        return self.new_record(record, _same_optionality(schema, _with_fields(rec, fields)), updated)


class ReplaceField(FieldTransform):
    """``ReplaceField``: drops (``exclude``), keeps (``include``) and renames (``renames``) fields.

    ``blacklist``/``whitelist`` are the names Kafka before 3.0 used for ``exclude``/``include``;
    they are still read, and ignored when the new name is set too (as Kafka's deprecated aliases were).
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        exclude, blacklist = settings.get_list("exclude"), settings.get_list("blacklist")
        include, whitelist = settings.get_list("include"), settings.get_list("whitelist")
        self.exclude = set(exclude if settings.get("exclude") is not None else blacklist)
        self.include = set(include if settings.get("include") is not None else whitelist)
        self.renames: dict[str, str] = {}
        for mapping in settings.get_list("renames"):
            parts = java_split(mapping, ":")
            if len(parts) != 2:
                raise settings.error(
                    "renames", settings.get("renames") or "", f"Invalid rename mapping: {mapping}"
                )
            self.renames[parts[0]] = parts[1]
        self.reverse = {new: old for old, new in self.renames.items()}
        self.replace_null = bool_setting(settings, _REPLACE_NULL, True)
        settings.check_all_used()

    def _keep(self, field: str) -> bool:
        return field not in self.exclude and (not self.include or field in self.include)

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        if schema is None:
            value = self.require_map(record, value, "field replacement")
            updated = {self.renames.get(k, k): v for k, v in value.items() if self._keep(k)}
            return self.new_record(record, None, updated)
        struct, rec = self.require_struct(record, value, schema, "field replacement")
        fields: list[dict[str, Any]] = []
        out: dict[str, Any] = {}
        for field in rec["fields"]:
            if not self._keep(field["name"]):
                continue
            new_name = self.renames.get(field["name"], field["name"])
            if new_name in out:
                raise record_error(
                    record, self.name, f"Cannot create field because of field name duplication {new_name}"
                )
            fields.append({**field, "name": new_name})
            out[new_name] = field_value(struct, field, self.replace_null)
        return self.new_record(record, _same_optionality(schema, _with_fields(rec, fields)), out)


_MASK_ZERO: tuple[tuple[type, Any], ...] = (
    (bool, False),
    (int, 0),
    (float, 0.0),
    (Decimal, Decimal(0)),
    (str, ""),
    (dt.datetime, dt.datetime.fromtimestamp(0, _UTC)),
    (dt.date, dt.date(1970, 1, 1)),
    (dt.time, dt.time(0)),
    (list, []),
    (dict, {}),
)
"""MaskField's "null value" per type (``PRIMITIVE_VALUE_MAPPING``, empty List/Map); Kafka's
``new Date(0)`` for Date/Time/Timestamp is the epoch in each Python type. Bytes have none."""


class MaskField(FieldTransform):
    """``MaskField``: replaces ``fields`` by their type's zero, or by ``replacement`` cast to that type.

    The schema never changes. Without a schema, a listed field the map lacks is added as null, as
    Kafka's ``put(field, masked(value.get(field)))`` does.
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.fields = settings.get_list("fields")
        if not self.fields:
            raise settings.error("fields", settings.get("fields") or "", "Empty list")
        self.replacement = settings.get("replacement")
        if self.replacement == "":
            raise settings.error("replacement", "", "String must be non-empty")
        self.replace_null = bool_setting(settings, _REPLACE_NULL, True)
        settings.check_all_used()

    def _masked(self, record: SinkRecord, value: Any) -> Any:
        if value is None:
            return None
        if self.replacement is None:
            for kind, zero in _MASK_ZERO:
                if isinstance(value, kind):
                    return copy.copy(zero)
            raise record_error(record, self.name, f"Cannot mask value of type: {type(value).__name__}")
        return self._replaced(record, value, self.replacement)

    def _replaced(self, record: SinkRecord, value: Any, text: str) -> Any:
        """``REPLACEMENT_MAPPING_FUNC``: numbers and strings only, the replacement parsed as that type."""
        if isinstance(value, str):
            return text
        if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
            raise record_error(
                record,
                self.name,
                f"Cannot mask value of type {type(value).__name__} with custom replacement.",
            )
        try:
            number = Decimal(text.strip())
        except ArithmeticError:
            number = Decimal("NaN")
        if not number.is_finite() and not isinstance(value, float):
            raise record_error(record, self.name, f"Unable to convert {text} (String) to number")
        if isinstance(value, float):
            return float(number)
        if isinstance(value, Decimal):
            return number
        return int(number)

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            updated = dict(self.require_map(record, value, "mask fields"))
            for field in self.fields:
                updated[field] = self._masked(record, updated.get(field))
            return self.new_record(record, None, updated)
        struct, rec = self.require_struct(record, value, schema, "mask fields")
        masked = set(self.fields)
        out = {}
        for field in rec["fields"]:
            original = field_value(struct, field, self.replace_null)
            out[field["name"]] = self._masked(record, original) if field["name"] in masked else original
        return self.new_record(record, schema, out)


class ValueToKey(Transform):
    """``ValueToKey``: the key becomes a struct of ``fields`` copied from the value (which stays)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.fields = settings.get_list("fields")
        if not self.fields:
            raise settings.error("fields", settings.get("fields") or "", "Empty list")
        self.replace_null = bool_setting(settings, _REPLACE_NULL, True)
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        purpose = "copying fields from value to key"
        value = record.value
        if record.value_schema is None:
            if not isinstance(value, dict):
                found = "null" if value is None else type(value).__name__
                raise record_error(
                    record,
                    self.name,
                    f"Only Map objects supported in absence of schema for [{purpose}], found: {found}",
                )
            return _replace_key(record, None, {f: value.get(f) for f in self.fields})
        rec = record_schema(record.value_schema)
        if rec is None or not isinstance(value, dict):
            raise record_error(record, self.name, f"Only Struct objects supported for [{purpose}]")
        by_name = {f["name"]: f for f in rec["fields"]}
        key_fields = []
        key = {}
        for name in self.fields:
            if name not in by_name:
                raise record_error(record, self.name, f"Field does not exist: {name}")
            field = by_name[name]
            key_fields.append({k: v for k, v in field.items() if k in ("name", "type", "default", "doc")})
            key[name] = field_value(value, field, self.replace_null)
        key_schema = {"type": "record", **CONNECT_DEFAULT, "fields": key_fields}
        return _replace_key(record, key_schema, key)


def _replace_key(record: SinkRecord, schema: Schema | None, key: Any) -> SinkRecord:
    return dataclasses.replace(record, key=key, key_schema=schema)


class ExtractField(FieldTransform):
    """``ExtractField``: the operating value becomes one of its fields (nulls pass as nulls).

    Only ``field.syntax.version=V1`` (a plain field name) is supported.
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.field = settings.require("field")
        syntax = settings.get("field.syntax.version", "V1") or "V1"
        if syntax.upper() != "V1":
            raise settings.error(
                "field.syntax.version", syntax, "only V1 (plain field names) is supported by kcql-sink"
            )
        self.replace_null = bool_setting(settings, _REPLACE_NULL, True)
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            if value is None:
                return self.new_record(record, None, None)
            return self.new_record(
                record, None, self.require_map(record, value, "field extraction").get(self.field)
            )
        rec = record_schema(schema)
        if rec is None or not (value is None or isinstance(value, dict)):
            raise record_error(record, self.name, "Only Struct objects supported for [field extraction]")
        field = next((f for f in rec["fields"] if f["name"] == self.field), None)
        if field is None:
            raise record_error(record, self.name, f"Unknown field: {self.field}")
        extracted = None if value is None else field_value(value, field, self.replace_null)
        return self.new_record(record, field["type"], extracted)


class HoistField(FieldTransform):
    """``HoistField``: the operating value becomes ``{field: value}``, its schema a one-field record."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.field = settings.require("field")
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if schema is None:
            return self.new_record(record, None, {self.field: value})
        if value is None and not split_optional(schema)[1]:
            raise record_error(
                record, self.name, f'Invalid value: null used for required field: "{self.field}"'
            )
        new_schema = {"type": "record", **CONNECT_DEFAULT, "fields": [{"name": self.field, "type": schema}]}
        return self.new_record(record, new_schema, {self.field: value})


_LEAF_TYPES = {"INT8", "INT16", "INT32", "INT64", "FLOAT32", "FLOAT64", "BOOLEAN", "STRING", "BYTES", "ARRAY"}


class Flatten(FieldTransform):
    """``Flatten``: nested structs (and, without a schema, maps) become top-level fields named
    ``outer<delimiter>inner``; arrays are left as they are.

    A flattened field is optional when it or any struct above it was, and takes the default the
    structs above it give it. Avro field names allow only ``[A-Za-z0-9_]``: with a schema, use a
    delimiter such as ``_`` (Kafka's default ``.`` makes names Avro refuses, there as here).
    """

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.delimiter = settings.get("delimiter", ".") or ""
        settings.check_all_used()

    def _name(self, prefix: str, name: str) -> str:
        return name if not prefix else prefix + self.delimiter + name

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        value = self.operating_value(record)
        schema = self.operating_schema(record)
        if value is None:
            return record
        if schema is None:
            out: dict[str, Any] = {}
            self._schemaless(record, self.require_map(record, value, "flattening"), "", out)
            return self.new_record(record, None, out)
        rec = record_schema(schema)
        if rec is None or not isinstance(value, dict):
            raise record_error(record, self.name, "Only Struct objects supported for [flattening]")
        fields: list[dict[str, Any]] = []
        flat: dict[str, Any] = {}
        self._with_schema(record, rec, value, "", split_optional(schema)[1], None, fields, flat)
        return self.new_record(record, _same_optionality(schema, _with_fields(rec, fields)), flat)

    def _schemaless(
        self, record: SinkRecord, value: dict[str, Any], prefix: str, out: dict[str, Any]
    ) -> None:
        for key, item in value.items():
            name = self._name(prefix, key)
            if isinstance(item, dict):
                self._schemaless(record, item, name, out)
            elif item is None or isinstance(item, (bool, int, float, str, bytes, list)):
                out[name] = item
            else:
                raise record_error(
                    record,
                    self.name,
                    f"Flatten transformation was passed a value of type {type(item).__name__} "
                    "which is not supported by Connect's data API",
                )

    def _with_schema(
        self,
        record: SinkRecord,
        rec: dict[str, Any],
        value: dict[str, Any] | None,
        prefix: str,
        optional: bool,
        parent_default: dict[str, Any] | None,
        fields: list[dict[str, Any]],
        flat: dict[str, Any],
    ) -> None:
        for field in rec["fields"]:
            name = self._name(prefix, field["name"])
            inner, field_optional = split_optional(field["type"])
            is_optional = optional or field_optional
            default = field.get("default")
            if default is None and parent_default is not None:
                default = parent_default.get(field["name"])
            kind = connect_type(inner)
            child = None if value is None else value.get(field["name"])
            if kind == "STRUCT" and isinstance(inner, dict):
                if child is not None and not isinstance(child, dict):
                    raise record_error(record, self.name, f"field {name} is not a struct")
                self._with_schema(record, inner, child, name, is_optional, default, fields, flat)
                continue
            if kind not in _LEAF_TYPES:
                raise record_error(
                    record,
                    self.name,
                    f"Flatten transformation does not support {kind or field['type']} "
                    f"for record with schemas (for field {name}).",
                )
            new_field: dict[str, Any] = {"name": name, "type": inner}
            if is_optional:
                new_field["type"] = optional_of(inner, with_default=default is not None)
                new_field["default"] = default
            elif default is not None:
                new_field["default"] = default
            fields.append(new_field)
            flat[name] = default if child is None else child


# Module-level classes (not built with type()) so that transforms pickle by name.


class InsertFieldKey(InsertField):
    """``InsertField$Key``."""

    on_key = True


class InsertFieldValue(InsertField):
    """``InsertField$Value``."""

    on_key = False


class ReplaceFieldKey(ReplaceField):
    """``ReplaceField$Key``."""

    on_key = True


class ReplaceFieldValue(ReplaceField):
    """``ReplaceField$Value``."""

    on_key = False


class MaskFieldKey(MaskField):
    """``MaskField$Key``."""

    on_key = True


class MaskFieldValue(MaskField):
    """``MaskField$Value``."""

    on_key = False


class ExtractFieldKey(ExtractField):
    """``ExtractField$Key``."""

    on_key = True


class ExtractFieldValue(ExtractField):
    """``ExtractField$Value``."""

    on_key = False


class HoistFieldKey(HoistField):
    """``HoistField$Key``."""

    on_key = True


class HoistFieldValue(HoistField):
    """``HoistField$Value``."""

    on_key = False


class FlattenKey(Flatten):
    """``Flatten$Key``."""

    on_key = True


class FlattenValue(Flatten):
    """``Flatten$Value``."""

    on_key = False


_PACKAGE = "org.apache.kafka.connect.transforms."


def _registry() -> dict[str, type[Transform]]:
    out: dict[str, type[Transform]] = {}
    for cls in (
        InsertFieldKey,
        InsertFieldValue,
        ReplaceFieldKey,
        ReplaceFieldValue,
        MaskFieldKey,
        MaskFieldValue,
        ExtractFieldKey,
        ExtractFieldValue,
        HoistFieldKey,
        HoistFieldValue,
        FlattenKey,
        FlattenValue,
        CastKey,
        CastValue,
    ):
        side = "Key" if cls.on_key else "Value"
        out[f"{_PACKAGE}{cls.__name__.removesuffix(side)}${side}"] = cls
    out[f"{_PACKAGE}ValueToKey"] = ValueToKey  # one class in Kafka: it always reads the value
    return out


FIELD_TRANSFORMS: dict[str, type[Transform]] = _registry()
"""Connect class name → transform, for ``transforms.<name>.type``."""
