"""AvroConverter on the way out: values archived as STOREAS AVRO go back in Confluent wire format, with
their schema registered under the target's subject in a real (HTTP) Schema Registry."""

from __future__ import annotations

import uuid

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sink.replay.runner import ReplayOptions, replay
from tests.integration._replay_support import BASE_TS, produce, read_topic, sink_props
from tests.integration._run_support import RunningSink, make_config, wait_for

AVRO = "io.confluent.connect.avro.AvroConverter"
SCHEMA = """{"type": "record", "name": "order", "namespace": "shop", "fields": [
  {"name": "id", "type": "long"}, {"name": "note", "type": ["null", "string"], "default": null}]}"""
N = 10


def test_avro_values_round_trip_through_the_registry(
    kafka_bootstrap, topic_factory, schema_registry_url, schema_registry, tmp_path
):
    client = SchemaRegistryClient({"url": schema_registry_url})
    source = topic_factory("rav-a", partitions=1)
    target = topic_factory("rav-b", partitions=1)
    ser = AvroSerializer(client, SCHEMA)
    values = [{"id": i, "note": None if i % 3 == 0 else f"n{i}"} for i in range(N)]
    produce(
        kafka_bootstrap,
        source,
        [
            (
                0,
                f"k{i}".encode(),
                ser(v, SerializationContext(source, MessageField.VALUE)),
                (("h", b"x"),),
                BASE_TS + i,
            )
            for i, v in enumerate(values)
        ],
    )
    root = str(tmp_path / "store")
    kcql = (
        f"INSERT INTO arch:avro SELECT * FROM `{source}` STOREAS AVRO "  # noqa: S608
        "PROPERTIES('store.envelope'=true, 'flush.count'=4, 'flush.interval'=1)"
    )
    props = sink_props(root, [source], kcql) | {
        "value.converter": AVRO,
        "value.converter.schema.registry.url": schema_registry_url,
    }
    sink = RunningSink(make_config(props), kafka_bootstrap)
    try:
        wait_for(
            lambda: len(list((tmp_path / "store" / "arch" / "avro").rglob("*.avro"))) == 3, 60, "archived"
        )
    finally:
        sink.join()
    assert sink.error is None, sink.error
    config = {
        "connect.s3.kcql": f"INSERT INTO {target} SELECT * FROM arch:avro STOREAS AVRO "  # noqa: S608
        "PROPERTIES('store.envelope'=true)",
        "connect.storage": "local",
        "connect.local.root": root,
        "value.converter": AVRO,
        "value.converter.schema.registry.url": schema_registry_url,
    }
    replay(config, ReplayOptions(kafka_bootstrap, name=f"avro-{uuid.uuid4().hex[:6]}"), progress_out=None)
    got = read_topic(kafka_bootstrap, target)
    deser = AvroDeserializer(client)
    assert [deser(r[2], SerializationContext(target, MessageField.VALUE)) for r in got] == values
    assert [(r[1], r[3], r[4]) for r in got] == [
        (f"k{i}".encode(), (("h", b"x"),), BASE_TS + i) for i in range(N)
    ]
    assert f"{target}-value" in schema_registry.state.subjects  # re-registered under the target's subject
    # the Avro body is byte for byte the original; the 5-byte header names the id the registry gave the
    # archived schema (the file keeps the schema as the sink wrote it, which need not be the same text)
    assert [r[2][5:] for r in got] == [r[2][5:] for r in read_topic(kafka_bootstrap, source)]
    assert all(r[2][0] == 0 for r in got)
