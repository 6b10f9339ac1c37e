"""Poison pills through ``kcql-sink run`` with ``errors.tolerance=all`` and a dead-letter topic.

Each hostile record must be handled exactly once, per the policy: written to a file when it is
valid (a non-UTF-8 key, a thousand headers, a 700 KB value), dead-lettered with its original
bytes when it is not (malformed JSON, binary garbage, JSON nested deeper than any parser stack,
an Avro value with a wrong magic byte or an unknown schema id), and the task keeps running.
Offsets come from the envelope's metadata (files) and Connect's context headers (DLQ).
"""

from __future__ import annotations

import json
import signal
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from chaos.crash import FAST_CONSUMER, start_sink
from chaos.reader import read_local


def _dead_letters(bootstrap: str, dlq: str, want: int, timeout: float = 30) -> dict[int, tuple]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}"})
    reader.assign([KafkaTopicPartition(dlq, 0, 0)])
    out: dict[int, tuple] = {}
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            got = reader.consume(50, timeout=0.5)
            if not got and len(out) >= want:  # all there, and nothing more (a repeat) came in 0.5 s
                break
            for m in got:
                if m.error() is None:
                    headers = dict(m.headers() or [])
                    offset = int(headers["__connect.errors.offset"])
                    assert offset not in out, f"offset {offset} dead-lettered twice"
                    out[offset] = (m.key(), m.value(), headers)
    finally:
        reader.close()
    return out


def _run_until_handled(
    bootstrap, topic, props, tmp_path: Path, records: list[tuple], dlq: str, good: set[int]
):
    prod = Producer({"bootstrap.servers": bootstrap, "message.max.bytes": 2_000_000})
    for key, value, headers in records:
        prod.produce(topic, key=key, value=value, headers=headers)
    assert prod.flush(20) == 0
    config = tmp_path / "connector.json"
    config.write_text(json.dumps({"name": f"poison-{uuid.uuid4().hex[:8]}", "config": props}))
    log = tmp_path / "poison.log"
    proc = start_sink(config, bootstrap, log)
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            seen, _ = read_local(tmp_path / "out", "bkt", "p")
            if good <= {o for (_t, _p, o) in seen}:
                break
            time.sleep(0.5)
        alive = proc.poll() is None
        time.sleep(1.5)  # a late failure would show now
        alive = alive and proc.poll() is None
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    text = log.read_text(errors="replace")
    assert alive and rc == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    seen, _ = read_local(tmp_path / "out", "bkt", "p")
    files = {o: n for (_t, _p, o), n in seen.items()}
    dead = _dead_letters(bootstrap, dlq, len(records) - len(files))
    assert all(n == 1 for n in files.values()), files
    assert not set(files) & set(dead), (sorted(files), sorted(dead))
    assert set(files) | set(dead) == set(range(len(records))), (sorted(files), sorted(dead))
    return files, dead, text


def _props(topic: str, tmp_path: Path, dlq: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "out"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
        **FAST_CONSUMER,
        **extra,
    }


def test_json_poison_pills_are_dead_lettered_and_valid_oddities_written(
    kafka_bootstrap, topic_factory, tmp_path
):
    topic = topic_factory("poison-json")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    many_headers = [(f"h{i}", f"v{i}".encode()) for i in range(1000)]
    records = [
        (b"k0", b'{"n": 0}', None),
        (b"k1", b'{"n": ', None),  # malformed JSON
        (b"k2", b'{"n": 2}', None),
        (b"\xff\xfe\x00\x80", b'{"n": 3}', None),  # non-UTF-8 key (ByteArray key converter)
        (b"k4", b"[" * 20_000 + b"]" * 20_000, None),  # nested deeper than any parser stack
        (b"k5", b'{"n": 5}', many_headers),  # a thousand headers
        (b"k6", json.dumps({"blob": "x" * 700_000}).encode(), None),  # oversized (700 KB)
        (b"k7", b"\xff\xfe\xfd binary", None),  # not text at all
        (b"k8", b'{"n": 8}', [("dup", b"1"), ("dup", b"2")]),
    ]
    files, dead, log = _run_until_handled(
        kafka_bootstrap, topic, _props(topic, tmp_path, dlq), tmp_path, records, dlq, {0, 2, 3, 5, 6, 8}
    )
    assert {1, 4, 7} <= set(dead), sorted(dead)
    assert {0, 2, 3, 5, 6, 8} <= set(files), sorted(files)
    for offset in (1, 4, 7):  # original bytes and the reason travel with the record
        key, value, headers = dead[offset]
        assert (key, value) == records[offset][:2]
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers.get("__connect.errors.exception.message")
    assert "offset 1" in log or "offset=1" in log  # errors.log.enable names the record


@pytest.mark.chaos
def test_avro_poison_pills_wrong_magic_and_unknown_schema_id(
    kafka_bootstrap, topic_factory, schema_registry_url, tmp_path
):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = topic_factory("poison-avro")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "n", "type": "long"}]})
    serialize = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), schema)
    ctx = SerializationContext(topic, MessageField.VALUE)
    good = [serialize({"n": i}, ctx) for i in range(3)]
    records = [
        (b"k0", good[0], None),
        (b"k1", b"\x01" + good[1][1:], None),  # wrong magic byte
        (b"k2", b"\x00\x00\x0f\x42\x3f" + good[1][5:], None),  # schema id 999999: unknown
        (b"k3", good[2], None),
        (b"k4", b"\x00\x00", None),  # shorter than the wire header
    ]
    props = _props(
        topic,
        tmp_path,
        dlq,
        **{
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
        },
    )
    del props["value.converter.schemas.enable"]
    files, dead, _log = _run_until_handled(kafka_bootstrap, topic, props, tmp_path, records, dlq, {0, 3})
    assert set(files) == {0, 3} and set(dead) == {1, 2, 4}, (sorted(files), sorted(dead))
