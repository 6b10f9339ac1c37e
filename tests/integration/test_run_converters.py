"""Every converter, end to end: Kafka (Tansu) → runtime → real SinkTask → files read back independently."""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.integration._run_support import (
    RunningSink,
    decode,
    fast_consumer_overrides,
    local_files,
    make_config,
    wait_for,
)

N = 6


def run_until_files(kafka_bootstrap: str, props: dict[str, str], root: Path, bucket: str, fmt: str) -> list:
    sink = RunningSink(make_config(props), kafka_bootstrap)
    rows: list = []

    def all_rows() -> bool:
        rows[:] = [row for f in local_files(root, bucket, "p") for row in decode(f.read_bytes(), fmt)]
        return len(rows) >= N or sink.error is not None

    try:
        wait_for(all_rows, what=f"{N} rows in {fmt} files")
    finally:
        sink.join()
    assert sink.error is None, sink.error
    return rows


def base_props(topic: str, root: Path, fmt: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `{fmt}` PROPERTIES('flush.count'={N if fmt != 'BYTES' else 1})"  # noqa: S608,E501
        ),
        "connect.storage": "local",
        "connect.local.root": str(root),
        **fast_consumer_overrides(),
        **extra,
    }


def test_string_converter_to_text(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("conv-str")
    lines = [f"línea {i}" for i in range(N)]
    for line in lines:
        producer.produce(topic, key=b"k", value=line.encode())
    producer.flush(10)
    props = base_props(
        topic, tmp_path, "TEXT", **{"value.converter": "org.apache.kafka.connect.storage.StringConverter"}
    )
    assert run_until_files(kafka_bootstrap, props, tmp_path, "bkt", "TEXT") == lines


def test_bytearray_converter_to_bytes(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("conv-bytes")
    payloads = [bytes([i, 0, 255, 10, i]) for i in range(N)]
    for payload in payloads:
        producer.produce(topic, value=payload)
    producer.flush(10)
    props = base_props(
        topic,
        tmp_path,
        "BYTES",
        **{"value.converter": "org.apache.kafka.connect.converters.ByteArrayConverter"},
    )
    assert sorted(run_until_files(kafka_bootstrap, props, tmp_path, "bkt", "BYTES")) == sorted(payloads)


def test_schemaless_json_passes_through_to_json(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("conv-json")
    docs = [{"id": i, "name": f"n{i}", "nested": {"x": [i, None]}} for i in range(N)]
    for doc in docs:
        producer.produce(topic, value=json.dumps(doc).encode())
    producer.flush(10)
    props = base_props(
        topic,
        tmp_path,
        "JSON",
        **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        },
    )
    assert run_until_files(kafka_bootstrap, props, tmp_path, "bkt", "JSON") == docs


def test_json_with_connect_schemas_to_avro_with_logical_types(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("conv-json-schema")
    schema = {
        "type": "struct",
        "name": "shop.Order",
        "optional": False,
        "fields": [
            {"field": "id", "type": "int32", "optional": False},
            {
                "field": "price",
                "type": "bytes",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Decimal",
                "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            },
            {
                "field": "at",
                "type": "int64",
                "optional": False,
                "name": "org.apache.kafka.connect.data.Timestamp",
            },
            {"field": "note", "type": "string", "optional": True},
        ],
    }
    for i in range(N):
        unscaled = (1000 + i).to_bytes(4, "big", signed=True)
        payload = {
            "id": i,
            "price": base64.b64encode(unscaled).decode(),
            "at": 1_700_000_000_000 + i,
            "note": None,
        }
        producer.produce(topic, value=json.dumps({"schema": schema, "payload": payload}).encode())
    producer.flush(10)
    props = base_props(
        topic,
        tmp_path,
        "AVRO",
        **{
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
        },
    )
    rows = run_until_files(kafka_bootstrap, props, tmp_path, "bkt", "AVRO")
    assert rows == [
        {
            "id": i,
            "price": Decimal(1000 + i).scaleb(-2),
            "at": datetime.fromtimestamp((1_700_000_000_000 + i) / 1000, tz=UTC),
            "note": None,
        }
        for i in range(N)
    ]


@pytest.mark.parametrize("fmt", ["AVRO", "PARQUET"])
def test_avro_converter_with_schema_registry(
    kafka_bootstrap, topic_factory, producer, tmp_path, schema_registry_url, fmt
):
    topic = topic_factory(f"conv-avro-{fmt.lower()}")
    writer_schema = json.dumps(
        {
            "type": "record",
            "name": "myrecord",
            "fields": [
                {"name": "id", "type": "int"},
                {"name": "created", "type": "string"},
                {"name": "product", "type": "string"},
                {"name": "price", "type": "double"},
                {"name": "qty", "type": "int"},
            ],
        }
    )
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), writer_schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    orders = [
        {"id": i, "created": "2016-05-06 13:53:00", "product": f"OP-{i}", "price": 94.2 + i, "qty": 100 + i}
        for i in range(N)
    ]
    for order in orders:
        producer.produce(topic, value=serialize(order, ctx))
    producer.flush(10)
    props = base_props(
        topic,
        tmp_path,
        fmt,
        **{
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
        },
    )
    assert run_until_files(kafka_bootstrap, props, tmp_path, "bkt", fmt) == orders
