"""The pieces between Spark's rows and the sink's task, without a broker or a JVM.

A row of the ``kcql-kafka`` source must become the Message the consumer would have handed
``kcql-sink run``: same bytes, headers, offsets and timestamp, Spark's timestampType numbering
(0 CreateTime, 1 LogAppendTime) mapped back to librdkafka's (1, 2).
"""

from __future__ import annotations

import pyarrow as pa
import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, TIMESTAMP_NOT_AVAILABLE

from sink.spark.kafka_source import KAFKA_ARROW_SCHEMA, KafkaSourceError, _parse_spec, consumer_conf
from sink.spark.messages import messages_from_arrow, runs_of_messages


def batch(rows: list[dict[str, object]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(rows, schema=KAFKA_ARROW_SCHEMA)


def row(offset: int, partition: int = 0, **changes: object) -> dict[str, object]:
    base: dict[str, object] = {
        "key": b"k",
        "value": b'{"a":1}',
        "topic": "t",
        "partition": partition,
        "offset": offset,
        "timestamp": 1_700_000_000_123_000,  # microseconds, as Spark keeps a timestamp
        "timestampType": 0,
        "headers": [],
    }
    return base | changes


def test_rows_become_the_messages_the_consumer_would_give() -> None:
    got = messages_from_arrow(
        batch(
            [
                row(7, headers=[{"key": "h", "value": b"v"}, {"key": "n", "value": None}]),
                row(8, key=None, value=None, timestampType=1),
                row(9, timestamp=None, timestampType=None),
            ]
        )
    )
    assert [m.offset() for m in got] == [7, 8, 9]
    assert got[0].key() == b"k" and got[0].value() == b'{"a":1}' and got[0].topic() == "t"
    assert got[0].headers() == [("h", b"v"), ("n", None)]
    assert got[0].timestamp() == (TIMESTAMP_CREATE_TIME, 1_700_000_000_123)
    assert got[1].key() is None and got[1].value() is None and got[1].headers() is None
    assert got[1].timestamp() == (TIMESTAMP_LOG_APPEND_TIME, 1_700_000_000_123)
    assert got[2].timestamp() == (TIMESTAMP_NOT_AVAILABLE, -1)


def test_runs_split_where_the_partition_changes() -> None:
    messages = messages_from_arrow(batch([row(0), row(1), row(0, partition=1), row(2)]))
    runs = [(t, p, [m.offset() for m in ms]) for t, p, ms in runs_of_messages(messages)]
    assert runs == [("t", 0, [0, 1]), ("t", 1, [0]), ("t", 0, [2])]


def test_the_reader_keeps_its_own_consumer_settings() -> None:
    conf = consumer_conf(
        {
            "kafka.bootstrap.servers": "b:9092",
            "kafka.security.protocol": "SASL_SSL",
            "kafka.group.id": "someone-elses",
            "kafka.enable.auto.commit": "true",
        },
        fail_on_data_loss=False,
    )
    assert conf["security.protocol"] == "SASL_SSL"  # passed through
    assert conf["group.id"] == "kcql-kafka-reader" and conf["enable.auto.commit"] is False
    assert conf["auto.offset.reset"] == "earliest" and conf["enable.partition.eof"] is True
    assert consumer_conf({"kafka.bootstrap.servers": "b"})["auto.offset.reset"] == "error"


@pytest.mark.parametrize("spec", ['{"t": {"zero": 1}}', '{"t": 5}', "[1, 2]", "newest"])
def test_an_offsets_option_that_is_no_known_form_is_named(spec: str) -> None:
    with pytest.raises(KafkaSourceError, match="startingOffsets"):
        _parse_spec(spec, "startingOffsets")


def test_offsets_json_and_the_two_words() -> None:
    assert _parse_spec('{"t": {"0": 5, "1": -2}}', "x") == {("t", 0): 5, ("t", 1): -2}
    assert _parse_spec("earliest", "x") is None and _parse_spec(" latest ", "x") is None
