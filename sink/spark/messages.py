"""Raw Kafka messages as Spark hands them to the writer (Arrow rows) -> confluent-kafka Messages.

The write side runs the very converters, batches and task that ``kcql-sink run`` runs, and those
read consumed messages (``confluent_kafka.Message``). So the Arrow batches of the ``kcql-kafka``
source (:mod:`sink.spark.kafka_source`) become Messages again in the executor, one C-level
constructor call per row (~1 µs), column lists taken from Arrow in bulk.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from confluent_kafka import Message

__all__ = ["messages_from_arrow", "runs_of_messages"]

_TIMESTAMP_NONE = (0, -1)
"""librdkafka's "no timestamp": type TIMESTAMP_NOT_AVAILABLE."""


def _headers(entries: list[dict[str, Any]] | None) -> list[tuple[str, str | bytes | None]] | None:
    if not entries:
        return None
    return [(entry["key"], entry["value"]) for entry in entries]


def _millis(column: pa.Array) -> list[int | None]:
    """A Spark ``timestamp`` column (microseconds since the epoch, any unit Arrow gives) as
    Kafka's milliseconds."""
    if pa.types.is_timestamp(column.type):
        column = column.cast(pa.timestamp("ms", tz=column.type.tz), safe=False).cast(pa.int64())
    return column.to_pylist()


def messages_from_arrow(batch: pa.RecordBatch) -> list[Message]:
    """The batch's rows as Messages, in row order (the columns of Spark's Kafka source, as
    ``kafka_source.KAFKA_SCHEMA`` gives them: ``timestampType`` 0 CreateTime, 1 LogAppendTime)."""
    if batch.num_rows == 0:
        return []
    col = batch.schema.get_field_index
    topics = batch.column(col("topic")).to_pylist()
    partitions = batch.column(col("partition")).to_pylist()
    offsets = batch.column(col("offset")).to_pylist()
    stamps = _millis(batch.column(col("timestamp")))
    kinds = batch.column(col("timestampType")).to_pylist()
    keys = batch.column(col("key")).to_pylist()
    values = batch.column(col("value")).to_pylist()
    headers = batch.column(col("headers")).to_pylist()
    return [
        Message(
            topic=topic,
            partition=partition,
            offset=offset,
            key=key,
            value=value,
            headers=_headers(head),
            timestamp=_TIMESTAMP_NONE if stamp is None else ((kind or 0) + 1, stamp),
        )
        for topic, partition, offset, stamp, kind, key, value, head in zip(
            topics, partitions, offsets, stamps, kinds, keys, values, headers, strict=True
        )
    ]


def runs_of_messages(messages: list[Message]) -> Iterator[tuple[str, int, list[Message]]]:
    """Consecutive messages of one topic partition (a Spark task normally sees one partition)."""
    start = 0
    for i in range(1, len(messages) + 1):
        if (
            i == len(messages)
            or messages[i].partition() != messages[start].partition()
            or messages[i].topic() != messages[start].topic()
        ):
            first = messages[start]
            yield first.topic() or "", first.partition() or 0, messages[start:i]
            start = i
