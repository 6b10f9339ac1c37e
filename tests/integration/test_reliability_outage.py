"""Outages that last: the broker killed for a minute, the object store stopped for two.

``kcql-sink run`` runs as a real process while a producer writes at a steady rate. Mid-run the
broker (a Tansu that keeps its data on S3, restarted on the same port) or the SeaweedFS the sink
writes to (restarted on the same ports with the same data directory) goes away and comes back.
The sink must ride it out by itself: every record in storage exactly once (independent read-back
against what the topic holds), a clean exit on SIGTERM afterwards, and a log a person can read:
the outage said once, a reminder at most every 30 s, its end said once, not a line per poll.

The full-length runs (60 s broker, 120 s storage, and THROW) are marked ``chaos``; short outages
of the same shape run in ``make test``.
"""

from __future__ import annotations

import math
import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.crash import _stop, start_sink
from chaos.reader import compare, read_s3
from tests.integration._outage_support import (
    RestartableSeaweed,
    RestartableTansu,
    SteadyProducer,
    connector_config,
    topic_contents,
    wait_until,
)

PARTITIONS = 2
RATE = 100.0
"""Records per second the producer writes during a run."""


def _topic(bootstrap: str) -> str:
    name = f"outage-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)])[name].result(timeout=20)
    return name


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _files(client: Any, bucket: str) -> int:
    return read_s3(client, bucket, "data")[1]


def _ride_out(proc: Any, seconds: float, began: float, log_path: Path) -> None:
    """Keep the outage for ``seconds`` from ``began``, failing at once if the sink exits meanwhile."""
    while time.monotonic() - began < seconds:
        assert proc.poll() is None, f"the sink exited during the outage:\n{_text(log_path)[-3000:]}"
        time.sleep(0.5)


def _drain(client: Any, bucket: str, expected: set[tuple[str, int, int]], proc: Any, log_path: Path) -> None:
    from botocore.exceptions import BotoCoreError, ClientError

    def done() -> bool:
        assert proc.poll() is None, f"the sink exited:\n{_text(log_path)[-3000:]}"
        try:
            seen, _files = read_s3(client, bucket, "data")
        except (BotoCoreError, ClientError):  # a restarted SeaweedFS answers InternalError for a while
            return False
        return all(seen[t] for t in expected)

    wait_until(done, 180, "every record in storage", every=1.0)


def _lines(log: str, pattern: str) -> list[str]:
    return [line for line in log.splitlines() if re.search(pattern, line)]


# -- broker outage ----------------------------------------------------------------------------------


@pytest.fixture
def s3_broker(s3_endpoint: Any, s3_bucket_factory: Any, tmp_path: Path) -> Iterator[RestartableTansu]:
    """A Tansu keeping its topics and offsets on the test SeaweedFS, so it survives a SIGKILL."""
    with RestartableTansu(s3_endpoint, s3_bucket_factory("tansu"), tmp_path) as broker:
        yield broker


@pytest.mark.parametrize(
    "seconds", [pytest.param(6, id="6s"), pytest.param(60, id="60s", marks=pytest.mark.chaos)]
)
def test_the_sink_rides_out_a_broker_outage_and_says_so_once(
    s3_broker: RestartableTansu, s3_endpoint: Any, s3_client: Any, s3_bucket_factory: Any, tmp_path: Path,
    seconds: float,
) -> None:
    bucket = s3_bucket_factory("out")
    topic = _topic(s3_broker.bootstrap)
    total = int(RATE * (seconds + 8))
    producer = SteadyProducer(s3_broker.bootstrap, topic, total, RATE, PARTITIONS).start()
    config = connector_config(tmp_path, topic, bucket, s3_endpoint.connect_config())
    log_path = tmp_path / "sink.log"
    proc = start_sink(config, s3_broker.bootstrap, log_path)
    try:
        wait_until(lambda: _files(s3_client, bucket) > 0, 60, "a first committed file")
        s3_broker.kill()
        down = time.monotonic()
        wait_until(lambda: "is unreachable" in _text(log_path), 30, "the sink noticing the outage")
        _ride_out(proc, seconds, down, log_path)
        s3_broker.start()
        producer.join(120)
        expected = topic_contents(s3_broker.bootstrap, topic, PARTITIONS, total)
        assert producer.acked <= expected
        _drain(s3_client, bucket, expected, proc, log_path)
    finally:
        producer.stop()
        rc = _stop(proc)
    log = _text(log_path)
    verdict = compare(expected, read_s3(s3_client, bucket, "data")[0])
    assert verdict == {"checked": len(expected), "lost": 0, "duplicated": 0, "unexpected": 0}, verdict
    assert rc == 0 and "Traceback" not in log, log[-3000:]
    kafka = re.escape(f"Kafka at {s3_broker.bootstrap}")
    assert len(_lines(log, f"{kafka} is unreachable")) == 1, log[-3000:]
    assert len(_lines(log, f"{kafka} is back after")) == 1, log[-3000:]
    assert len(_lines(log, f"still waiting for {kafka}")) <= math.ceil(seconds / 30), log[-3000:]
    # librdkafka's own lines (a FAIL per broker connection per reconnect, ~2 a second) are folded
    client_lines = _lines(log, r" sink\.kafka\.")
    assert len(client_lines) <= 4, "\n".join(client_lines)
    print(f"[outage] broker {seconds}s: {verdict}, {len(log.splitlines())} log lines, "
          f"{len(client_lines)} from librdkafka")


# -- storage outage ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableSeaweed]:
    """A SeaweedFS of these tests' own: stopping the session's would break every other test."""
    with RestartableSeaweed(tmp_path_factory.mktemp("seaweed")) as server:
        yield server


def _storage_run(
    seaweed: RestartableSeaweed, kafka_bootstrap: str, tmp_path: Path, seconds: float, **extra: str
) -> tuple[Any, str, str, Any, SteadyProducer, Path]:
    """Start producer and sink on a fresh bucket, wait for a first file, stop SeaweedFS."""
    from sink.quickstart.embedded import make_client

    client = make_client(seaweed.endpoint)
    bucket = f"out-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    topic = _topic(kafka_bootstrap)
    total = int(RATE * (seconds + 8))
    producer = SteadyProducer(kafka_bootstrap, topic, total, RATE, PARTITIONS).start()
    storage = seaweed.endpoint.connect_config() | {"connect.s3.http.max.retries": "1"}
    config = connector_config(tmp_path, topic, bucket, storage, **extra)
    log_path = tmp_path / "sink.log"
    proc = start_sink(config, kafka_bootstrap, log_path)
    wait_until(lambda: _files(client, bucket) > 0, 60, "a first committed file")
    seaweed.stop()
    return client, bucket, topic, proc, producer, log_path


@pytest.mark.parametrize(
    # both chaos (the mark below): even the 5 s run takes ~35 s (SeaweedFS restarts slowly), more
    # than make test can spare; tests/unit/sink/test_runtime_loop.py pins pause/resume there
    "seconds",
    [pytest.param(5, id="5s"), pytest.param(120, id="120s")],
)
@pytest.mark.chaos
def test_a_storage_outage_pauses_the_partitions_and_the_sink_resumes_by_itself(
    seaweed: RestartableSeaweed, kafka_bootstrap: str, tmp_path: Path, seconds: float
) -> None:
    client, bucket, topic, proc, producer, log_path = _storage_run(
        seaweed, kafka_bootstrap, tmp_path, seconds,
        **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "2000",
           "connect.s3.max.retries": "500"},
    )
    down = time.monotonic()
    try:
        wait_until(lambda: "is unreachable" in _text(log_path), 30, "the sink noticing the outage")
        _ride_out(proc, seconds, down, log_path)
        seaweed.start()  # no probe: the sink's first write after the restart is what is tested
        restarted = time.monotonic() - down
        producer.join(120)
        expected = topic_contents(kafka_bootstrap, topic, PARTITIONS, producer.total)
        _drain(client, bucket, expected, proc, log_path)
    finally:
        producer.stop()
        rc = _stop(proc)
    log = _text(log_path)
    verdict = compare(expected, read_s3(client, bucket, "data")[0])
    assert verdict == {"checked": len(expected), "lost": 0, "duplicated": 0, "unexpected": 0}, verdict
    assert rc == 0 and "Traceback" not in log, log[-3000:]
    store = re.escape(f"S3 at {seaweed.endpoint.url}")
    down_lines = _lines(log, f"{store} is unreachable")
    assert len(down_lines) == 1, log[-3000:]
    assert "paused" in down_lines[0] and "retrying every 2000 ms" in down_lines[0], down_lines[0]
    assert len(_lines(log, f"{store} is back after")) == 1, log[-3000:]
    assert len(_lines(log, f"still waiting for {store}")) <= math.ceil(restarted / 30), log[-3000:]
    # a failed commit is retried at the retry interval, not by the flush timer every tick
    assert len(_lines(log, "flush of .* failed")) <= 2 * PARTITIONS, log[-3000:]
    # paused, not evicted: the group kept the partitions all along
    assert len(_lines(log, r"sink\.runtime\.consumer: group \S+: assigned ")) == 1, log[-3000:]
    assert not _lines(log, "partitions lost|revoking"), log[-3000:]
    lines = len(log.splitlines())
    print(f"[outage] storage {seconds}s (restarted after {restarted:.0f}s): {verdict}, {lines} log lines")


@pytest.mark.chaos
def test_throw_stops_at_a_storage_outage_naming_the_endpoint_and_a_restart_loses_nothing(
    seaweed: RestartableSeaweed, kafka_bootstrap: str, tmp_path: Path
) -> None:
    client, bucket, topic, proc, producer, log_path = _storage_run(
        seaweed, kafka_bootstrap, tmp_path, 10, **{"connect.s3.error.policy": "THROW"}
    )
    try:
        rc = proc.wait(60)
        seaweed.start()
        producer.join(120)
    finally:
        producer.stop()
        if proc.poll() is None:
            _stop(proc)
    log = _text(log_path)
    assert rc == 1 and "Traceback" not in log, log[-3000:]
    stopped = _lines(log, "stopped: ")
    assert stopped and seaweed.endpoint.url in stopped[-1], log[-3000:]  # the endpoint is named
    assert "connect.s3.error.policy=THROW" in log, log[-3000:]
    expected = topic_contents(kafka_bootstrap, topic, PARTITIONS, producer.total)
    restart_log = tmp_path / "restart.log"
    proc = start_sink(tmp_path / "connector.json", kafka_bootstrap, restart_log)
    try:
        _drain(client, bucket, expected, proc, restart_log)
    finally:
        rc = _stop(proc)
    verdict = compare(expected, read_s3(client, bucket, "data")[0])
    assert verdict == {"checked": len(expected), "lost": 0, "duplicated": 0, "unexpected": 0}, verdict
    assert rc == 0, _text(restart_log)[-3000:]
    print(f"[outage] storage THROW: exit 1 naming {seaweed.endpoint.url}, then restart: {verdict}")
