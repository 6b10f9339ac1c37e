"""Poison-pill storm: thousands of undecodable records with ``errors.tolerance=all`` and a DLQ.

The dead-letter producer must not flush per record (that ran at the broker's round-trip time):
records are batched and made durable before a file commit or an offset commit moves past them
(``sink/runtime/dlq.py``). Every poison record must reach the dead-letter topic exactly once with
its original key and value and Connect's ``__connect.errors.*`` context headers; every good
record must be in the files exactly once. The dead-letter rate (records/s, from the DLQ records'
timestamps) is printed for ``docs/reliability.md``.

The runtime runs in-process (the real task and a real Tansu broker) so the test can also count
the producer's flushes.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from tests.integration._run_support import RunningSink, fast_consumer_overrides, make_config, wait_for

PARTITIONS = 4
GOOD_EVERY = 20
"""One record in this many is valid JSON (so files and dead letters interleave in each partition)."""

POISONS = (
    b"\xff\xfe not json at all",
    b'{"id": ',
    b"[" * 3000,
    b"\x00\x01\x02\x03",
)


def _storm(kafka_bootstrap: str, topic_factory, tmp_path, poison: int) -> None:
    topic = topic_factory("poison-storm", partitions=PARTITIONS)
    dlq = f"dlq-storm-{uuid.uuid4().hex[:8]}"
    prod = Producer({"bootstrap.servers": kafka_bootstrap, "linger.ms": 20})
    sent: dict[tuple[int, int], tuple[bytes, bytes, bool]] = {}

    def delivered(err, msg) -> None:
        assert err is None, err
        bad = msg.value() in POISONS
        sent[(msg.partition(), msg.offset())] = (msg.key(), msg.value(), bad)

    i = produced_bad = 0
    while produced_bad < poison:
        good = i % GOOD_EVERY == 0
        produced_bad += not good
        value = json.dumps({"id": i}).encode() if good else POISONS[i % len(POISONS)]
        prod.produce(
            topic, key=f"k{i}".encode(), value=value, partition=i % PARTITIONS, on_delivery=delivered
        )
        if i % 5000 == 0:
            prod.poll(0)
        i += 1
    assert prod.flush(60) == 0
    bad = {k for k, (_key, _value, is_bad) in sent.items() if is_bad}
    good = set(sent) - bad
    assert len(bad) == poison

    props = {
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
        "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.context.headers.enable": "true",
        **fast_consumer_overrides(),
    }
    sink = RunningSink(make_config(props), kafka_bootstrap)
    try:
        wait_for(
            lambda: sink.error is not None
            or (sink.runtime.policy.dlq is not None and sink.runtime.policy.dlq.sent >= len(bad)),
            timeout=240, what=f"{len(bad)} dead letters acknowledged",
        )
        wait_for(
            lambda: sink.error is not None or _file_offsets(tmp_path) >= good, timeout=60, what="good rows"
        )
    finally:
        dlq_queue = sink.runtime.policy.dlq
        sink.join()
    assert sink.error is None, sink.error
    assert dlq_queue is not None
    # batched: a flush per file or offset commit, far fewer than one per record
    counts = (dlq_queue.sent, dlq_queue.flushes)
    assert dlq_queue.sent == len(bad) and dlq_queue.flushes <= len(bad) // 20, counts

    dead, stamps = _read_dlq(kafka_bootstrap, dlq, len(bad))
    assert set(dead) == bad, (len(set(dead)), len(bad))  # every poison record, nothing else
    for (partition, offset), (key, value, headers) in dead.items():
        assert (key, value) == sent[(partition, offset)][:2]
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"
        assert headers["__connect.errors.connector.name"]
        assert headers["__connect.errors.exception.class.name"]
        assert headers["__connect.errors.exception.message"]
    rows = _file_rows(tmp_path)
    assert sorted(rows) == sorted(good), "good records missing or duplicated in the files"
    seconds = (max(stamps) - min(stamps)) / 1000
    rate = (len(stamps) - 1) / seconds if seconds > 0 else float("inf")
    print(
        f"\npoison storm: {len(bad)} dead letters, {len(good)} good rows, {dlq_queue.flushes} DLQ flushes, "
        f"{rate:,.0f} dead letters/s (DLQ timestamps, {seconds:.1f} s)"
    )


def _file_rows(tmp_path) -> list[tuple[int, int]]:
    from chaos.reader import read_local

    seen, _ = read_local(tmp_path / "out", "bkt", "p")
    return [(p, o) for (_t, p, o) in seen.elements()]


def _file_offsets(tmp_path) -> set[tuple[int, int]]:
    return set(_file_rows(tmp_path))


def _read_dlq(bootstrap: str, dlq: str, want: int) -> tuple[dict[tuple[int, int], tuple], list[int]]:
    """Every dead letter by its origin (from the context headers); fails on a duplicate."""
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}"})
    reader.assign([KafkaTopicPartition(dlq, 0, 0)])
    out: dict[tuple[int, int], tuple] = {}
    stamps: list[int] = []
    idle_until = time.monotonic() + 30
    try:
        while time.monotonic() < idle_until:
            got = [m for m in reader.consume(500, timeout=0.5) if m.error() is None]
            for m in got:
                headers = dict(m.headers() or [])
                origin = (int(headers["__connect.errors.partition"]), int(headers["__connect.errors.offset"]))
                assert origin not in out, f"{origin} dead-lettered twice"
                out[origin] = (m.key(), m.value(), headers)
                stamps.append(m.timestamp()[1])
            if len(out) >= want:
                # a duplicate after the last one would show within 2 s
                idle_until = min(idle_until, time.monotonic() + 2)
    finally:
        reader.close()
    return out, stamps


# chaos for make test's time budget; test_reliability_poison.py and test_run_dlq.py cover the DLQ there
@pytest.mark.chaos
def test_poison_storm_short(kafka_bootstrap, topic_factory, tmp_path):
    _storm(kafka_bootstrap, topic_factory, tmp_path, poison=1000)


@pytest.mark.chaos
def test_poison_storm_10000(kafka_bootstrap, topic_factory, tmp_path):
    _storm(kafka_bootstrap, topic_factory, tmp_path, poison=10_000)
