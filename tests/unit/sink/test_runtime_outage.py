"""The outage report: one line when a dependency goes, reminders at most every 30 s, one when it is back."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError

from sink.runtime.outage import KafkaClientLog, OutageReport


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _messages(caplog: pytest.LogCaptureFixture, level: int = logging.INFO) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= level]


def test_an_outage_is_said_once_reminded_every_30_s_and_its_end_said(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = Clock()
    report = OutageReport("S3 at http://s3:9000", logging.getLogger("t.outage"), clock=clock)
    caplog.set_level(logging.DEBUG, "t.outage")
    for _ in range(100):  # a failure every 0.5 s for 50 s
        report.failed("connection refused", "2 partitions paused")
        clock.now += 0.5
    lines = _messages(caplog)
    assert lines[0] == "S3 at http://s3:9000 is unreachable: connection refused; 2 partitions paused"
    assert len(lines) == 2
    assert lines[1].startswith("still waiting for S3 at http://s3:9000 after 30 s (61 failed")
    assert report.down
    assert report.recovered("resuming") and not report.down
    assert _messages(caplog)[-1] == "S3 at http://s3:9000 is back after 50 s (100 failed attempts); resuming"
    assert not report.recovered()  # no outage, nothing to say
    report.failed("refused again", "paused")  # a new outage is said again
    assert _messages(caplog)[-1].endswith("is unreachable: refused again; paused") and report.outages == 2


def test_librdkafka_lines_are_folded_into_the_outage(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    report = OutageReport("Kafka at b:9092", logging.getLogger("t.kafka"), clock=clock)
    client = KafkaClientLog(report, "t.kafka.client")
    caplog.set_level(logging.DEBUG)
    client_log = client.settings()["logger"]
    connect_failed = (
        "b:9092/bootstrap: Connect to ipv4#b:9092 failed: Connection refused (after 0ms in state CONNECT)"
    )
    for _ in range(50):
        client_log.log(logging.ERROR, "%s [%s] %s", "FAIL", "rdkafka#consumer-1", connect_failed)
        client.on_error(KafkaError(KafkaError._TRANSPORT, "b:9092: Connect failed"))
        clock.now += 0.2
    client.on_error(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    doing = "the consumer keeps polling and reconnects by itself"
    warned = _messages(caplog, logging.WARNING)
    assert warned == [f"Kafka at b:9092 is unreachable: {connect_failed}; {doing}"]
    client.up()
    assert _messages(caplog)[-1].startswith("Kafka at b:9092 is back after 10 s")
    # when the broker is up, a repeating client line is logged at most every 30 s
    before = len(caplog.records)
    for _ in range(5):
        client_log.log(logging.WARNING, "%s [%s] %s", "REQTMOUT", "rdkafka#c-1", "Timed out (after 5ms)")
    assert len(caplog.records) - before == 1
    clock.now += 31
    client_log.log(logging.WARNING, "%s [%s] %s", "REQTMOUT", "rdkafka#consumer-1", "Timed out (after 9ms)")
    assert len(caplog.records) - before == 2


def test_a_fatal_client_error_is_kept_for_the_loop_to_stop_on() -> None:
    client = KafkaClientLog(OutageReport("Kafka", logging.getLogger("t.fatal")), "t.fatal.client")
    client.on_error(KafkaError(KafkaError._FENCED, "fenced", fatal=True))
    assert client.fatal is not None and client.fatal.code() == KafkaError._FENCED
