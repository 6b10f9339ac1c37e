"""The Avro converters fetch the subscribed topics' latest schemas before the first batch.

Against the project's HTTP registry (tests/fixtures/schema_registry.py): after the warm-up the
first batch of that schema id makes no registry request; a missing subject or a registry that
answers 500 leaves the first batch to fetch as before, without an error.
"""

from __future__ import annotations

import io
import json
from typing import Any

import fastavro

from sink.records.converters import AvroConverter, record_converter
from sink.records.intake import BatchBuilder
from tests.fixtures.schema_registry import SchemaRegistry

SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [{"name": "id", "type": "long"}, {"name": "country", "type": "string"}],
}


def _register(registry: SchemaRegistry, subject: str, schema: dict[str, Any]) -> int:
    return registry.state.register(subject, {"schema": json.dumps(schema)})


def _wire(schema_id: int, value: dict[str, Any]) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(SCHEMA), value)
    return b"\0" + schema_id.to_bytes(4, "big") + body.getvalue()


def test_warm_up_prepares_the_latest_schema_so_the_first_record_asks_nothing(
    schema_registry: SchemaRegistry, schema_registry_url: str
) -> None:
    schema_id = _register(schema_registry, "warm-orders-value", SCHEMA)
    converter = AvroConverter(schema_registry_url)

    assert converter.warm_up(["warm-orders-value", "warm-nothing-value"]) == 1

    asked = len(schema_registry.state.requests)
    value, writer = converter.convert("warm-orders", _wire(schema_id, {"id": 7, "country": "NO"}))
    assert value == {"id": 7, "country": "NO"}
    assert writer == SCHEMA
    columns = converter.columns(schema_id)
    assert columns is not None and [name for name, _kind, _null in columns[1]] == ["id", "country"]
    assert len(schema_registry.state.requests) == asked  # nothing fetched for the first record


def test_warm_up_of_a_registry_that_fails_is_skipped_and_the_record_fetches_later(
    schema_registry: SchemaRegistry, schema_registry_url: str
) -> None:
    schema_id = _register(schema_registry, "warm-later-value", SCHEMA)
    converter = AvroConverter(schema_registry_url)
    schema_registry.down = True

    assert converter.warm_up(["warm-later-value"]) == 0  # no exception: an optimisation only

    schema_registry.down = False
    asked = len(schema_registry.state.requests)
    value, _writer = converter.convert("warm-later", _wire(schema_id, {"id": 1, "country": "SE"}))
    assert value == {"id": 1, "country": "SE"}
    assert len(schema_registry.state.requests) > asked  # fetched now, as without the warm-up


def test_the_builder_warms_up_value_and_key_subjects_of_named_topics_only_for_avro(
    schema_registry: SchemaRegistry, schema_registry_url: str
) -> None:
    value_id = _register(schema_registry, "warm-both-value", SCHEMA)
    key_id = _register(schema_registry, "warm-both-key", {"type": "string"})
    avro = "io.confluent.connect.avro.AvroConverter"
    props = {
        "key.converter": avro,
        "key.converter.schema.registry.url": schema_registry_url,
        "value.converter": avro,
        "value.converter.schema.registry.url": schema_registry_url,
    }
    converter = record_converter(props)
    thread = BatchBuilder(converter).warm_up(["warm-both"])
    assert thread is not None
    thread.join(30)
    assert not thread.is_alive()

    asked = len(schema_registry.state.requests)
    assert isinstance(converter.value, AvroConverter) and isinstance(converter.key, AvroConverter)
    assert converter.value.columns(value_id) is not None
    key_value, _ = converter.key.convert("warm-both", b"\0" + key_id.to_bytes(4, "big") + b"\x06abc")
    assert key_value == "abc"
    assert len(schema_registry.state.requests) == asked

    json_only = record_converter({"value.converter": "org.apache.kafka.connect.json.JsonConverter"})
    assert BatchBuilder(json_only).warm_up(["warm-both"]) is None  # no registry, no thread
    assert BatchBuilder(converter).warm_up([]) is None  # a pattern subscription: no topic names
