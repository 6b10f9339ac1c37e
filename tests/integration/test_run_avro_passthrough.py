"""STOREAS AVRO with the Confluent AvroConverter writes the values' Avro bodies as they came.

Real components: Tansu, the project's Schema Registry, Confluent's ``AvroSerializer`` producing
the wire format, the real runtime and task (``SinkRuntime``), local storage. The topic is sunk
twice at once, as in production and with every batch reduced to its per-record view
(fastavro decodes each value and encodes each row); both must commit the same files. The
production run must really have taken the pass-through (``AvroWriter.passed_through``), and the
files are read by two independent readers, fastavro and the Apache ``avro`` library, which must
each find every record exactly once.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from avro.datafile import DataFileReader
from avro.io import DatumReader
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import formats.avro_format as avro_format
from sink.runtime.loop import RuntimeOptions
from tests.integration._run_support import local_files
from tests.integration.test_run_cheap_forms import FLAT, PARTITIONS, sink_twice


def test_avro_bodies_are_written_through_into_the_decoding_paths_files(
    kafka_bootstrap, topic_factory, producer, tmp_path, schema_registry_url, monkeypatch
):
    passed = [0]
    lock = threading.Lock()
    close = avro_format.AvroWriter.close

    def counted(writer: avro_format.AvroWriter) -> None:
        with lock:
            passed[0] += writer.passed_through
        close(writer)

    monkeypatch.setattr(avro_format.AvroWriter, "close", counted)
    topic = topic_factory("avro-passthrough", partitions=PARTITIONS)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    serialize = AvroSerializer(registry, json.dumps(FLAT), conf={"auto.register.schemas": True})
    ctx = SerializationContext(topic, MessageField.VALUE)
    ends, good = {}, set()
    # more than two consume() calls' worth per partition: the run holding the truncated body is
    # one of them, so most records must still go through as they came
    batch = RuntimeOptions("").batch_size
    per_partition = 2 * batch + 1000
    for partition in range(PARTITIONS):
        for i in range(per_partition):
            record: dict[str, Any] = {
                "id": i, "p": partition, "name": None if i % 5 == 0 else f"n{i}é", "amount": i / 3,
                "ok": i % 2 == 0,
            }
            value: bytes | None = serialize(record, ctx)
            if i == 700:
                value = value[:-1]  # type: ignore[index]  # a truncated body: its run goes record by record
            else:
                good.add((partition, i))
            producer.produce(topic, key=f"k{i}".encode(), value=value, partition=partition)
        ends[partition] = per_partition
    producer.flush(20)
    got = sink_twice(
        kafka_bootstrap, topic, ends, tmp_path, "AVRO",
        **{
            "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `AVRO` "  # noqa: S608
            "PROPERTIES('flush.count'=1000, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
        },
    )
    assert got["cheap"] == got["records"]  # the same files, records and order (fastavro)
    assert got["cheap_tolerated"] == got["records_tolerated"] == PARTITIONS  # the truncated bodies
    # every record went through as it came but those consumed in a run with a truncated body:
    # one run per partition, of at most one consume() (``batch`` messages)
    assert 0 < len(good) - PARTITIONS * batch <= passed[0] < len(good)
    seen: list[tuple[int, int]] = []
    for path in local_files(tmp_path / "cheap", "bkt", "p"):
        with path.open("rb") as handle, DataFileReader(handle, DatumReader()) as reader:
            assert json.loads(reader.get_meta("avro.schema"))["name"] == "Order"  # the registry's schema
            seen += [(row["p"], row["id"]) for row in reader]
    assert sorted(seen) == sorted(good)  # every record exactly once, by the Apache Avro reader

