"""KIP-875 offsets of a sink connector: the committed offsets of consumer group ``connect-<name>``.

Only the Kafka side is read or changed. With exactly-once on, the storage index is the source of
truth for partitions it knows (the task resumes from it), which is why the alter/reset messages
are Connect's "framework-managed offsets" texts: externally managed offsets are not touched.
A partition reset (``"offset": null``) or a full reset commits the partition's low watermark,
which is where the task's consumer (``auto.offset.reset=earliest``) would start anyway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from sink.rest.errors import RestError

__all__ = [
    "ALTERED_MESSAGE",
    "RESET_MESSAGE",
    "alter_offsets",
    "parse_alter_request",
    "read_offsets",
    "reset_offsets",
]

ALTERED_MESSAGE = (
    "The Connect framework-managed offsets for this connector have been altered successfully. However, if "
    "this connector manages offsets externally, they will need to be manually altered in the system that "
    "the connector uses."
)
RESET_MESSAGE = (
    "The Connect framework-managed offsets for this connector have been reset successfully. However, if "
    "this connector manages offsets externally, they will need to be manually reset in the system that "
    "the connector uses."
)
TIMEOUT = 10.0
TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
"""Kafka's legal topic names (``org.apache.kafka.common.internals.Topic``)."""
MAX_PARTITION = 2**31 - 1
MAX_OFFSET = 2**63 - 1


def _consumer(bootstrap: str, name: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"connect-{name}",
            "enable.auto.commit": False,
            "client.id": f"kcql-sink-offsets-{name}",
        }
    )


def _topics(config: Mapping[str, str], all_topics: list[str]) -> list[str]:
    named = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
    regex = config.get("topics.regex", "").strip()
    if regex:
        pattern = re.compile(regex)
        named += [t for t in all_topics if pattern.fullmatch(t)]
    return sorted(set(named) & set(all_topics))


def read_offsets(bootstrap: str, name: str, config: Mapping[str, str]) -> list[dict[str, Any]]:
    """The group's committed offsets, in Connect's sink-offset shape."""
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = _consumer(bootstrap, name)
    try:
        metadata = consumer.list_topics(timeout=TIMEOUT)
        tps = [
            KafkaTopicPartition(topic, p)
            for topic in _topics(config, list(metadata.topics))
            for p in sorted(metadata.topics[topic].partitions)
        ]
        committed = consumer.committed(tps, timeout=TIMEOUT) if tps else []
    except KafkaException as exc:
        raise RestError(500, f"Failed to read the offsets of consumer group connect-{name}: {exc}") from None
    finally:
        consumer.close()
    return [
        {
            "partition": {"kafka_topic": tp.topic, "kafka_partition": tp.partition},
            "offset": {"kafka_offset": tp.offset},
        }
        for tp in committed
        if tp.offset >= 0
    ]


def parse_alter_request(body: Any) -> list[tuple[str, int, int | None]]:
    """``(topic, partition, offset or None)`` from a PATCH body; 400 naming what is wrong."""
    entries = body.get("offsets") if isinstance(body, dict) else None
    if not entries:
        raise RestError(400, "Partitions / offsets need to be provided for an alter offsets request")
    if not isinstance(entries, list):
        raise RestError(400, "offsets must be a list of {partition, offset} objects")
    out: list[tuple[str, int, int | None]] = []
    for i, entry in enumerate(entries):
        part = entry.get("partition") if isinstance(entry, dict) else None
        if not isinstance(part, dict) or not isinstance(part.get("kafka_topic"), str):
            raise RestError(
                400, f'offsets[{i}]: partition must be {{"kafka_topic": ..., "kafka_partition": ...}}'
            )
        if not TOPIC_NAME.fullmatch(part["kafka_topic"]) or part["kafka_topic"] in (".", ".."):
            raise RestError(
                400,
                f"offsets[{i}].partition.kafka_topic {part['kafka_topic'][:255]!r} is not a Kafka topic name "
                "(1 to 249 of a-z, A-Z, 0-9, '.', '_', '-')",
            )
        partition = _as_int(part.get("kafka_partition"), f"offsets[{i}].partition.kafka_partition")
        if not 0 <= partition <= MAX_PARTITION:
            raise RestError(
                400,
                f"offsets[{i}].partition.kafka_partition must be from 0 to {MAX_PARTITION}, got {partition}",
            )
        offset_obj = entry.get("offset")
        if offset_obj is None:
            out.append((part["kafka_topic"], partition, None))
            continue
        if not isinstance(offset_obj, dict) or "kafka_offset" not in offset_obj:
            raise RestError(400, f'offsets[{i}]: offset must be null or {{"kafka_offset": <number>}}')
        offset = _as_int(offset_obj["kafka_offset"], f"offsets[{i}].offset.kafka_offset")
        if not 0 <= offset <= MAX_OFFSET:
            raise RestError(
                400, f"offsets[{i}].offset.kafka_offset must be from 0 to {MAX_OFFSET}, got {offset}"
            )
        out.append((part["kafka_topic"], partition, offset))
    return out


def _as_int(value: Any, where: str) -> int:
    if isinstance(value, bool):
        raise RestError(400, f"{where} must be an integer")
    try:
        return int(value)
    except (TypeError, ValueError):
        raise RestError(400, f"{where} must be an integer, got {value!r}") from None


def _commit(bootstrap: str, name: str, wanted: list[tuple[str, int, int | None]]) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    consumer = _consumer(bootstrap, name)
    try:
        _check_partitions_exist(consumer, wanted)
        offsets = []
        for topic, partition, offset in wanted:
            if offset is None:
                offset, _ = consumer.get_watermark_offsets(
                    KafkaTopicPartition(topic, partition), timeout=TIMEOUT
                )
            offsets.append(KafkaTopicPartition(topic, partition, offset))
        if offsets:
            consumer.commit(offsets=offsets, asynchronous=False)
    except KafkaException as exc:
        raise RestError(500, f"Failed to alter the offsets of consumer group connect-{name}: {exc}") from None
    finally:
        consumer.close()


def _check_partitions_exist(consumer: Any, wanted: list[tuple[str, int, int | None]]) -> None:
    """A 400 naming the first topic-partition the cluster does not have (a client's mistake, not ours)."""
    known: dict[str, set[int]] = {}
    for topic, partition, _ in wanted:
        if topic not in known:
            meta = consumer.list_topics(topic, timeout=TIMEOUT).topics.get(topic)
            known[topic] = set(meta.partitions) if meta is not None and meta.error is None else set()
        if partition not in known[topic]:
            raise RestError(400, f"Topic-partition {topic}-{partition} does not exist in the Kafka cluster")


def alter_offsets(bootstrap: str, name: str, body: Any) -> str:
    _commit(bootstrap, name, parse_alter_request(body))
    return ALTERED_MESSAGE


def reset_offsets(bootstrap: str, name: str, config: Mapping[str, str]) -> str:
    current = read_offsets(bootstrap, name, config)
    _commit(
        bootstrap,
        name,
        [(o["partition"]["kafka_topic"], o["partition"]["kafka_partition"], None) for o in current],
    )
    return RESET_MESSAGE
