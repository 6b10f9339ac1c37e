"""Kafka Connect's JsonConverter (schemas.enable=true) as Kafka writes and reads it, to AVRO and PARQUET.

The corpus ``tests/data/connect_json/jsonconverter.json`` holds envelopes exactly as Kafka's
JsonConverter serialises them (see its ``about``); each is converted with our JsonConverter, checked
against the expected value and the Avro schema Confluent's AvroData gives it, written through the
AVRO and PARQUET formats and read back with fastavro and pyarrow. The quirk tests below cite the
Kafka source (``connect/json/.../JsonConverter.java``) or test (``JsonConverterTest.java``) each
behaviour comes from.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message

from formats import get_format
from formats.base import FormatSettings, StoreFormat
from sink.records.batch import RecordBatch
from sink.records.converters import (
    JSON_CONVERTER,
    ByteArrayConverter,
    ConversionError,
    Converter,
    JsonConverter,
    RecordConverter,
    build_converter,
    connect_schema_to_avro,
    converter_problems,
)

CORPUS = json.loads(
    (Path(__file__).parents[2] / "data" / "connect_json" / "jsonconverter.json").read_text("utf-8")
)
CASES = {case["name"]: case for case in CORPUS["cases"]}
TOPIC = "connect-json"


def convert(envelopes: list[bytes], value: Converter | None = None) -> list[Any]:
    conv = RecordConverter(ByteArrayConverter(), value or JsonConverter(True))
    return [
        conv.convert(Message(topic=TOPIC, partition=0, offset=i, value=env))
        for i, env in enumerate(envelopes)
    ]


def one(envelope: str | bytes, value: Converter | None = None) -> Any:
    data = envelope.encode() if isinstance(envelope, str) else envelope
    return convert([data], value)[0]


def f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def check(actual: Any, expected: Any, stage: str, where: str = "value") -> None:
    """``actual`` is the corpus' tagged ``expected`` at ``stage`` (record, avro or parquet):
    types too (bool is not int, a Decimal keeps its scale, timestamps are UTC)."""
    if isinstance(expected, dict) and len(expected) == 1 and next(iter(expected)).startswith("$"):
        tag, arg = next(iter(expected.items()))
        if tag == "$float32":
            wanted = float(arg) if stage == "record" else f32(arg)
            assert type(actual) is float and actual == wanted, f"{where}: {actual!r} != {wanted!r} ({stage})"
        elif tag == "$decimal":
            want = Decimal(arg)
            assert type(actual) is Decimal, f"{where}: {actual!r}"
            assert (actual, actual.as_tuple().exponent) == (want, want.as_tuple().exponent), (
                f"{where}: {actual!r}"
            )
        elif tag == "$date":
            assert type(actual) is date and actual == date.fromisoformat(arg), f"{where}: {actual!r}"
        elif tag == "$time":
            assert type(actual) is time and actual == time.fromisoformat(arg), f"{where}: {actual!r}"
        elif tag == "$timestamp":
            assert type(actual) is datetime and actual.utcoffset() == timedelta(0), f"{where}: {actual!r}"
            assert actual == datetime.fromisoformat(arg), f"{where}: {actual!r}"
        elif tag == "$base64":
            assert type(actual) is bytes and actual == base64.b64decode(arg), f"{where}: {actual!r}"
        elif tag == "$map":
            if stage == "parquet":  # pyarrow reads a map as (key, value) pairs
                assert isinstance(actual, list), f"{where}: {actual!r}"
                actual = dict(actual)
            check(actual, arg, stage, where)
        else:  # pragma: no cover - a corpus typo
            raise AssertionError(f"unknown tag {tag}")
    elif isinstance(expected, dict):
        assert isinstance(actual, dict) and list(actual) == list(expected), f"{where}: {actual!r}"
        for k, v in expected.items():
            check(actual[k], v, stage, f"{where}.{k}")
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), f"{where}: {actual!r}"
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            check(a, e, stage, f"{where}[{i}]")
    else:
        assert type(actual) is type(expected) and actual == expected, f"{where}: {actual!r} != {expected!r}"


# --------------------------------------------------------------------------- the corpus


def test_corpus_covers_every_jsonconverter_type_name_and_logical_type() -> None:
    names: set[str] = set()
    logical: set[str] = set()

    def walk(schema: Any) -> None:
        if isinstance(schema, dict):
            if isinstance(schema.get("type"), str):
                names.add(schema["type"])
            if isinstance(schema.get("name"), str) and schema["name"].startswith("org.apache.kafka"):
                logical.add(schema["name"].rsplit(".", 1)[1])
            for v in schema.values():
                walk(v)
        elif isinstance(schema, list):
            for v in schema:
                walk(v)

    for case in CORPUS["cases"]:
        for record in case["records"]:
            walk(json.loads(record["envelope"])["schema"])
    # JsonSchema.java's *_TYPE_NAME: FLOAT32 is "float", FLOAT64 is "double"
    assert names == {"boolean", "int8", "int16", "int32", "int64", "float", "double"} | {
        "bytes",
        "string",
        "array",
        "map",
        "struct",
    }
    assert logical == {"Decimal", "Date", "Time", "Timestamp"}


@pytest.mark.parametrize("name", list(CASES))
def test_corpus_envelope_converts_to_its_value_and_avro_schema(name: str) -> None:
    case = CASES[name]
    records = convert([r["envelope"].encode() for r in case["records"]])
    for record, want in zip(records, case["records"], strict=True):
        check(record.value, want["value"], "record")
        assert record.value_schema == case["avro"]
        assert record.raw_value is None
    if case["avro"] is not None:
        fastavro.parse_schema(case["avro"])  # fastavro takes the Avro schema as it is
    assert len({id(r.value_schema) for r in records}) == 1  # one cached schema object per schema


WRITTEN = [name for name, case in CASES.items() if case["write"]]


def _write(fmt: StoreFormat, path: Path, records: list[Any]) -> None:
    writer = get_format(FormatSettings(fmt)).open(path)
    assert writer.append(RecordBatch.of(records)) == len(records)
    writer.close()


@pytest.mark.parametrize("name", WRITTEN)
def test_corpus_written_as_avro_reads_back_with_fastavro(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    records = convert([r["envelope"].encode() for r in case["records"]])
    path = tmp_path / "part.avro"
    _write(StoreFormat.AVRO, path, records)
    with path.open("rb") as f:
        reader = fastavro.reader(f)
        rows = list(reader)
        if case["avro"] is not None:  # the file's schema is AvroData's, as the record carried it
            assert fastavro.parse_schema(reader.writer_schema) == fastavro.parse_schema(case["avro"])
    assert len(rows) == len(case["records"])
    for row, want in zip(rows, case["records"], strict=True):
        check(row, want["value"], "avro")


@pytest.mark.parametrize("name", WRITTEN)
def test_corpus_written_as_parquet_reads_back_with_pyarrow(name: str, tmp_path: Path) -> None:
    case = CASES[name]
    records = convert([r["envelope"].encode() for r in case["records"]])
    path = tmp_path / "part.parquet"
    _write(StoreFormat.PARQUET, path, records)
    rows = pq.read_table(path).to_pylist()
    assert len(rows) == len(case["records"])
    is_record = case["avro"] is None or (isinstance(case["avro"], dict) and case["avro"]["type"] == "record")
    for row, want in zip(rows, case["records"], strict=True):
        check(row if is_record else row["value"], want["value"], "parquet")


def test_struct_with_float_and_double_was_refused_before_and_is_typed_now(tmp_path: Path) -> None:
    """The issue's record: Connect names FLOAT64 "double" on the wire (JsonSchema.DOUBLE_TYPE_NAME)."""
    records = convert([r["envelope"].encode() for r in CASES["struct_float_double"]["records"]])
    _write(StoreFormat.PARQUET, tmp_path / "m.parquet", records)
    table = pq.read_table(tmp_path / "m.parquet")
    assert str(table.schema.field("ratio").type) == "float"
    assert str(table.schema.field("value").type) == "double"
    assert table.column("ratio").to_pylist() == [f32(12.34), f32(-0.5)]
    assert table.column("max_f").to_pylist() == [f32(3.4028235e38), f32(1.4e-45)]
    assert table.column("value").to_pylist() == [12.34, -1.0e-5]


def test_parquet_types_of_logical_types_and_maps(tmp_path: Path) -> None:
    records = convert([r["envelope"].encode() for r in CASES["struct_all_types"]["records"]])
    _write(StoreFormat.PARQUET, tmp_path / "a.parquet", records)
    schema = pq.read_schema(tmp_path / "a.parquet")
    types = {name: str(schema.field(name).type) for name in schema.names}
    assert types["price"] == "decimal256(64, 2)"  # AvroData: precision 64 unless connect.decimal.precision
    assert types["day"] == "date32[day]"
    assert types["at_time"] == "time32[ms]"
    assert types["at"] == "timestamp[ms, tz=UTC]"
    assert types["tiny"] == types["small"] == "int32"  # Avro int with connect.type int8/int16
    assert pa.types.is_map(schema.field("attrs").type)
    assert (schema.field("attrs").type.key_type, schema.field("attrs").type.item_type) == (
        pa.string(),
        pa.int32(),
    )
    assert types["by_id"] == "list<element: struct<key: int32 not null, value: string not null> not null>"


# --------------------------------------------------------------------------- JsonConverter's quirks


def test_optional_field_missing_from_the_payload_is_null() -> None:
    # JsonConverterTest.structWithOptionalFieldToConnect: value.get(field.name()) is null -> optional -> null
    rec = one(
        '{ "schema": { "type": "struct", "fields": [{ "field":"optional", "type": "string", '
        '"optional": true }, {  "field": "required", "type": "string" }] }, '
        '"payload": { "required": "required" } }'
    )
    assert rec.value == {"optional": None, "required": "required"}


def test_required_field_missing_without_default_is_an_error_naming_the_record_and_field() -> None:
    # JsonConverter.convertToConnect: "Invalid null value for required " + schemaType + " field"
    with pytest.raises(ConversionError) as err:
        one(
            '{"schema":{"type":"struct","fields":[{"type":"int64","optional":false,"field":"id"}]},"payload":{}}'
        )
    assert err.value.stage == "VALUE_CONVERTER"
    assert "topic 'connect-json' partition 0 offset 0" in str(err.value)
    assert "Invalid null value for required INT64 field (at payload.id)" in str(err.value)


def test_null_takes_the_default_even_for_a_required_schema() -> None:
    # JsonConverterTest.testConnectSchemaMetadataTranslation: {"type": "boolean", "default": true}
    # with a null payload is true
    rec = one('{ "schema": { "type": "boolean", "default": true }, "payload": null }')
    assert rec.value is True and rec.value_schema == {"type": "boolean", "connect.default": True}
    # and a missing field of a struct takes its default the same way (Struct.put of convertToConnect)
    rec = one(
        '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"default":7,"field":"n"}],'
        '"optional":false},"payload":{}}'
    )
    assert rec.value == {"n": 7}
    assert rec.value_schema["fields"][0] == {
        "name": "n",
        "type": {"type": "int", "connect.default": 7},
        "default": 7,
    }


def test_replace_null_with_default_false_keeps_the_null() -> None:
    # JsonConverterTest.deserializeFieldNullToNull / deserializeNullToNull (replace.null.with.default=false)
    props = {"value.converter": JSON_CONVERTER, "value.converter.replace.null.with.default": "false"}
    conv = build_converter(JSON_CONVERTER, props, "value.converter")
    body = CASES["field_optional_with_default"]["records"][1]["envelope"]
    assert one(body, conv).value == {"field1": None}
    top = CASES["optional_with_default"]["records"][1]["envelope"]
    assert one(top, conv).value is None
    assert one(top).value == "default"  # Connect's default: true


def test_defaults_are_read_with_their_schema() -> None:
    # JsonConverterTest.decimalToConnectWithDefaultValue: "default": "AJw=" is the Decimal 1.56
    rec = one(
        '{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, '
        '"default": "AJw=", "parameters": { "scale": "2" } }, "payload": null }'
    )
    assert rec.value == Decimal("1.56") and rec.value.as_tuple().exponent == -2
    # AvroData.defaultValueFromConnect: the unscaled bytes as an ISO-8859-1 string
    assert rec.value_schema["connect.default"] == "\x00\x9c"
    # JsonConverterTest.timestampToConnectOptionalWithDefaultValue
    rec = one(
        '{ "schema": { "type": "int64", "name": "org.apache.kafka.connect.data.Timestamp", "version": 1,'
        '  "optional": true, "default": 42 }, "payload": null }'
    )
    assert rec.value == datetime(1970, 1, 1, 0, 0, 0, 42000, tzinfo=rec.value.tzinfo)
    assert rec.value_schema == [
        {
            "type": "long",
            "connect.version": 1,
            "connect.default": 42,
            "connect.name": "org.apache.kafka.connect.data.Timestamp",
            "logicalType": "timestamp-millis",
        },
        "null",
    ]


def test_decimal_format_only_matters_for_writing() -> None:
    # JsonConverter's Decimal LogicalTypeConverter.toConnect takes a number or base64 text whatever
    # decimal.format says; the setting is only read in toJson.
    numeric = '{"schema":{"type":"bytes","optional":false,"name":"org.apache.kafka.connect.data.Decimal","version":1,"parameters":{"scale":"2"}},"payload":1.56}'  # noqa: E501
    text = numeric.replace("1.56", '"AJw="')
    for fmt in ("BASE64", "NUMERIC", "numeric"):
        props = {"value.converter": JSON_CONVERTER, "value.converter.decimal.format": fmt}
        assert converter_problems(props) == []
        conv = build_converter(JSON_CONVERTER, props, "value.converter")
        assert one(numeric, conv).value == one(text, conv).value == Decimal("1.56")


def test_numeric_decimals_are_exact_and_rescaled_only_without_loss() -> None:
    # JsonConverterTest.highPrecisionNumericDecimalToConnect: beyond a double's precision
    rec = one(
        '{ "schema": { "type": "bytes", "name": "org.apache.kafka.connect.data.Decimal", "version": 1, '
        '"parameters": { "scale": "17" } }, "payload": 1.23456789123456789 }'
    )
    assert str(rec.value) == "1.23456789123456789"
    schema = '{"schema":{"type":"bytes","name":"org.apache.kafka.connect.data.Decimal","parameters":{"scale":"2"}},"payload":%s}'  # noqa: E501
    assert str(one(schema % "3").value) == "3.00"  # a shorter scale gains zeros
    with pytest.raises(ConversionError, match="does not fit the schema's scale 2"):
        one(schema % "1.234")  # AvroData would refuse the scale mismatch too (Decimal.fromLogical)


def test_numbers_with_leading_zeros_are_read() -> None:
    # JsonConverterTest.numberWithLeadingZerosToConnect (JsonDeserializer: ALLOW_LEADING_ZEROS_FOR_NUMBERS)
    assert one('{ "schema": { "type": "int8" }, "payload": 0012 }').value == 12
    assert one('{ "schema": { "type": "int64" }, "payload": 00000123456789 }').value == 123456789
    assert one('{ "schema": { "type": "string" }, "payload": "0012" }').value == "0012"  # text untouched


def test_struct_payload_keeps_only_the_schema_fields_in_schema_order() -> None:
    # TO_CONNECT_CONVERTERS[STRUCT]: a new Struct filled from schema.fields()
    rec = one(
        '{"schema":{"type":"struct","fields":[{"type":"int32","field":"b"},{"type":"int32","field":"a"}]},'
        '"payload":{"a":1,"extra":true,"b":2}}'
    )
    assert list(rec.value.items()) == [("b", 2), ("a", 1)]


def test_map_with_non_string_keys_and_a_key_given_twice_keeps_the_last_value() -> None:
    # TO_CONNECT_CONVERTERS[MAP]: result.put(key, value) into a HashMap
    rec = one(
        '{ "schema": { "type": "map", "keys": { "type" : "int32" }, "values": { "type" : "int32" } },'
        ' "payload": [ [1, 12], [2, 15], [1, 13] ] }'
    )
    assert rec.value == [{"key": 1, "value": 13}, {"key": 2, "value": 15}]


def test_optional_string_keys_are_still_a_json_object_but_avro_map_entries() -> None:
    # JsonConverter: keySchema.type() == STRING -> JSON object; AvroData (allow.optional.map.keys=false):
    # only a required string key makes an Avro map.
    rec = one(
        '{"schema":{"type":"map","keys":{"type":"string","optional":true},"values":{"type":"int32"}},'
        '"payload":{"a":1}}'
    )
    assert rec.value == [{"key": "a", "value": 1}]
    assert rec.value_schema["type"] == "array"
    assert rec.value_schema["items"]["fields"][0] == {
        "name": "key",
        "type": ["null", "string"],
        "default": None,
    }


def test_null_payloads() -> None:
    # JsonConverterTest.nullSchemaPrimitiveToConnect: {"schema": null, "payload": null} is a null value
    rec = one('{ "schema": null, "payload": null }')
    assert rec.value is None and rec.value_schema is None
    # an optional schema with a null payload: null, with the schema
    rec = one(CASES["optional_null_payload"]["records"][0]["envelope"])
    assert rec.value is None and rec.value_schema == ["null", "boolean"]
    # a tombstone (no bytes at all): JsonConverterTest.nullToConnect
    assert convert([None])[0].value is None  # type: ignore[list-item]
    # a required schema with a null payload and no default: convertToConnect refuses it
    with pytest.raises(ConversionError, match="Invalid null value for required INT32 field"):
        one('{"schema":{"type":"int32","optional":false},"payload":null}')


def test_schemaless_payload_inside_the_envelope_is_plain_json() -> None:
    # JsonConverterTest.nullSchemaPrimitiveToConnect: numbers as int64/float64, objects as maps
    rec = one(env(None, {"field1": 1, "field2": 2.5, "d": DECIMAL}))
    assert rec.value == {"field1": 1, "field2": 2.5, "d": DECIMAL}  # (a Decimal name parses exactly)
    assert type(rec.value["field2"]) is float


def test_jackson_non_finite_doubles_are_read() -> None:
    # Jackson writes NaN and the infinities as strings (QUOTE_NON_NUMERIC_NUMBERS)
    rec = one(
        '{"schema":{"type":"array","items":{"type":"double"}},"payload":["NaN","Infinity","-Infinity",1]}'
    )
    assert math.isnan(rec.value[0]) and rec.value[1:] == [math.inf, -math.inf, 1.0]
    assert type(rec.value[3]) is float


def test_float32_schema_names_of_connect_still_accepted() -> None:
    # Not JsonConverter's names ("Unknown schema type: float32" there), accepted by this sink before
    rec = one('{"schema":{"type":"float64"},"payload":1.5}')
    assert rec.value == 1.5 and rec.value_schema == "double"


def test_a_schema_seen_before_only_has_its_payload_parsed_with_the_same_results() -> None:
    conv = JsonConverter(True)
    first = CASES["debezium_change_events"]["records"][0]["envelope"]
    rec = one(first, conv)
    schema_text = first[len('{"schema":') : first.index(',"payload":')]
    assert list(conv._envelopes._texts) == [schema_text]  # remembered as it came
    for record in CASES["debezium_change_events"]["records"]:
        again = one(record["envelope"], conv)
        check(again.value, record["value"], "record")
        assert again.value_schema is rec.value_schema
    # payload first, spaces, pretty-printed: the full parse, the same value
    payload_text = first[first.index(',"payload":') + len(',"payload":') : -1]
    reordered = '{"payload": ' + payload_text + ',\n "schema": ' + schema_text + "}"
    assert one(reordered, conv).value == rec.value
    # a key after the payload, an error in the payload, leading zeros: as without the fast path
    with pytest.raises(ConversionError, match="may not contain additional fields"):
        one(first[:-1] + ',"extra":1}', conv)
    broken = first.replace('"id":101', '"id":"101"')
    with pytest.raises(
        ConversionError, match=r"INT32: expected an integer but was STRING '101' \(at payload.after.id\)"
    ):
        one(broken, conv)
    assert one(first.replace('"id":101', '"id":0101'), conv).value["after"]["id"] == 101
    # the same schema text with another key later on is a new schema (Jackson: the last key wins)
    assert one(first[:-1] + ',"schema":null}', conv).value_schema is None


# --------------------------------------------------------------------------- AvroData's translation


def test_avro_metadata_follows_avrodata() -> None:
    avro: Any = connect_schema_to_avro(
        {
            "type": "struct",
            "optional": False,
            "name": "shop.Order",
            "version": 4,
            "doc": "an order",
            "parameters": {
                "io.confluent.connect.avro.record.doc": "record doc",
                "io.confluent.connect.avro.field.doc.id": "the id",
                "avro.java.string": "String",
            },
            "fields": [{"field": "id", "type": "int64", "optional": False, "doc": "the id's schema"}],
        }
    )
    assert avro == {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "doc": "record doc",  # AvroData: the record doc comes from this parameter, not from "doc"
        # a field's doc is the field parameter's; its schema's doc is connect.doc on its type
        "fields": [
            {"name": "id", "type": {"type": "long", "connect.doc": "the id's schema"}, "doc": "the id"}
        ],
        "connect.doc": "an order",
        "connect.version": 4,
        "connect.parameters": {
            "io.confluent.connect.avro.record.doc": "record doc",
            "io.confluent.connect.avro.field.doc.id": "the id",
            "avro.java.string": "String",
        },
        "connect.name": "shop.Order",
        "avro.java.string": "String",  # parameters starting with "avro" become properties
    }
    fastavro.parse_schema(avro)


def test_equal_schemas_are_defined_once_and_referenced() -> None:
    # AvroData's schemaMap: an equal (non-optional) schema is the same Avro schema; Avro writes it
    # again as its name. Unnamed structs take ConnectDefault, ConnectDefault2, ... outside in.
    inner = {"type": "struct", "fields": [{"field": "x", "type": "int32"}]}
    avro: Any = connect_schema_to_avro(
        {
            "type": "struct",
            "fields": [
                {**inner, "field": "a"},
                {**inner, "optional": True, "field": "b"},
                {"type": "array", "items": inner, "field": "c"},
                {"type": "struct", "fields": [{"field": "y", "type": "string"}], "field": "d"},
            ],
        }
    )
    ns = "io.confluent.connect.avro"
    assert avro["name"] == "ConnectDefault"
    assert avro["fields"][0]["type"]["name"] == "ConnectDefault2"
    assert avro["fields"][1]["type"] == ["null", f"{ns}.ConnectDefault2"]
    assert avro["fields"][2]["type"] == {"type": "array", "items": f"{ns}.ConnectDefault2"}
    assert avro["fields"][3]["type"]["name"] == "ConnectDefault3"
    parsed = fastavro.parse_schema(avro)
    assert fastavro.validation.validate({"a": {"x": 1}, "b": None, "c": [], "d": {"y": "z"}}, parsed)


@pytest.mark.parametrize("fmt", [StoreFormat.AVRO, StoreFormat.PARQUET])
def test_two_different_map_entry_records_get_numbered_names(fmt: StoreFormat, tmp_path: Path) -> None:
    # AvroData names every unnamed non-string-keyed map's entry io.confluent.connect.avro.MapEntry;
    # two different ones cannot be in one Avro schema (Avro's Schema.toString: "Can't redefine"),
    # so the second is MapEntry2 here; an equal one is still a reference.
    int_map = {"type": "map", "keys": {"type": "int32"}, "values": {"type": "int32"}}
    str_map = {"type": "map", "keys": {"type": "int32"}, "values": {"type": "string"}}
    fields = [{**int_map, "field": "a"}, {**str_map, "field": "b"}, {**str_map, "field": "c"}]
    body = env({"type": "struct", "fields": fields}, {"a": [[1, 2]], "b": [[1, "x"]], "c": []})
    records = convert([body])
    avro = records[0].value_schema
    assert avro["fields"][1]["type"]["items"]["name"] == "MapEntry2"
    assert avro["fields"][2]["type"]["items"] == "io.confluent.connect.avro.MapEntry2"
    path = tmp_path / f"m.{fmt.value.lower()}"
    _write(fmt, path, records)
    if fmt is StoreFormat.AVRO:
        with path.open("rb") as f:
            rows = list(fastavro.reader(f))
    else:
        rows = pq.read_table(path).to_pylist()
    assert rows == [{"a": [{"key": 1, "value": 2}], "b": [{"key": 1, "value": "x"}], "c": []}]


def test_fixed_bytes_and_union_structs_follow_avrodata() -> None:
    fixed: Any = connect_schema_to_avro(
        {"type": "bytes", "name": "com.example.Hash", "parameters": {"connect.fixed.size": "4"}}
    )
    assert fixed == {
        "type": "fixed",
        "name": "Hash",
        "namespace": "com.example",
        "size": 4,
        "connect.parameters": {"connect.fixed.size": "4"},
        "connect.name": "com.example.Hash",
    }
    union = {
        "type": "struct",
        "name": "io.confluent.connect.avro.Union",
        "optional": True,
        "fields": [
            {"field": "int", "type": "int32", "optional": True},
            {"field": "string", "type": "string", "optional": True},
        ],
    }
    assert connect_schema_to_avro(union) == ["null", "int", "string"]
    rec = one(json.dumps({"schema": union, "payload": {"int": None, "string": "x"}}))
    assert rec.value == "x"
    with pytest.raises(ConversionError, match="Invalid bytes field: 3 bytes for a fixed size of 4"):
        one(json.dumps({"schema": {"type": "bytes", "name": "h", "parameters": {"connect.fixed.size": "4"}},
                        "payload": base64.b64encode(b"abc").decode()}))  # fmt: skip


def test_optional_struct_with_a_default_keeps_null_first_and_drops_the_invalid_default() -> None:
    # AvroData: an optional STRUCT is ["null", record] whatever its default; Avro then refuses the
    # record default for that union and AvroData drops it ("Ignoring invalid default").
    avro: Any = connect_schema_to_avro(
        {
            "type": "struct",
            "fields": [
                {
                    "type": "struct",
                    "fields": [{"type": "int32", "field": "x"}],
                    "optional": True,
                    "default": {"x": 1},
                    "field": "s",
                }
            ],
        }
    )
    field = avro["fields"][0]
    assert field["type"][0] == "null" and "default" not in field
    assert field["type"][1]["connect.default"] == {"x": 1}
    fastavro.parse_schema(avro)


# --------------------------------------------------------------------------- invalid envelopes


DECIMAL = "org.apache.kafka.connect.data.Decimal"
SCALE2 = {"type": "bytes", "name": DECIMAL, "parameters": {"scale": "2"}}
BYTE_MAP = {"type": "map", "keys": {"type": "int8"}, "values": {"type": "int8"}}


def env(schema: Any, payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}).encode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"{not json", "Expecting property name"),
        (b'{"payload": 1}', 'requires "schema" and "payload"'),
        (b'{"schema": null, "payload": 1, "extra": 0}', "may not contain additional fields"),
        (b"[1, 2]", 'requires "schema" and "payload"'),
        (env({"optional": True}, 1), "Schema must contain 'type' field (at schema)"),
        (env({"type": "decimal"}, 1), "Unknown schema type: decimal (at schema)"),
        (env({"type": "struct", "fields": [{"field": "a", "type": "floaty"}]}, {}), "floaty (at schema.a)"),
        (env({"type": "array"}, []), "Array schema did not specify the element type"),
        (env({"type": "map", "values": {"type": "int32"}}, {}), "Map schema did not specify the key type"),
        (env({"type": "struct", "fields": {}}, {}), 'Struct schema\'s "fields" argument is not an array.'),
        (env({"type": "struct", "fields": [{"type": "int8"}]}, {}), "field name not specified properly"),
        (
            env(
                {
                    "type": "struct",
                    "fields": [{"field": "a", "type": "int8"}, {"field": "a", "type": "int8"}],
                },
                {},
            ),
            "Cannot create field because of field name duplication a",
        ),
        (env({"type": "int8", "parameters": {"a": 1}}, 1), "Schema parameters must have string values."),
        (
            env({"type": "bytes", "name": DECIMAL}, "AA=="),
            "Invalid Decimal schema: scale parameter not found.",
        ),
        (
            env({"type": "string", "name": "org.apache.kafka.connect.data.Date"}, 1),
            "org.apache.kafka.connect.data.Date must be a int32 schema, not string",
        ),
        (
            env({"type": "int32", "default": "x"}, 1),
            "expected an integer but was STRING 'x' (at schema[default])",
        ),
        (env({"type": "int32"}, "12"), "Invalid value for INT32: expected an integer but was STRING '12'"),
        (env({"type": "int8"}, 300), "Invalid value for INT8: 300 is out of range"),
        (env({"type": "int32"}, 1.5), "Invalid value for INT32: expected an integer but was NUMBER 1.5"),
        (env({"type": "double"}, "1.5"), "Invalid value for FLOAT64: expected a number but was STRING"),
        (env({"type": "boolean"}, 1), "Invalid value for BOOLEAN: expected true or false but was NUMBER 1"),
        (env({"type": "string"}, 5), "Invalid value for STRING: expected a string but was NUMBER 5"),
        (env({"type": "bytes"}, "not base64!"), "Invalid bytes field"),
        (
            env({"type": "array", "items": {"type": "int8"}}, {"a": 1}),
            "Arrays should be encoded as JSON arrays",
        ),
        (
            env({"type": "map", "keys": {"type": "string"}, "values": {"type": "int8"}}, [[1, 2]]),
            "Maps with string fields should be encoded as JSON objects, but found ARRAY",
        ),
        (
            env(BYTE_MAP, {"1": 2}),
            "Maps with non-string fields should be encoded as JSON array of tuples, but found OBJECT",
        ),
        (env(BYTE_MAP, [[1]]), "Found invalid map entry, expected length 2 but found :1 (at payload[0])"),
        (env(BYTE_MAP, [3]), "Found invalid map entry instead of array tuple: NUMBER (at payload[0])"),
        (
            env({"type": "struct", "fields": []}, "x"),
            "Structs should be encoded as JSON objects, but found STRING",
        ),
        (
            env(SCALE2, True),
            "Invalid type for Decimal, underlying representation should be numeric or bytes but was BOOLEAN",
        ),
        (env(SCALE2, ""), "Invalid bytes for Decimal field"),
        (
            env({"type": "int32", "name": "org.apache.kafka.connect.data.Date"}, "2024-01-01"),
            "Invalid type for Date, underlying representation should be integer but was STRING",
        ),
        (
            env({"type": "int32", "name": "org.apache.kafka.connect.data.Time"}, -1),
            "Time values must use number of milliseconds greater than 0 and less than 86400000",
        ),
        (
            env({"type": "int64", "name": "org.apache.kafka.connect.data.Timestamp"}, 1.5),
            "Invalid type for Timestamp, underlying representation should be integral but was NUMBER",
        ),
        (
            env(
                {
                    "type": "struct",
                    "fields": [
                        {
                            "field": "a",
                            "type": "array",
                            "items": {"type": "struct", "fields": [{"field": "b", "type": "float"}]},
                        }
                    ],
                },
                {"a": [{"b": 1}, {}]},
            ),
            "Invalid null value for required FLOAT32 field (at payload.a[1].b)",
        ),
    ],
)
def test_invalid_envelopes_name_the_record_and_the_place(body: bytes, why: str) -> None:
    conv = RecordConverter(ByteArrayConverter(), JsonConverter(True))
    with pytest.raises(ConversionError) as err:
        conv.convert(Message(topic=TOPIC, partition=3, offset=42, value=body))
    assert why in str(err.value)
    assert err.value.stage == "VALUE_CONVERTER" and err.value.offset == 42
    where = f"cannot convert the record value at topic {TOPIC!r} partition 3 offset 42: "
    assert str(err.value).startswith(where)


def test_converter_settings_are_checked_as_connect_does() -> None:
    problems = converter_problems(
        {
            "value.converter": JSON_CONVERTER,
            "value.converter.decimal.format": "TEXT",
            "value.converter.replace.null.with.default": "maybe",
        }
    )
    assert [(p.key, p.why) for p in problems] == [
        ("value.converter.replace.null.with.default", "must be true or false"),
        ("value.converter.decimal.format", "must be BASE64 or NUMERIC"),
    ]
