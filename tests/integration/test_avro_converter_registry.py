"""The AvroConverter decodes Confluent-serialized records with schemas fetched from a real registry."""

from __future__ import annotations

from decimal import Decimal

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sink.records.converters import (
    AVRO_CONVERTER,
    STRING_CONVERTER,
    ConversionError,
    RecordConverter,
    build_converter,
)
from tests.unit.sink.test_converters import Msg

SCHEMA = """{"type": "record", "name": "order", "namespace": "shop", "fields": [
  {"name": "id", "type": "int"},
  {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
  {"name": "note", "type": ["null", "string"], "default": null}]}"""


def make(url):
    props = {"value.converter.schema.registry.url": url}
    return RecordConverter(
        build_converter(STRING_CONVERTER, props, "key.converter"),
        build_converter(AVRO_CONVERTER, props, "value.converter"),
    )


def test_avro_values_and_writer_schema(schema_registry_url, schema_registry):
    client = SchemaRegistryClient({"url": schema_registry_url})
    data = AvroSerializer(client, SCHEMA)(
        {"id": 1, "amount": Decimal("9.50"), "note": "ü"}, SerializationContext("orders", MessageField.VALUE)
    )
    converter = make(schema_registry_url)
    rec = converter.convert(Msg(data))
    assert rec.value == {"id": 1, "amount": Decimal("9.50"), "note": "ü"}
    assert (
        rec.value_schema["name"] == "order"
        and rec.value_schema["fields"][1]["type"]["logicalType"] == "decimal"
    )
    before = len(schema_registry.state.requests)
    converter.convert(Msg(data, offset=8))
    assert len(schema_registry.state.requests) == before  # cached: no second lookup


def test_unknown_schema_id_and_registry_down(schema_registry_url, schema_registry):
    converter = make(schema_registry_url)
    with pytest.raises(ConversionError, match="schema id 999") as err:
        converter.convert(Msg(b"\x00\x00\x00\x03\xe7\x02"))
    assert not err.value.is_retriable
    schema_registry.down = True
    with pytest.raises(ConversionError, match="registry is down") as err:
        make(schema_registry_url).convert(Msg(b"\x00\x00\x00\x00\x01\x02"))
    assert err.value.is_retriable
