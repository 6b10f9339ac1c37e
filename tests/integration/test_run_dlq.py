"""Bad records with the real storage task go to the dead-letter topic, the rest reach the files.

Two kinds: a value the converter rejects, and a record the partitioner cannot place (its
PARTITIONBY header is missing; the task reports it with ``.record`` and the runtime isolates it).
Both arrive on the DLQ with their original key, value and headers plus Connect's context headers.
"""

from __future__ import annotations

import json
import time
import uuid

from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.fixtures.tansu import FAST_CONSUMER
from tests.integration._run_support import (
    RunningSink,
    decode,
    fast_consumer_overrides,
    local_files,
    make_config,
    wait_for,
)


def test_bad_records_go_to_the_dlq_and_good_ones_to_files(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("dlq-e2e")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    values = [
        b'{"id": 0}',
        b"\x00\x01 not json",  # converter failure
        b'{"id": 2}',  # no country header: the partitioner cannot place it
        b'{"id": 3}',
        b'{"id": 4}',
    ]
    countries = ["fr", "fr", None, "de", "fr"]
    for value, country in zip(values, countries, strict=True):
        headers = [("origin", b"test")] + ([("country", country.encode())] if country else [])
        producer.produce(topic, value=value, key=b"k", headers=headers)
    producer.flush(10)
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` PARTITIONBY _header.country STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
        **fast_consumer_overrides(),
    }
    sink = RunningSink(make_config(props), kafka_bootstrap)

    def rows() -> list[dict]:
        return [r for f in local_files(tmp_path, "bkt", "p") for r in decode(f.read_bytes(), "JSON")]

    try:
        wait_for(lambda: len(rows()) >= 3 or sink.error is not None, what="3 good rows")
    finally:
        sink.join()
    assert sink.error is None, sink.error
    assert sorted(r["id"] for r in rows()) == [0, 3, 4]

    reader = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"r-{uuid.uuid4().hex}", **FAST_CONSUMER}
    )
    reader.assign([KafkaTopicPartition(dlq, 0, 0)])
    dead = []
    deadline = time.monotonic() + 20
    while len(dead) < 2 and time.monotonic() < deadline:
        dead += [m for m in reader.consume(10, timeout=0.5) if m.error() is None]
    reader.close()
    assert [(m.key(), m.value()) for m in dead] == [(b"k", values[1]), (b"k", values[2])]
    stages = []
    for msg, offset in zip(dead, (1, 2), strict=True):
        headers = dict(msg.headers())
        assert headers["origin"] == b"test"
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.offset"] == str(offset).encode()
        stages.append(headers["__connect.errors.stage"])
        assert json.dumps(headers["__connect.errors.exception.message"].decode())  # readable text
    assert stages == [b"VALUE_CONVERTER", b"TASK_PUT"]
