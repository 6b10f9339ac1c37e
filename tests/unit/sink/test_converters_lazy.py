"""Schemaless JSON is not parsed when nothing needs the value; config mistakes are ValueErrors."""

from __future__ import annotations

import pytest

from sink.records.converters import (
    AVRO_CONVERTER,
    JSON_CONVERTER,
    STRING_CONVERTER,
    ByteArrayConverter,
    ConversionError,
    JsonConverter,
    RecordConverter,
    StringConverter,
    build_converter,
    record_converter,
)
from tests.unit.sink.test_converters import Msg


class CountingJson(JsonConverter):
    """Counts parses, so the test sees that the lazy path really skips them."""

    def __init__(self) -> None:
        super().__init__(schemas_enable=False)
        self.parsed = 0

    def convert(self, topic, data):
        self.parsed += 1
        return super().convert(topic, data)


def test_unneeded_json_values_are_not_parsed_but_passed_through():
    value = CountingJson()
    conv = RecordConverter(StringConverter(), value, parse_value=lambda topic: topic != "orders")
    body = b'{"a": 1}'
    records, failures = conv.convert_batch([Msg(body, offset=i) for i in range(5)])
    assert failures == [] and value.parsed == 0
    assert [r.raw_value for r in records] == [body] * 5
    assert all(r.value_schema is None for r in records)


def test_a_line_break_forces_a_parse_so_the_json_format_can_re_encode():
    value = CountingJson()
    conv = RecordConverter(StringConverter(), value, parse_value=lambda topic: False)
    rec = conv.convert(Msg(b'{"a":\n 1}'))
    assert value.parsed == 1 and rec.value == {"a": 1} and rec.raw_value == b'{"a":\n 1}'


def test_values_are_parsed_when_the_plan_needs_them():
    value = CountingJson()
    conv = RecordConverter(StringConverter(), value, parse_value=lambda topic: True)
    assert conv.convert(Msg(b"[1]")).value == [1] and value.parsed == 1


def test_missing_registry_url_and_unknown_class_are_value_errors_not_key_errors():
    with pytest.raises(ValueError, match=r"value\.converter\.schema\.registry\.url is required"):
        build_converter(AVRO_CONVERTER, {}, "value.converter")
    with pytest.raises(ValueError, match=r"unsupported converter class 'x\.Y'"):
        build_converter("x.Y", {}, "key.converter")


def test_defaults_bytes_keys_schemaless_json_values_and_connect_default_schemas_true():
    conv = record_converter({})
    assert isinstance(conv.key, ByteArrayConverter) and conv.value.schemas_enable is False
    assert conv.convert(Msg(b"{}", key=b"\xff")).key == b"\xff"  # any key converts
    named = record_converter({"value.converter": JSON_CONVERTER})
    assert named.value.schemas_enable is True  # Connect's JsonConverter default
    with pytest.raises(ConversionError, match='requires "schema" and "payload"'):
        named.convert(Msg(b'{"plain": true}'))
    assert record_converter({"key.converter": STRING_CONVERTER}).convert(Msg(b"1", key=b"k")).key == "k"


def test_plan_decides_whether_values_are_parsed():
    import kcql
    from sink.records.converters import needs_parsed_value

    plans = kcql.parse(
        "INSERT INTO b:p SELECT * FROM raw STOREAS `JSON`;"
        "INSERT INTO b:p SELECT * FROM env STOREAS `JSON` PROPERTIES('store.envelope'=true);"
        "INSERT INTO b:p SELECT * FROM byval PARTITIONBY country STOREAS `JSON`;"
        "INSERT INTO b:p SELECT * FROM bykey PARTITIONBY _key STOREAS `JSON`;"
        "INSERT INTO b:p SELECT * FROM pq STOREAS `PARQUET`"
    )
    needs = needs_parsed_value(plans)
    assert [needs(t) for t in ("raw", "env", "byval", "bykey", "pq")] == [False, True, True, False, True]


@pytest.mark.parametrize("body", [b"{not json", b"plain text", b"\xff\xfe", b"42 trailing", b'"unterminated'])
def test_non_json_payloads_are_still_caught_on_the_lazy_path(body):
    conv = RecordConverter(StringConverter(), JsonConverter(False), parse_value=lambda topic: False)
    with pytest.raises(ConversionError, match="offset 7"):
        conv.convert(Msg(body))
