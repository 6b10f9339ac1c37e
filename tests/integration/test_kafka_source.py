"""The ``kcql-kafka`` Spark data source on its own: real Tansu, the shared local Spark session.

What a user of ``spark.read.format("kcql-kafka")`` relies on: Spark's Kafka columns with the
bytes, headers and timestamps the producer sent; one Spark partition per Kafka partition; the
offsets options; a range whose end no message carries still ends; a stream's micro-batches
capped per partition. Expected values come from what the test produced, not from our reader.
"""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

import pytest

from sink.spark.kafka_source import KafkaRange, consumer_conf, read_range, register, resolve_offsets

pytestmark = [pytest.mark.integration, pytest.mark.spark]

BASE_TS = 1_700_000_000_000


def produce(producer: Any, topic: str, count: int, partitions: int) -> None:
    for i in range(count):
        producer.produce(
            topic,
            key=None if i % 5 == 0 else f"k{i}".encode(),
            value=f"v{i}".encode(),
            partition=i % partitions,
            headers=[("h", f"x{i}".encode()), ("empty", None)] if i % 2 else None,
            timestamp=BASE_TS + i,
        )
    producer.flush(20)


def frame(spark: Any, bootstrap: str, topic: str, **options: str) -> Any:
    register(spark)
    reader = spark.read.format("kcql-kafka").option("kafka.bootstrap.servers", bootstrap)
    reader = reader.option("subscribe", topic)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def test_a_batch_read_gives_every_message_with_spark_kafka_columns(
    kafka_bootstrap, topic_factory, producer, spark
):
    topic = topic_factory("ks", partitions=3)
    produce(producer, topic, 300, 3)
    df = frame(spark, kafka_bootstrap, topic, batchRows="7")
    assert df.rdd.getNumPartitions() == 3  # one task per Kafka partition
    assert [(f.name, f.dataType.simpleString()) for f in df.schema.fields] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    got = {bytes(r["value"]).decode(): r for r in df.collect()}
    assert len(got) == 300
    for i in range(300):
        row = got[f"v{i}"]
        assert row["partition"] == i % 3 and row["offset"] == i // 3 and row["topic"] == topic
        assert row["key"] == (None if i % 5 == 0 else f"k{i}".encode())
        stamp = row["timestamp"].replace(tzinfo=UTC) if row["timestamp"].tzinfo is None else row["timestamp"]
        assert stamp == datetime.fromtimestamp((BASE_TS + i) / 1000, tz=UTC)
        assert row["timestampType"] == 0  # CreateTime, as Spark's Kafka source numbers it
        expected = [("h", f"x{i}".encode()), ("empty", None)] if i % 2 else []
        assert [
            (h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"]
        ] == expected


def test_offsets_options_choose_each_partition_range(kafka_bootstrap, topic_factory, producer, spark):
    topic = topic_factory("ks", partitions=3)
    produce(producer, topic, 300, 3)
    df = frame(
        spark,
        kafka_bootstrap,
        topic,
        startingOffsets=json.dumps({topic: {"0": 90}}),
        endingOffsets=json.dumps({topic: {"0": 95, "1": 4, "2": -1}}),
    )
    offsets = sorted((r["partition"], r["offset"]) for r in df.select("partition", "offset").collect())
    assert offsets == [(0, o) for o in range(90, 95)] + [(1, o) for o in range(4)] + [
        (2, o) for o in range(100)
    ]


def test_latest_is_where_a_fetch_ends_and_a_range_past_the_last_message_still_ends(
    kafka_bootstrap, topic_factory, producer
):
    topic = topic_factory("ks", partitions=1)
    produce(producer, topic, 250, 1)  # batched by the producer (linger.ms): one batch holds many messages
    assert resolve_offsets(kafka_bootstrap, [topic], "latest", default="latest") == {(topic, 0): 250}
    assert resolve_offsets(kafka_bootstrap, [topic], "earliest", default="latest") == {(topic, 0): 0}
    conf = consumer_conf({"kafka.bootstrap.servers": kafka_bootstrap})
    # An end no message carries (as after compaction or a transaction marker): the partition's end stops it.
    batches = list(read_range(KafkaRange(topic, 0, 240, 260), conf, batch_rows=4, quiet_ms=20_000))
    assert [o for b in batches for o in b.column("offset").to_pylist()] == list(range(240, 250))
    assert max(b.num_rows for b in batches) <= 4


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"subscribe": "x"}, "kafka.bootstrap.servers"),
        ({"kafka.bootstrap.servers": "127.0.0.1:1"}, "subscribe"),
        ({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "x", "batchRows": "many"}, "batchrows"),
    ],
)
def test_a_missing_or_wrong_option_is_named(spark, options, named):
    register(spark)
    reader = spark.read.format("kcql-kafka")
    for key, value in options.items():
        reader = reader.option(key, value)
    from pyspark.errors import PySparkException

    with pytest.raises(PySparkException, match=named) as caught:
        reader.load().collect()
    assert "kcql-kafka" in str(caught.value)


def test_a_stream_reads_new_messages_capped_per_partition_per_micro_batch(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    topic = topic_factory("ks", partitions=2)
    produce(producer, topic, 100, 2)  # before the stream starts: startingOffsets=earliest reads them
    register(spark)
    seen: list[tuple[int, int, int]] = []  # (batch id, partition, offset)
    lock = threading.Lock()

    def collect(batch: Any, batch_id: int) -> None:
        rows = batch.select("partition", "offset").collect()
        with lock:
            seen.extend((batch_id, r["partition"], r["offset"]) for r in rows)

    query = (
        spark.readStream.format("kcql-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("maxRecordsPerPartition", "20")
        .load()
        .writeStream.foreachBatch(collect)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="0 seconds")
        .start()
    )
    try:
        query.processAllAvailable()
        produce(producer, topic, 60, 2)  # while it runs: offsets 50..79 of each partition
        query.processAllAvailable()
    finally:
        query.stop()
    assert sorted((p, o) for _b, p, o in seen) == [(p, o) for p in (0, 1) for o in range(80)]
    per_batch: dict[tuple[int, int], int] = {}
    for batch_id, partition, _offset in seen:
        per_batch[(batch_id, partition)] = per_batch.get((batch_id, partition), 0) + 1
    assert max(per_batch.values()) == 20  # the cap, per partition per micro-batch
