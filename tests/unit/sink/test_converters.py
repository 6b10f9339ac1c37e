"""Converters: each Connect converter class, JSON schemas → Avro, and the errors they name."""

from __future__ import annotations

import base64
import json
from datetime import UTC, date, datetime, time
from decimal import Decimal

import fastavro
import pytest

from sink.records.converters import (
    BYTES_CONVERTER,
    JSON_CONVERTER,
    STRING_CONVERTER,
    ConversionError,
    JsonConverter,
    RecordConverter,
    build_converter,
    connect_schema_to_avro,
    converter_problems,
)


class Msg:
    """The parts of confluent_kafka.Message the converter reads (a unit-test stand-in)."""

    def __init__(self, value, key=None, headers=None, offset=7, ts=(1, 1700000000000)):
        self._v, self._k, self._h, self._o, self._ts = value, key, headers, offset, ts

    def topic(self):
        return "orders"

    def partition(self):
        return 2

    def offset(self):
        return self._o

    def key(self):
        return self._k

    def value(self):
        return self._v

    def headers(self):
        return self._h

    def timestamp(self):
        return self._ts


def conv(value_class, **props):
    props = {"value.converter": value_class, **props}
    return RecordConverter(
        build_converter(STRING_CONVERTER, props, "key.converter"),
        build_converter(value_class, props, "value.converter"),
    )


def test_string_and_bytes_converters_keep_metadata_and_headers():
    rec = conv(STRING_CONVERTER).convert(
        Msg(b"h\xc3\xa9", key=b"k", headers=[("a", b"1"), ("b", b"\xff"), ("c", None)])
    )
    assert (rec.topic, rec.partition, rec.offset, rec.timestamp) == ("orders", 2, 7, 1700000000000)
    assert (rec.key, rec.value, rec.value_schema) == ("k", "hé", "string")
    assert rec.headers == (("a", "1"), ("b", b"\xff"), ("c", None))
    raw = conv(BYTES_CONVERTER).convert(Msg(b"\x00\x01"))
    assert raw.value == b"\x00\x01" and raw.value_schema == "bytes"


def test_no_timestamp_and_tombstone():
    rec = conv(STRING_CONVERTER).convert(Msg(None, ts=(0, -1)))
    assert rec.value is None and rec.timestamp is None and rec.raw_value is None


def test_schemaless_json_keeps_raw_text_for_pass_through():
    body = b'{"a": 1, "b": [1, 2]}'
    rec = conv(JSON_CONVERTER, **{"value.converter.schemas.enable": "false"}).convert(Msg(body))
    assert rec.value == {"a": 1, "b": [1, 2]} and rec.value_schema is None and rec.raw_value == body


def test_json_with_schema_becomes_avro_typed_values():
    schema = {
        "type": "struct",
        "name": "shop.Order",
        "optional": False,
        "fields": [
            {"field": "id", "type": "int64", "optional": False},
            {
                "field": "price",
                "type": "bytes",
                "optional": True,
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2"},
            },
            {
                "field": "at",
                "type": "int64",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Timestamp",
            },
            {
                "field": "day",
                "type": "int32",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Date",
            },
            {"field": "t", "type": "int32", "optional": False, "name": "org.apache.kafka.connect.data.Time"},
            {"field": "tags", "type": "array", "items": {"type": "string"}, "optional": True},
            {"field": "blob", "type": "bytes", "optional": True},
        ],
    }
    payload = {
        "id": 5,
        "price": base64.b64encode((12345).to_bytes(2, "big")).decode(),
        "at": 86400000,
        "day": 2,
        "t": 3600000,
        "tags": ["x"],
        "blob": base64.b64encode(b"\x01").decode(),
    }
    body = json.dumps({"schema": schema, "payload": payload}).encode()
    rec = conv(JSON_CONVERTER).convert(Msg(body))
    assert rec.value == {
        "id": 5,
        "price": Decimal("123.45"),
        "at": datetime(1970, 1, 2, tzinfo=UTC),
        "day": date(1970, 1, 3),
        "t": time(1),
        "tags": ["x"],
        "blob": b"\x01",
    }
    assert rec.raw_value is None  # the envelope is not the value: nothing to pass through
    avro = rec.value_schema
    assert avro["name"] == "Order" and avro["namespace"] == "shop"
    fastavro.parse_schema(avro)  # a valid Avro schema, checked by fastavro
    # and the converted values are exactly what that schema accepts
    assert fastavro.validation.validate(rec.value, avro)


def test_connect_schema_translation_names_unnamed_structs_and_maps():
    avro = connect_schema_to_avro(
        {
            "type": "struct",
            "fields": [
                {
                    "field": "inner",
                    "type": "struct",
                    "optional": True,
                    "fields": [{"field": "x", "type": "int8"}],
                },
                {"field": "m", "type": "map", "keys": {"type": "string"}, "values": {"type": "float64"}},
                {"field": "im", "type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}},
            ],
        }
    )
    assert avro["name"] == "ConnectDefault"
    assert avro["fields"][0]["type"][1]["name"] == "ConnectDefault2"
    assert avro["fields"][0]["default"] is None
    assert avro["fields"][1]["type"] == {"type": "map", "values": "double"}
    assert avro["fields"][2]["type"]["type"] == "array"
    fastavro.parse_schema(avro)


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "Expecting property name"),
        (b'{"a": 1}', 'requires "schema" and "payload"'),
    ],
)
def test_bad_json_names_the_record(body, why):
    with pytest.raises(ConversionError, match=why) as err:
        conv(JSON_CONVERTER).convert(Msg(body, offset=42))
    assert "topic 'orders' partition 2 offset 42" in str(err.value)


def test_batch_separates_failures_from_records():
    c = conv(JSON_CONVERTER, **{"value.converter.schemas.enable": "false"})
    records, failures = c.convert_batch([Msg(b"1", offset=0), Msg(b"{", offset=1), Msg(b"2", offset=2)])
    assert [r.offset for r in records] == [0, 2]
    assert [(m.offset(), type(e)) for m, e in failures] == [(1, ConversionError)]


def test_bytes_the_string_converter_cannot_decode_become_replacement_characters():
    """Kafka's StringDeserializer is ``new String(data, encoding)``, which replaces malformed
    input: Connect writes such a key or value with U+FFFD instead of failing the record."""
    rec = conv(STRING_CONVERTER).convert(Msg(b"ok \xff\xfe", key=b"k\xc3"))
    assert (rec.value, rec.key) == ("ok \ufffd\ufffd", "k\ufffd")
    latin = conv(STRING_CONVERTER, **{"value.converter.converter.encoding": "latin-1"})
    assert latin.convert(Msg(b"\xe9")).value == "\xe9"  # every byte is text in latin-1


def test_avro_wire_format_is_checked_before_any_registry_call():
    c = conv(
        "io.confluent.connect.avro.AvroConverter",
        **{"value.converter.schema.registry.url": "http://127.0.0.1:9"},
    )
    with pytest.raises(ConversionError, match="magic byte 0"):
        c.convert(Msg(b"\x01\x00\x00\x00\x01abc"))


def test_config_problems_are_listed_per_key():
    problems = converter_problems(
        {"key.converter": "com.example.Nope", "value.converter": "io.confluent.connect.avro.AvroConverter"},
        {"key.converter": STRING_CONVERTER, "value.converter": JSON_CONVERTER},
    )
    assert [p.key for p in problems] == ["key.converter", "value.converter"]
    assert "unsupported converter class 'com.example.Nope'" in problems[0].why
    assert "schema.registry.url is required" in problems[1].why


@pytest.mark.parametrize(
    "text",
    [
        b'{"a": 1, "b": [1.5, -0.0, 1e-7], "c": {"d": null, "e": true}}',
        b'{"big": 123456789012345678901234567890}',
        b'{"a": NaN, "b": Infinity}',  # json.loads reads these; msgspec refuses, so json.loads decides
        b'{"a": 1e400}',
        b'{"a": "\\ud800"}',
        b'{"a": 1, "a": 2}',
        '{"a": "\u00e9"}'.encode("utf-16"),
        b"\xef\xbb\xbf" + b'{"a": 1}',
        b"[1, 2]",
        b'"text"',
    ],
)
def test_schemaless_json_values_are_what_json_loads_gives(text: bytes) -> None:
    import math

    got, schema = JsonConverter(schemas_enable=False).convert("t", text)
    expected = json.loads(text)
    assert schema is None
    same = json.dumps(got, sort_keys=True) == json.dumps(expected, sort_keys=True)
    assert same or (isinstance(got, dict) and math.isnan(got["a"]) and math.isnan(expected["a"]))


def test_schemaless_json_refuses_what_json_loads_refuses() -> None:
    for text in (b"{", b'{"a": 1} x', b"\xff"):
        with pytest.raises(ValueError):
            json.loads(text)
        with pytest.raises(ValueError):
            JsonConverter(schemas_enable=False).convert("t", text)
