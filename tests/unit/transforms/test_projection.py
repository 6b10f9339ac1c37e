"""The KCQL projection on single records: names, paths, wildcards, metadata, IGNORE, schemas, errors.

Expected values and Avro schemas are written out by hand from the rules in README's *Projection*.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import fastavro
import pytest

import kcql
from kcql.errors import ConfigError, RecordError
from sink.records.record import SinkRecord
from sink.transforms.projection import Projection, compile_projection

ADDRESS = {"type": "record", "name": "Address", "fields": [
    {"name": "city", "type": "string"}, {"name": "zip", "type": ["null", "string"], "default": None}]}
PERSON = {"type": "record", "name": "Person", "namespace": "crm", "fields": [
    {"name": "id", "type": "long"}, {"name": "name", "type": "string"},
    {"name": "address", "type": ["null", ADDRESS], "default": None}, {"name": "pin", "type": "int"}]}


def projection(select: str, tail: str = "") -> Projection:
    found = compile_projection(kcql.parse_one(f"INSERT INTO b SELECT {select} FROM t {tail}"))  # noqa: S608
    assert found is not None
    return found


def rec(value: Any, schema: Any = None, **kw: Any) -> SinkRecord:
    return SinkRecord(topic="t", partition=2, offset=9, timestamp=1_700_000_000_000, value=value,
                      value_schema=schema, **kw)


def test_plain_select_star_and_disabled_projection_are_no_projection() -> None:
    assert compile_projection(kcql.parse_one("INSERT INTO b SELECT * FROM t")) is None
    off = "INSERT INTO b SELECT id FROM t PROPERTIES('projection.enabled'=false)"
    assert compile_projection(kcql.parse_one(off)) is None


def test_schemaless_names_paths_metadata_key_and_header() -> None:
    p = projection("id, address.city AS town, address.zip, _key, _header.h, _.topic, _.partition, _.offset")
    out = p.apply(rec({"id": 1, "address": {"city": "Lyon"}}, key="k1", headers=(("h", "a"), ("h", "b"))))
    assert out.value == {"id": 1, "town": "Lyon", "zip": None, "key": "k1", "h": "b", "topic": "t",
                         "partition": 2, "offset": 9}
    assert out.value_schema is None and out.raw_value is None and out.offset == 9


def test_wildcards_expand_in_place_and_a_collision_is_a_record_error() -> None:
    p = projection("address.*, id")
    assert p.apply(rec({"id": 1, "address": {"city": "Lyon", "zip": "69"}})).value == {
        "city": "Lyon", "zip": "69", "id": 1}
    clash = projection("address.*, name AS city")
    with pytest.raises(RecordError, match="two SELECT entries give the field 'city'") as caught:
        clash.apply(rec({"name": "n", "address": {"city": "Lyon"}}))
    assert caught.value.stage == "TRANSFORMATION" and caught.value.offset == 9


def test_with_a_schema_the_written_schema_is_exactly_the_projection() -> None:
    p = projection("id, address.city AS town, _.timestamp AS ts", "IGNORE pin")
    value = {"id": 1, "name": "n", "address": {"city": "Lyon", "zip": None}, "pin": 1234}
    out = p.apply(rec(value, PERSON))
    assert out.value == {"id": 1, "town": "Lyon",
                         "ts": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC)}
    assert out.value_schema == {"type": "record", "name": "Person", "fields": [
        {"name": "id", "type": "long"},
        {"name": "town", "type": "string"},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
         "default": None},
    ]}
    fastavro.parse_schema(out.value_schema)  # a valid Avro schema
    # one schema object per source schema: formats compare nothing per record
    assert p.apply(rec(value, PERSON)).value_schema is out.value_schema


def test_ignore_removes_nested_fields_from_value_and_schema() -> None:
    p = projection("*", "IGNORE pin, address.zip")
    value = {"id": 1, "name": "n", "address": {"city": "Lyon", "zip": "69"}, "pin": 1}
    out = p.apply(rec(value, PERSON))
    assert out.value == {"id": 1, "name": "n", "address": {"city": "Lyon"}}
    address = out.value_schema["fields"][2]
    assert address["name"] == "address"
    assert address["type"] == ["null", {"type": "record", "name": "Address",
                                        "fields": [{"name": "city", "type": "string"}]}]


@pytest.mark.parametrize(
    ("select", "value", "says"),
    [
        ("nope", {"id": 1}, "field 'nope' is not in the schema"),
        ("id.x", {"id": 1}, "id is not a struct in its schema"),
        ("pin.*", {"pin": 1}, r"pin\.\* selects the fields of a int, not of a struct"),
        ("pin.*", None, r"pin\.\* selects the fields of what its schema says is not a struct"),
    ],
)
def test_paths_the_schema_does_not_have_are_record_errors(select: str, value: Any, says: str) -> None:
    with pytest.raises(RecordError, match=says):
        projection(select).apply(rec(value, PERSON))


def test_schemaless_path_through_a_non_struct_is_a_record_error() -> None:
    with pytest.raises(RecordError, match="name is a str, not a struct"):
        projection("name.first").apply(rec({"name": "x"}))


def test_config_errors_name_the_statement() -> None:
    with pytest.raises(ConfigError, match="two SELECT entries give the field 'a'"):
        projection("a, b AS a")
    with pytest.raises(ConfigError, match=r"IGNORE '_key\.x'"):
        projection("*", "IGNORE _key.x")


def test_the_plain_fast_path_gives_what_the_general_walk_gives() -> None:
    p = projection("id, amount AS total, missing, name")
    values = [{"id": 1, "amount": 2.5, "name": "n"}, {"id": 2}, {}, {"id": None, "name": {"a": 1}}]
    for value in values:
        record = rec(value, key="k", headers=(("h", "v"),))
        fast, general = p.apply(record), p._apply(record)
        assert fast == general and list(fast.value) == ["id", "total", "missing", "name"]
    with pytest.raises(RecordError):  # not a struct: the general walk says why
        p.apply(rec("text"))


def test_validate_reports_what_the_task_would_refuse_at_start() -> None:
    from sink.config.validate import validate

    props = {
        "name": "c",
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": "t",
        "connect.s3.kcql": "INSERT INTO b:p SELECT a, b AS a FROM t",
        "connect.storage": "local",
        "connect.local.root": "/tmp/x",
    }
    problems = validate(props)
    assert [p.key for p in problems] == ["connect.s3.kcql"]
    assert "two SELECT entries give the field 'a'" in problems[0].why
    assert validate({**props, "connect.s3.kcql": "INSERT INTO b:p SELECT a, b FROM t"}) == []
