"""Kafka Connect's stock field SMTs: the results Kafka documents and its own unit tests assert.

Cases come from Apache Kafka's ``InsertFieldTest``, ``ReplaceFieldTest``, ``MaskFieldTest``,
``ValueToKeyTest``, ``ExtractFieldTest``, ``HoistFieldTest``, ``FlattenTest`` and ``CastTest``
(``connect/transforms/src/test``), with Connect schemas written as the Avro schemas this project
carries. Every assertion compares exact values and schemas, so a wrong type or lost optionality fails.
"""

from __future__ import annotations

import datetime as dt
import pickle
from decimal import Decimal
from typing import Any

import pytest

from kcql.errors import ConfigError, RecordError
from sink.records.record import SinkRecord
from sink.transforms.base import Transform, TransformSettings
from sink.transforms.cast import java_double_string
from sink.transforms.fields import FIELD_TRANSFORMS

PKG = "org.apache.kafka.connect.transforms."
TS = 1_700_000_000_123
TS_DATETIME = dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
CONNECT_DEFAULT = {"type": "record", "name": "ConnectDefault", "namespace": "io.confluent.connect.avro"}


def smt(kind: str, **settings: str) -> Transform:
    """Configure ``kind`` (e.g. ``InsertField$Value``) as ``transforms.t1``; keys use ``_`` for ``.``."""
    values = {key.replace("_", "."): value for key, value in settings.items()}
    return FIELD_TRANSFORMS[PKG + kind]("t1", TransformSettings("transforms.t1.", values))


def smt_raw(kind: str, settings: dict[str, str]) -> Transform:
    """Configure with setting names given verbatim (for names holding ``_``)."""
    return FIELD_TRANSFORMS[PKG + kind]("t1", TransformSettings("transforms.t1.", settings))


def rec(
    value: Any = None, schema: Any = None, key: Any = None, key_schema: Any = None, **kw: Any
) -> SinkRecord:
    return SinkRecord(
        topic="t",
        partition=0,
        offset=5,
        timestamp=kw.pop("timestamp", TS),
        key=key,
        value=value,
        value_schema=schema,
        key_schema=key_schema,
        raw_value=kw.pop("raw_value", b"{}"),
    )


def record_schema(*fields: dict[str, Any], name: str = "V") -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": list(fields)}


def config_error_key(kind: str, settings: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as caught:
        smt_raw(kind, settings)
    return caught.value.problems[0].key


def record_error(transform: Transform, record: SinkRecord) -> RecordError:
    with pytest.raises(RecordError) as caught:
        transform.apply(record)
    assert caught.value.stage == "TRANSFORMATION"
    return caught.value


def test_registry_names_every_stock_field_smt() -> None:
    expected = {
        f"{name}${side}"
        for name in (
            "InsertField",
            "ReplaceField",
            "MaskField",
            "ExtractField",
            "HoistField",
            "Flatten",
            "Cast",
        )
        for side in ("Key", "Value")
    } | {"ValueToKey"}
    assert set(FIELD_TRANSFORMS) == {PKG + name for name in expected}


def test_transforms_pickle_by_class_name() -> None:
    """Each variant is a module-level class, so a configured transform survives pickling."""
    transform = smt("InsertField$Key", topic_field="topic")
    copy = pickle.loads(pickle.dumps(transform))  # noqa: S301 -- our own bytes, just written
    out = copy.apply(rec("v", key={"id": 1}))
    assert out is not None
    assert out.key == {"id": 1, "topic": "t"}


# --- InsertField -----------------------------------------------------------------------------

INSERT_ALL = {
    "topic.field": "topic_field!",
    "partition.field": "partition_field",
    "offset.field": "offset_field!",
    "timestamp.field": "timestamp_field?",
    "static.field": "instance_id",
    "static.value": "my-instance-id",
}


def test_insert_field_schemaless() -> None:
    out = smt_raw("InsertField$Value", INSERT_ALL).apply(rec({"magic": 42}, key="k"))
    assert out is not None
    assert out.value == {
        "magic": 42,
        "topic_field": "t",
        "partition_field": 0,
        "offset_field": 5,
        "timestamp_field": TS,
        "instance_id": "my-instance-id",
    }
    assert out.value_schema is None
    assert out.raw_value is None  # the converter's JSON text no longer matches the value
    assert out.key == "k"


def test_insert_field_with_schema() -> None:
    schema = record_schema({"name": "magic", "type": "long"})
    out = smt_raw("InsertField$Value", INSERT_ALL).apply(rec({"magic": 42}, schema))
    assert out is not None
    assert out.value_schema == record_schema(
        {"name": "magic", "type": "long"},
        {"name": "topic_field", "type": "string"},
        {"name": "partition_field", "type": ["null", "int"], "default": None},
        {"name": "offset_field", "type": "long"},
        {
            "name": "timestamp_field",
            "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
            "default": None,
        },
        {"name": "instance_id", "type": ["null", "string"], "default": None},
    )
    assert out.value == {
        "magic": 42,
        "topic_field": "t",
        "partition_field": 0,
        "offset_field": 5,
        "timestamp_field": TS_DATETIME,
        "instance_id": "my-instance-id",
    }


def test_insert_field_keeps_an_optional_struct_optional_and_a_missing_timestamp_null() -> None:
    schema = ["null", record_schema({"name": "magic", "type": "long"})]
    out = smt("InsertField$Value", timestamp_field="ts").apply(rec({"magic": 1}, schema, timestamp=None))
    assert out is not None
    assert out.value == {"magic": 1, "ts": None}
    assert out.value_schema == [
        "null",
        record_schema(
            {"name": "magic", "type": "long"},
            {
                "name": "ts",
                "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
                "default": None,
            },
        ),
    ]


def test_insert_field_schemaless_skips_a_missing_timestamp() -> None:
    out = smt("InsertField$Value", timestamp_field="ts").apply(rec({"a": 1}, timestamp=None))
    assert out is not None
    assert out.value == {"a": 1}


def test_insert_field_key_variant_leaves_the_value_alone() -> None:
    out = smt("InsertField$Key", topic_field="topic").apply(rec({"v": 1}, key={"id": 1}))
    assert out is not None
    assert out.key == {"id": 1, "topic": "t"}
    assert out.value == {"v": 1}
    assert out.raw_value == b"{}"


def test_insert_field_passes_tombstones() -> None:
    record = rec(None)
    assert smt("InsertField$Value", topic_field="topic").apply(record) is record


def test_insert_field_record_errors() -> None:
    record_error(smt("InsertField$Value", topic_field="topic"), rec(42))
    schema = record_schema({"name": "topic", "type": "string"})
    err = record_error(smt("InsertField$Value", topic_field="topic"), rec({"topic": "x"}, schema))
    assert "duplication" in str(err)
    required_ts = smt("InsertField$Value", timestamp_field="ts!")
    record_error(required_ts, rec({"topic": "x"}, schema, timestamp=None))


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({}, "transforms.t1.topic.field"),
        ({"static.field": "s"}, "transforms.t1.static.value"),
        ({"topic.field": "t", "topic.feild": "x"}, "transforms.t1.topic.feild"),
        (
            {"topic.field": "t", "replace.null.with.default": "maybe"},
            "transforms.t1.replace.null.with.default",
        ),
    ],
)
def test_insert_field_config_errors(settings: dict[str, str], key: str) -> None:
    assert config_error_key("InsertField$Value", settings) == key


# --- ReplaceField ----------------------------------------------------------------------------

REPLACE_VALUE = {"dont": "whatever", "abc": 42, "foo": True, "etc": "etc"}


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"exclude": "dont", "renames": "abc:xyz,foo:bar"}, {"xyz": 42, "bar": True, "etc": "etc"}),
        ({"include": "abc,foo"}, {"abc": 42, "foo": True}),
        ({"include": "abc,foo", "exclude": "foo"}, {"abc": 42}),
        ({"blacklist": "dont,etc"}, {"abc": 42, "foo": True}),
        ({"whitelist": "etc"}, {"etc": "etc"}),
        ({"exclude": "abc", "blacklist": "etc"}, {"dont": "whatever", "foo": True, "etc": "etc"}),
        ({"renames": ""}, REPLACE_VALUE),
    ],
)
def test_replace_field_schemaless(settings: dict[str, str], expected: dict[str, Any]) -> None:
    out = smt_raw("ReplaceField$Value", settings).apply(rec(dict(REPLACE_VALUE)))
    assert out is not None
    assert out.value == expected
    assert out.raw_value is None


def test_replace_field_with_schema() -> None:
    schema = record_schema(
        {"name": "dont", "type": "string"},
        {"name": "abc", "type": "int"},
        {"name": "foo", "type": "boolean"},
        {"name": "etc", "type": ["null", "string"], "default": None},
    )
    out = smt("ReplaceField$Value", include="abc,foo", renames="abc:xyz,foo:bar").apply(
        rec(dict(REPLACE_VALUE), schema)
    )
    assert out is not None
    assert out.value_schema == record_schema(
        {"name": "xyz", "type": "int"}, {"name": "bar", "type": "boolean"}
    )
    assert out.value == {"xyz": 42, "bar": True}


def test_replace_field_null_takes_the_field_default_unless_disabled() -> None:
    schema = record_schema({"name": "a", "type": ["string", "null"], "default": "dflt"})
    out = smt("ReplaceField$Value", renames="a:b").apply(rec({"a": None}, schema))
    assert out is not None
    assert out.value == {"b": "dflt"}
    off = smt_raw("ReplaceField$Value", {"renames": "a:b", "replace.null.with.default": "false"})
    out = off.apply(rec({"a": None}, schema))
    assert out is not None
    assert out.value == {"b": None}


def test_replace_field_key_and_errors() -> None:
    out = smt("ReplaceField$Key", exclude="b").apply(rec("v", key={"a": 1, "b": 2}))
    assert out is not None
    assert (out.key, out.value, out.raw_value) == ({"a": 1}, "v", b"{}")
    record_error(smt("ReplaceField$Value", exclude="b"), rec([1, 2]))
    schema = record_schema({"name": "a", "type": "int"}, {"name": "b", "type": "int"})
    record_error(smt("ReplaceField$Value", renames="a:b"), rec({"a": 1, "b": 2}, schema))


@pytest.mark.parametrize("renames", ["abc:xyz:z", "abc", "abc:"])
def test_replace_field_invalid_rename(renames: str) -> None:
    assert config_error_key("ReplaceField$Value", {"renames": renames}) == "transforms.t1.renames"


# --- MaskField -------------------------------------------------------------------------------


def test_mask_field_schemaless_zeroes() -> None:
    value = {
        "magic": 42,
        "bool": True,
        "int": 42,
        "double": 42.0,
        "string": "55.121.20.20",
        "bigdec": Decimal("42.0"),
        "date": TS_DATETIME,
        "list": [42],
        "map": {"key": "value"},
    }
    fields = ",".join(k for k in value if k != "magic") + ",absent"
    out = smt("MaskField$Value", fields=fields).apply(rec(value))
    assert out is not None
    assert out.value == {
        "magic": 42,
        "bool": False,
        "int": 0,
        "double": 0.0,
        "string": "",
        "bigdec": Decimal(0),
        "date": dt.datetime(1970, 1, 1, tzinfo=dt.UTC),
        "list": [],
        "map": {},
        "absent": None,
    }
    assert type(out.value["int"]) is int
    assert type(out.value["double"]) is float
    assert value["list"] == [42]  # the input is not modified


MASK_SCHEMA = record_schema(
    {"name": "magic", "type": "int"},
    {"name": "byte", "type": {"type": "int", "connect.type": "int8"}},
    {"name": "long", "type": "long"},
    {"name": "double", "type": "double"},
    {"name": "string", "type": "string"},
    {"name": "decimal", "type": {"type": "bytes", "logicalType": "decimal", "precision": 64, "scale": 1}},
    {"name": "withDefault", "type": ["string", "null"], "default": "default"},
)
MASK_VALUE = {
    "magic": 42,
    "byte": 42,
    "long": 42,
    "double": 42.0,
    "string": "hmm",
    "decimal": Decimal("42.0"),
    "withDefault": None,
}


def test_mask_field_with_schema_and_replacement() -> None:
    out = smt("MaskField$Value", fields="byte,long,double,string,decimal", replacement="123").apply(
        rec(dict(MASK_VALUE), MASK_SCHEMA)
    )
    assert out is not None
    assert out.value_schema is MASK_SCHEMA
    assert out.value == {
        "magic": 42,
        "byte": 123,
        "long": 123,
        "double": 123.0,
        "string": "123",
        "decimal": Decimal("123"),
        "withDefault": "default",
    }
    assert type(out.value["double"]) is float


def test_mask_field_null_with_default_is_masked_unless_disabled() -> None:
    out = smt("MaskField$Value", fields="withDefault").apply(rec(dict(MASK_VALUE), MASK_SCHEMA))
    assert out is not None
    assert out.value["withDefault"] == ""
    off = smt_raw("MaskField$Value", {"fields": "withDefault", "replace.null.with.default": "false"})
    out = off.apply(rec(dict(MASK_VALUE), MASK_SCHEMA))
    assert out is not None
    assert out.value["withDefault"] is None


@pytest.mark.parametrize(
    ("value", "replacement"),
    [
        ({"f": True}, "false"),
        ({"f": [1]}, "1"),
        ({"f": TS_DATETIME}, "1"),
        ({"f": 42}, "abc"),
        ({"f": b"x"}, None),
    ],
)
def test_mask_field_refuses(value: dict[str, Any], replacement: str | None) -> None:
    settings = {"fields": "f"} | ({"replacement": replacement} if replacement else {})
    record_error(smt_raw("MaskField$Value", settings), rec(value))


def test_mask_field_key_variant_and_config_errors() -> None:
    out = smt("MaskField$Key", fields="ssn").apply(rec({"x": 1}, key={"ssn": "123-45"}))
    assert out is not None
    assert (out.key, out.raw_value) == ({"ssn": ""}, b"{}")
    assert config_error_key("MaskField$Value", {}) == "transforms.t1.fields"
    assert (
        config_error_key("MaskField$Value", {"fields": "a", "replacement": ""}) == "transforms.t1.replacement"
    )


# --- ValueToKey ------------------------------------------------------------------------------


def test_value_to_key_schemaless() -> None:
    out = smt("ValueToKey", fields="a,b").apply(rec({"a": 1, "b": 2, "c": 3}, key="old"))
    assert out is not None
    assert (out.key, out.key_schema) == ({"a": 1, "b": 2}, None)
    assert out.value == {"a": 1, "b": 2, "c": 3}
    assert out.raw_value == b"{}"  # the value did not change


def test_value_to_key_with_schema() -> None:
    schema = record_schema(
        {"name": "a", "type": "int"}, {"name": "b", "type": "int"}, {"name": "c", "type": "int"}
    )
    out = smt("ValueToKey", fields="a,b").apply(rec({"a": 1, "b": 2, "c": 3}, schema))
    assert out is not None
    assert out.key == {"a": 1, "b": 2}
    assert out.key_schema == {
        **CONNECT_DEFAULT,
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "int"}],
    }
    assert out.value_schema is schema


def test_value_to_key_errors() -> None:
    schema = record_schema({"name": "a", "type": "int"})
    err = record_error(smt("ValueToKey", fields="a,d"), rec({"a": 1}, schema))
    assert "Field does not exist: d" in str(err)
    record_error(smt("ValueToKey", fields="a"), rec(None))
    assert config_error_key("ValueToKey", {"fields": ""}) == "transforms.t1.fields"


# --- ExtractField ----------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "expected"), [({"magic": 42}, 42), ({"other": 1}, None), (None, None)])
def test_extract_field_schemaless(value: Any, expected: Any) -> None:
    out = smt("ExtractField$Value", field="magic").apply(rec(value))
    assert out is not None
    assert (out.value, out.value_schema, out.raw_value) == (expected, None, None)


def test_extract_field_with_schema() -> None:
    schema = record_schema({"name": "magic", "type": "int"}, {"name": "s", "type": ["null", "string"]})
    out = smt("ExtractField$Value", field="magic").apply(rec({"magic": 42, "s": None}, schema))
    assert out is not None
    assert (out.value, out.value_schema) == (42, "int")
    out = smt("ExtractField$Value", field="s").apply(rec(None, ["null", schema]))
    assert out is not None
    assert (out.value, out.value_schema) == (None, ["null", "string"])


def test_extract_field_key_and_errors() -> None:
    out = smt("ExtractField$Key", field="id").apply(rec("v", key={"id": 7}))
    assert out is not None
    assert (out.key, out.value) == (7, "v")
    record_error(smt("ExtractField$Value", field="a"), rec(42))
    schema = record_schema({"name": "magic", "type": "int"})
    assert "Unknown field: nope" in str(
        record_error(smt("ExtractField$Value", field="nope"), rec({"magic": 1}, schema))
    )
    record_error(smt("ExtractField$Value", field="a"), rec(42, "int"))
    assert config_error_key("ExtractField$Value", {}) == "transforms.t1.field"
    v2 = {"field": "a.b", "field.syntax.version": "V2"}
    assert config_error_key("ExtractField$Value", v2) == "transforms.t1.field.syntax.version"


# --- HoistField ------------------------------------------------------------------------------


def test_hoist_field() -> None:
    out = smt("HoistField$Value", field="magic").apply(rec(42))
    assert out is not None
    assert (out.value, out.value_schema, out.raw_value) == ({"magic": 42}, None, None)
    out = smt("HoistField$Key", field="magic").apply(rec("v", key=42, key_schema="int"))
    assert out is not None
    assert out.key == {"magic": 42}
    assert out.key_schema == {**CONNECT_DEFAULT, "fields": [{"name": "magic", "type": "int"}]}
    optional = smt("HoistField$Value", field="m").apply(rec(None, ["null", "int"]))
    assert optional is not None
    assert optional.value == {"m": None}
    record_error(smt("HoistField$Value", field="m"), rec(None, "int"))


# --- Flatten ---------------------------------------------------------------------------------


def test_flatten_schemaless() -> None:
    value = {"A": {"B": {"int8": 8, "string": "s", "bytes": b"\x01"}, "arr": [{"x": 1}]}, "top": None}
    out = smt("Flatten$Value").apply(rec(value))
    assert out is not None
    assert out.value == {
        "A.B.int8": 8,
        "A.B.string": "s",
        "A.B.bytes": b"\x01",
        "A.arr": [{"x": 1}],
        "top": None,
    }
    out = smt("Flatten$Value", delimiter="#").apply(rec({"A": {"B": 1}}))
    assert out is not None
    assert out.value == {"A#B": 1}
    record_error(smt("Flatten$Value"), rec({"a": {"b": TS_DATETIME}}))


INNER = {
    "type": "record",
    "name": "Inner",
    "fields": [{"name": "x", "type": "int"}, {"name": "s", "type": "string"}],
}


def test_flatten_with_schema_optional_parent_makes_children_optional() -> None:
    schema = record_schema(
        {"name": "id", "type": "long"},
        {"name": "A", "type": ["null", INNER], "default": None},
        {"name": "B", "type": INNER},
        {"name": "arr", "type": {"type": "array", "items": "int"}},
    )
    value = {"id": 1, "A": None, "B": {"x": 2, "s": "b"}, "arr": [1]}
    out = smt("Flatten$Value", delimiter="_").apply(rec(value, schema))
    assert out is not None
    assert out.value_schema == record_schema(
        {"name": "id", "type": "long"},
        {"name": "A_x", "type": ["null", "int"], "default": None},
        {"name": "A_s", "type": ["null", "string"], "default": None},
        {"name": "B_x", "type": "int"},
        {"name": "B_s", "type": "string"},
        {"name": "arr", "type": {"type": "array", "items": "int"}},
    )
    assert out.value == {"id": 1, "A_x": None, "A_s": None, "B_x": 2, "B_s": "b", "arr": [1]}


def test_flatten_with_schema_takes_defaults_from_the_parent() -> None:
    schema = record_schema({"name": "A", "type": ["null", INNER], "default": None})
    parent_default = record_schema({"name": "A", "type": INNER, "default": {"x": 5, "s": "d"}})
    out = smt("Flatten$Value", delimiter="_").apply(rec({"A": {"x": 1, "s": "a"}}, parent_default))
    assert out is not None
    assert out.value_schema == record_schema(
        {"name": "A_x", "type": "int", "default": 5}, {"name": "A_s", "type": "string", "default": "d"}
    )
    assert out.value == {"A_x": 1, "A_s": "a"}
    out = smt("Flatten$Value", delimiter="_").apply(rec({"A": {"x": 1, "s": "a"}}, schema))
    assert out is not None
    assert out.value == {"A_x": 1, "A_s": "a"}


def test_flatten_refuses_maps_with_schema_and_passes_tombstones() -> None:
    schema = record_schema({"name": "m", "type": {"type": "map", "values": "int"}})
    record_error(smt("Flatten$Value"), rec({"m": {"a": 1}}, schema))
    record = rec(None, schema)
    assert smt("Flatten$Value").apply(record) is record


# --- Cast ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "value", "expected"),
    [
        ("int8", 42, 42),
        ("int8", 300, 44),  # Java's (byte) wraps
        ("int16", 70000, 4464),
        ("int32", 42.9, 42),
        ("int32", -42.9, -42),
        ("int32", 1e20, 2**31 - 1),  # (int) of a double saturates
        ("int64", True, 1),
        ("int8", "42", 42),
        ("float32", 1.1, 1.100000023841858),
        ("float64", "4.5", 4.5),
        ("float64", " 1e3 ", 1000.0),
        ("boolean", 0, False),
        ("boolean", 0.5, False),  # longValue() != 0
        ("boolean", 42, True),
        ("boolean", "TRUE", True),
        ("boolean", "yes", False),
        ("string", True, "true"),
        ("string", 42, "42"),
        ("string", 1.5, "1.5"),
        ("string", 1e10, "1.0E10"),
        ("string", b"\x01\x02", "AQI="),
    ],
)
def test_cast_whole_value_schemaless(spec: str, value: Any, expected: Any) -> None:
    out = smt("Cast$Value", spec=spec).apply(rec(value))
    assert out is not None
    assert out.value == expected
    assert type(out.value) is type(expected)
    assert out.value_schema is None


@pytest.mark.parametrize(
    ("spec", "value"),
    [
        ("int32", "abc"),
        ("int8", "300"),
        ("int32", "1.5"),
        ("int32", b"\x01"),
        ("int32", {"a": 1}),
        ("string", [1]),
    ],
)
def test_cast_refuses(spec: str, value: Any) -> None:
    record_error(smt("Cast$Value", spec=spec), rec(value))


def test_cast_fields_schemaless() -> None:
    value = {"int8": 8, "float32": 32.5, "boolean": True, "string": "42", "keep": "x"}
    out = smt("Cast$Value", spec="int8:int16, float32:float64,boolean:int8,string:int32,absent:int32").apply(
        rec(value)
    )
    assert out is not None
    assert out.value == {"int8": 8, "float32": 32.5, "boolean": 1, "string": 42, "keep": "x", "absent": None}
    assert out.raw_value is None


def test_cast_fields_with_schema() -> None:
    schema = record_schema(
        {"name": "a", "type": "long"},
        {"name": "b", "type": ["null", "string"], "default": None},
        {"name": "c", "type": "float"},
        {"name": "d", "type": ["string", "null"], "default": "-42"},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "keep", "type": "string"},
    )
    value = {"a": 300, "b": "7", "c": 1.100000023841858, "d": None, "ts": TS_DATETIME, "keep": "k"}
    out = smt("Cast$Value", spec="a:int8,b:int64,c:string,d:int32,ts:int64").apply(rec(value, schema))
    assert out is not None
    assert out.value_schema == record_schema(
        {"name": "a", "type": {"type": "int", "connect.type": "int8"}},
        {"name": "b", "type": ["null", "long"], "default": None},
        {"name": "c", "type": "string"},
        {"name": "d", "type": ["int", "null"], "default": -42},
        {"name": "ts", "type": "long"},
        {"name": "keep", "type": "string"},
    )
    assert out.value == {"a": 44, "b": 7, "c": "1.1", "d": -42, "ts": TS, "keep": "k"}


def test_cast_whole_value_with_schema_keeps_optionality() -> None:
    out = smt("Cast$Key", spec="int8").apply(rec("v", key=42, key_schema=["null", "long"]))
    assert out is not None
    assert (out.key, out.key_schema) == (42, ["null", {"type": "int", "connect.type": "int8"}])
    assert out.raw_value == b"{}"
    out = smt("Cast$Value", spec="string").apply(
        rec(TS_DATETIME, {"type": "long", "logicalType": "timestamp-millis"})
    )
    assert out is not None
    assert (out.value, out.value_schema) == ("2023-11-14T22:13:20.123Z", "string")
    out = smt("Cast$Value", spec="string").apply(
        rec(dt.date(2024, 2, 29), {"type": "int", "logicalType": "date"})
    )
    assert out is not None
    assert out.value == "2024-02-29"
    record_error(smt("Cast$Value", spec="int32"), rec({"a": 1}, record_schema({"name": "a", "type": "int"})))


def test_cast_passes_tombstones() -> None:
    record = rec(None)
    assert smt("Cast$Value", spec="int8").apply(record) is record


@pytest.mark.parametrize(
    "spec", ["", "foo:faketype", "foo:array", "array", "foo:bytes", "foo:int8:extra", "foo:int8,int32"]
)
def test_cast_config_errors(spec: str) -> None:
    assert config_error_key("Cast$Value", {"spec": spec}) == "transforms.t1.spec"


@pytest.mark.parametrize(
    ("number", "text"),
    [
        (1.0, "1.0"),
        (100.0, "100.0"),
        (1e7, "1.0E7"),
        (1.234e-5, "1.234E-5"),
        (0.001, "0.001"),
        (12345678.9, "1.23456789E7"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
    ],
)
def test_java_double_string(number: float, text: str) -> None:
    assert java_double_string(number) == text
