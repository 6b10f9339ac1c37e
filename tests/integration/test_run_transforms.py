"""Transforms, projection and `_date` from a record field, end to end: Tansu → the runtime → files.

Files are read back with the json module and pyarrow; the dead-letter topic with a plain consumer.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import time
import uuid
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.parquet as pq
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

LENSES = "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector"
PYTHON = "kcql.sink.transforms.Python"
M = "tests.unit.transforms.mappers"


def base_props(topic: str, root: Path, kcql_text: str) -> dict[str, str]:
    return {
        "connector.class": LENSES,
        "topics": topic,
        "connect.s3.kcql": kcql_text,
        "connect.storage": "local",
        "connect.local.root": str(root),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
    }


def run_until(props: dict[str, str], bootstrap: str, done: Any, what: str) -> None:
    sink = RunningSink(make_config(props), bootstrap)
    try:
        wait_for(lambda: done() or sink.error is not None, what=what)
    finally:
        sink.join()
    assert sink.error is None, sink.error


def dead_letters(bootstrap: str, topic: str, count: int) -> list[Any]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"r-{uuid.uuid4().hex}", **FAST_CONSUMER})
    reader.assign([KafkaTopicPartition(topic, 0, 0)])
    out: list[Any] = []
    deadline = time.monotonic() + 20
    while len(out) < count and time.monotonic() < deadline:
        out += [m for m in reader.consume(10, timeout=0.5) if m.error() is None]
    reader.close()
    return out


def test_a_python_mapper_filters_and_fans_out(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("mapper")
    for i in range(6):
        producer.produce(topic, key=b"k", value=json.dumps({"id": i, "name": f"n{i}", "items": ["a", "b"]}))
    producer.flush(10)
    text = (
        f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
        "PROPERTIES('flush.count'=3, 'flush.interval'=1)"
    )
    props = base_props(topic, tmp_path, text)
    props.update(
        {
            "transforms": "even,split",
            "transforms.even.type": PYTHON,
            "transforms.even.function": f"{M}:only_even",
            "transforms.split.type": PYTHON,
            "transforms.split.function": f"{M}:one_per_item",
        }
    )

    def rows() -> list[Any]:
        return [r for f in local_files(tmp_path, "bkt", "p") for r in decode(f.read_bytes(), "JSON")]

    run_until(props, kafka_bootstrap, lambda: len(rows()) >= 6, "6 fanned-out rows")
    assert sorted((r["id"], r["item"]) for r in rows()) == [(i, x) for i in (0, 2, 4) for x in "ab"]
    files = local_files(tmp_path, "bkt", "p")
    # flush.count=3, groups of two: each file holds whole groups (4 + 2), never half of one
    assert sorted(len(decode(f.read_bytes(), "JSON")) for f in files) == [2, 4]


def test_a_projection_with_aliases_into_parquet_has_exactly_the_projected_schema(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("projection")
    for i in range(4):
        customer = {"name": f"c{i}", "tier": i % 2}
        value = {"id": i, "amount": i + 0.25, "secret": "s3cr3t", "customer": customer}
        producer.produce(topic, key=b"k", value=json.dumps(value))
    producer.flush(10)
    text = (
        f"INSERT INTO bkt:p SELECT id, amount AS total, customer.name AS customer FROM `{topic}` "  # noqa: S608
        "STOREAS `PARQUET` PROPERTIES('flush.count'=4)"
    )
    props = base_props(topic, tmp_path, text)
    run_until(props, kafka_bootstrap, lambda: bool(local_files(tmp_path, "bkt", "p")), "a parquet file")
    (path,) = local_files(tmp_path, "bkt", "p")
    table = pq.read_table(io.BytesIO(path.read_bytes()))
    assert table.schema.names == ["id", "total", "customer"]
    assert [table.schema.field(n).type for n in table.schema.names] == [pa.int64(), pa.float64(), pa.string()]
    assert table.to_pylist() == [{"id": i, "total": i + 0.25, "customer": f"c{i}"} for i in range(4)]


def test_date_partitions_from_a_value_field_in_paris_and_a_record_without_it_goes_to_the_dlq(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("date-field")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    created = [
        "2026-03-28T23:30:00Z",  # 00:30 on the 29th in Paris (UTC+1)
        "2026-03-29T01:30:00Z",  # 03:30 in Paris: summer time began at 01:00 UTC
        None,  # no field: the DLQ
        "2026-11-24T10:15:00+01:00",  # an offset of its own
    ]
    for i, when in enumerate(created):
        value: dict[str, Any] = {"id": i}
        if when is not None:
            value["created"] = when
        producer.produce(topic, key=b"k", value=json.dumps(value))
    producer.flush(10)
    text = (
        f"INSERT INTO bkt:p SELECT * FROM `{topic}` "  # noqa: S608
        "PARTITIONBY _date.`'date='uuuu-MM-dd/'hour='HH` STOREAS `JSON` "
        "PROPERTIES('flush.interval'=1, 'partition.include.keys'=false, "
        "'timestamp.field'='_value.created', 'timezone'='Europe/Paris')"
    )
    props = base_props(topic, tmp_path, text)
    props.update({"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq})

    def placed() -> dict[str, list[int]]:
        out: dict[str, list[int]] = {}
        for f in local_files(tmp_path, "bkt", "p"):
            directory = f.parent.relative_to(tmp_path / "bkt" / "p").as_posix()
            out.setdefault(directory, []).extend(r["id"] for r in decode(f.read_bytes(), "JSON"))
        return out

    run_until(props, kafka_bootstrap, lambda: sum(map(len, placed().values())) >= 3, "3 placed rows")
    paris = ZoneInfo("Europe/Paris")
    expected: dict[str, list[int]] = {}
    for i, when in enumerate(created):
        if when is None:
            continue
        local = dt.datetime.fromisoformat(when.replace("Z", "+00:00")).astimezone(paris)
        expected.setdefault(f"date={local:%Y-%m-%d}/hour={local:%H}", []).append(i)
    assert placed() == expected
    hours = ["date=2026-03-29/hour=00", "date=2026-03-29/hour=03", "date=2026-11-24/hour=10"]
    assert sorted(expected) == hours
    (dead,) = dead_letters(kafka_bootstrap, dlq, 1)
    assert json.loads(dead.value()) == {"id": 2}


def test_a_failing_transform_sends_the_consumed_message_to_the_dlq_with_its_stage(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("transform-dlq")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    for i in range(5):
        producer.produce(topic, key=b"k", value=json.dumps({"id": i, "name": f"n{i}"}))
    producer.flush(10)
    text = f"INSERT INTO bkt:p SELECT id FROM `{topic}` STOREAS `JSON` PROPERTIES('flush.interval'=1)"  # noqa: S608
    props = base_props(topic, tmp_path, text)
    props.update(
        {
            "transforms": "odd",
            "transforms.odd.type": PYTHON,
            "transforms.odd.function": f"{M}:fail_on_three",
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.context.headers.enable": "true",
        }
    )

    def rows() -> list[Any]:
        return [r for f in local_files(tmp_path, "bkt", "p") for r in decode(f.read_bytes(), "JSON")]

    run_until(props, kafka_bootstrap, lambda: len(rows()) >= 4, "4 rows")
    assert sorted(r["id"] for r in rows()) == [0, 1, 2, 4] and all(set(r) == {"id"} for r in rows())
    (dead,) = dead_letters(kafka_bootstrap, dlq, 1)
    assert json.loads(dead.value()) == {"id": 3, "name": "n3"}  # the consumed message, as it came
    headers = dict(dead.headers())
    assert headers["__connect.errors.stage"] == b"TRANSFORMATION"
    assert headers["__connect.errors.offset"] == b"3"
    assert b"three is not allowed" in headers["__connect.errors.exception.message"]
