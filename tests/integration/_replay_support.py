"""Helpers for the replay tests: source records, reading a topic back read_committed, sink configs."""

from __future__ import annotations

import json
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.integration._run_support import fast_consumer_overrides

BASE_TS = 1_767_225_600_000  # 2026-01-01T00:00:00Z

Rec = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]
"""(partition, key, value, headers, timestamp) as Kafka holds it."""


def source_records(n: int, partitions: int) -> list[Rec]:
    """Records with keys, compact JSON values, two headers and explicit timestamps."""
    out: list[Rec] = []
    for i in range(n):
        value = json.dumps({"id": i, "name": f"n{i % 3}"}, separators=(",", ":")).encode()
        headers = (("trace", f"t-{i}".encode()), ("origin", b"replay-test"))
        out.append((i % partitions, f"k{i}".encode(), value, headers, BASE_TS + i))
    return out


def produce(bootstrap: str, topic: str, records: list[Rec]) -> None:
    prod = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for part, key, value, headers, ts in records:
        prod.produce(topic, value, key, partition=part, headers=list(headers), timestamp=ts)
    assert prod.flush(30) == 0


def partition_count(bootstrap: str, topic: str) -> int:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
    return len(md.topics[topic].partitions)


def read_topic(bootstrap: str, topic: str, timeout: float = 30.0) -> list[Rec]:
    """Every record of ``topic`` with isolation.level=read_committed, each partition to its end."""
    out: list[Rec] = []
    for p in range(partition_count(bootstrap, topic)):
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "replay-test-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, p, 0)])
            deadline = time.monotonic() + timeout
            while True:
                assert time.monotonic() < deadline, f"{topic}/{p} not read to its end in {timeout}s"
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, err
                    break
                _ts_type, ts = msg.timestamp()
                headers = tuple((n, v) for n, v in (msg.headers() or ()))
                out.append((p, msg.key(), msg.value(), headers, ts))
        finally:
            consumer.close()
    return out


def sink_props(root: str, topics: list[str], kcql: str, **extra: str) -> dict[str, Any]:
    """A sink config over local storage with fast group joins."""
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": ",".join(topics),
        "connect.s3.kcql": kcql,
        "connect.storage": "local",
        "connect.local.root": root,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
        **extra,
    }
