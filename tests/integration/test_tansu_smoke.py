"""The broker fixture gives a real Kafka: produce with headers and a tombstone, consume in a group."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer

from tests.fixtures.tansu import FAST_CONSUMER


def test_produce_and_consume_in_a_group(kafka_bootstrap, topic_factory, producer):
    topic = topic_factory("smoke", partitions=2)
    for i in range(10):
        producer.produce(topic, key=f"k{i}", value=None if i == 9 else f"v{i}", partition=i % 2,
                         headers=[("h", b"x")])
    producer.flush(10)
    consumer = Consumer({"bootstrap.servers": kafka_bootstrap, "group.id": f"g-{uuid.uuid4().hex}",
                         "enable.auto.commit": False, **FAST_CONSUMER})
    consumer.subscribe([topic])
    seen = []
    try:
        for _ in range(100):
            for msg in consumer.consume(num_messages=100, timeout=0.5):
                assert msg.error() is None
                seen.append((msg.partition(), msg.offset(), msg.key(), msg.value(), msg.headers()))
            if len(seen) == 10:
                break
    finally:
        consumer.close()
    assert sorted((p, o) for p, o, *_ in seen) == [(p, o) for p in (0, 1) for o in range(5)]
    assert [v for *_, v, _h in seen if v is None] == [None]
    assert all(h == [("h", b"x")] for *_, h in seen)
