"""Denied and missing: a wrong secret key, a bucket that does not exist, a policy that denies PutObject.

Each is a mistake a person fixes, not a fault that passes by itself, so the sink must say clearly
what was refused (the bucket, and the key when there is one) and must not hammer the store while
it waits: every request is counted at the fault proxy in front of SeaweedFS. After the fix (the
right key, the bucket created, the denial lifted) every record is in storage exactly once.

The wrong key is refused by a real SeaweedFS with an IAM config; the denying policy is the fault
proxy answering ``403 AccessDenied`` (SeaweedFS has no bucket policies to deny one action).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from chaos.crash import _stop, produce, start_sink
from chaos.proxy import FaultProxy, Rule
from chaos.reader import compare, read_s3
from sink.quickstart.embedded import make_client
from tests.integration._outage_support import RestartableSeaweed, SteadyProducer, connector_config, wait_until

PARTITIONS = 2
RECORDS = 600
DENIAL = 5.0
"""Seconds a PutObject denial lasts before it is lifted (the sink keeps running meanwhile)."""


def _topic(bootstrap: str, records: int = RECORDS) -> tuple[str, set[tuple[str, int, int]]]:
    name = f"denied-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, num_partitions=PARTITIONS)])[name].result(timeout=20)
    return name, produce(bootstrap, name, records, PARTITIONS) if records else set()


def _text(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def _exits(config: Path, bootstrap: str, log_path: Path, timeout: float = 90) -> tuple[int, str, float]:
    """Run the sink until it exits by itself: (exit code, log, seconds)."""
    began = time.monotonic()
    proc = start_sink(config, bootstrap, log_path)
    try:
        rc = proc.wait(timeout)
    finally:
        if proc.poll() is None:
            _stop(proc)
    return rc, _text(log_path), time.monotonic() - began


def _drains(config: Path, bootstrap: str, log_path: Path, client: Any, bucket: str,
            expected: set[tuple[str, int, int]]) -> None:
    """Run the sink until every expected record is stored, stop it, and check exactly once."""
    proc = start_sink(config, bootstrap, log_path)
    try:
        def done() -> bool:
            assert proc.poll() is None, _text(log_path)[-3000:]
            seen, _files = read_s3(client, bucket, "data")
            return all(seen[t] for t in expected)

        wait_until(done, 120, "every record in storage", every=1.0)
    finally:
        rc = _stop(proc)
    verdict = compare(expected, read_s3(client, bucket, "data")[0])
    assert verdict == {"checked": len(expected), "lost": 0, "duplicated": 0, "unexpected": 0}, verdict
    assert rc == 0 and "Traceback" not in _text(log_path), _text(log_path)[-3000:]


def _stopped_line(log: str) -> str:
    lines = [line for line in log.splitlines() if " stopped: " in line]
    assert lines, log[-3000:]
    return lines[-1]


@pytest.fixture(scope="module")
def iam_seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RestartableSeaweed]:
    """A SeaweedFS that checks signatures: one identity, every other key refused."""
    with RestartableSeaweed(tmp_path_factory.mktemp("iam"), iam=("sink-access", "sink-secret-key")) as server:
        yield server


def test_a_wrong_secret_key_stops_with_a_clear_error_and_the_right_key_loses_nothing(
    iam_seaweed: RestartableSeaweed, kafka_bootstrap: str, tmp_path: Path
) -> None:
    client = make_client(iam_seaweed.endpoint)
    bucket = f"denied-{uuid.uuid4().hex[:10]}"
    client.create_bucket(Bucket=bucket)
    topic, expected = _topic(kafka_bootstrap)
    with FaultProxy(iam_seaweed.endpoint.url) as proxy:
        right = iam_seaweed.endpoint.connect_config() | {"connect.s3.custom.endpoint": proxy.url}
        wrong = right | {"connect.s3.aws.secret.key": "not-the-secret"}
        retry = {"connect.s3.error.policy": "RETRY"}
        config = connector_config(tmp_path / "wrong", topic, bucket, wrong, **retry)
        rc, log, _took = _exits(config, kafka_bootstrap, tmp_path / "wrong.log")
        refused = sum(proxy.operations_of(bucket).values())
        stopped = _stopped_line(log)
        assert rc == 1 and "Traceback" not in log, log[-3000:]
        assert bucket in stopped and "403" in stopped and "connect.s3.aws.secret.key" in stopped, stopped
        assert "not-the-secret" not in log  # the secret is never logged
        assert refused <= 3, proxy.operations_of(bucket)  # no retry storm: a refusal is not retried at once
        print(f"[denied] wrong key: exit {rc}, {refused} request(s) to the bucket")
        config = connector_config(tmp_path / "right", topic, bucket, right)
        _drains(config, kafka_bootstrap, tmp_path / "right.log", client, bucket, expected)


@pytest.mark.chaos
def test_a_missing_bucket_stops_with_a_clear_error_and_after_it_is_created_nothing_is_lost(
    s3_endpoint: Any, s3_client: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    bucket = f"missing-{uuid.uuid4().hex[:10]}"
    topic, expected = _topic(kafka_bootstrap)
    with FaultProxy(s3_endpoint.url) as proxy:
        storage = s3_endpoint.connect_config() | {"connect.s3.custom.endpoint": proxy.url}
        config = connector_config(tmp_path, topic, bucket, storage, **{"connect.s3.error.policy": "RETRY"})
        rc, log, _took = _exits(config, kafka_bootstrap, tmp_path / "missing.log")
        stopped = _stopped_line(log)
        assert rc == 1 and "Traceback" not in log, log[-3000:]
        assert f"bucket {bucket!r} does not exist" in stopped, stopped
        assert sum(proxy.operations_of(bucket).values()) <= 3, proxy.operations_of(bucket)
        print(f"[denied] missing bucket: exit {rc}, {sum(proxy.operations_of(bucket).values())} request(s)")
        s3_client.create_bucket(Bucket=bucket)
        _drains(config, kafka_bootstrap, tmp_path / "created.log", s3_client, bucket, expected)


def _denial_run(
    s3_endpoint: Any, s3_client: Any, kafka_bootstrap: str, tmp_path: Path, proxy: FaultProxy, **extra: str
) -> tuple[str, SteadyProducer, Path, Any, Path]:
    """A sink writing a steady stream through ``proxy``, up to its first committed file."""
    bucket = f"denied-{uuid.uuid4().hex[:10]}"
    s3_client.create_bucket(Bucket=bucket)
    topic, _ = _topic(kafka_bootstrap, records=0)
    producer = SteadyProducer(kafka_bootstrap, topic, 2_000, 100.0, PARTITIONS).start()
    storage = s3_endpoint.connect_config() | {"connect.s3.custom.endpoint": proxy.url}
    config = connector_config(tmp_path, topic, bucket, storage, **extra)
    log_path = tmp_path / "sink.log"
    proc = start_sink(config, kafka_bootstrap, log_path)
    wait_until(lambda: read_s3(s3_client, bucket, "data")[1] > 0, 60, "a first committed file")
    return bucket, producer, config, proc, log_path


@pytest.mark.chaos  # 22 s; the logic is also covered by test_runtime_loop's denial tests
def test_a_denied_put_is_retried_at_the_retry_interval_and_resumes_when_the_policy_allows_it(
    s3_endpoint: Any, s3_client: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    with FaultProxy(s3_endpoint.url) as proxy:
        bucket, producer, _config, proc, log_path = _denial_run(
            s3_endpoint, s3_client, kafka_bootstrap, tmp_path, proxy,
            **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000",
               "connect.s3.max.retries": "50"},
        )
        try:
            rule = proxy.add(Rule("denied", method="PUT", path=rf"^/{bucket}/", times=-1))
            denied_at = time.monotonic()
            wait_until(lambda: "refuses the sink's requests" in _text(log_path), 30, "the sink reporting it")
            while time.monotonic() - denied_at < DENIAL:  # the policy stays wrong this long
                assert proc.poll() is None, _text(log_path)[-3000:]
                time.sleep(0.2)
            proxy.clear()  # the policy is fixed while the sink waits
            held = time.monotonic() - denied_at
            producer.join(60)
            expected = producer.acked

            def done() -> bool:
                assert proc.poll() is None, _text(log_path)[-3000:]
                seen = read_s3(s3_client, bucket, "data")[0]
                return all(seen[t] for t in expected)

            wait_until(done, 120, "every record in storage", every=1.0)
        finally:
            producer.stop()
            rc = _stop(proc)
    log = _text(log_path)
    verdict = compare(expected, read_s3(s3_client, bucket, "data")[0])
    assert verdict == {"checked": len(expected), "lost": 0, "duplicated": 0, "unexpected": 0}, verdict
    assert rc == 0 and "Traceback" not in log, log[-3000:]
    refused = [line for line in log.splitlines() if "refuses the sink's requests" in line]
    assert len(refused) == 1 and "AccessDenied" in refused[0] and f"s3://{bucket}/" in refused[0], refused
    assert "connect.s3.aws.secret.key" in refused[0]  # the hint: credentials or the bucket's policy
    # no retry storm: one attempt (an index PUT per partition) per retry interval, not a tight loop
    assert 2 <= rule.fired <= 4 + PARTITIONS * (held / 1.0 + 1), (rule.fired, held)
    print(f"[denied] PutObject denied {held:.1f}s: {rule.fired} PUTs refused, {verdict}")
    assert sum("is back after" in line for line in log.splitlines()) == 1, log[-3000:]


@pytest.mark.chaos
def test_a_denial_that_outlasts_max_retries_stops_with_the_bucket_and_key_and_a_restart_loses_nothing(
    s3_endpoint: Any, s3_client: Any, kafka_bootstrap: str, tmp_path: Path
) -> None:
    with FaultProxy(s3_endpoint.url) as proxy:
        bucket, producer, config, proc, log_path = _denial_run(
            s3_endpoint, s3_client, kafka_bootstrap, tmp_path, proxy,
            **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000",
               "connect.s3.max.retries": "4"},
        )
        rule = proxy.add(Rule("denied", method="PUT", path=rf"^/{bucket}/", times=-1))
        denied_at = time.monotonic()
        try:
            rc = proc.wait(120)
        finally:
            if proc.poll() is None:
                _stop(proc)
        took = time.monotonic() - denied_at
        log = _text(log_path)
        stopped = _stopped_line(log)
        assert rc == 1 and "Traceback" not in log, log[-3000:]
        assert "connect.s3.max.retries=4" in stopped and "AccessDenied" in stopped, stopped
        assert f"s3://{bucket}/" in stopped, stopped  # bucket and key of the refused PUT
        assert took >= 3.0, took  # 4 attempts, 1 s apart: backoff, not a tight loop
        assert rule.fired <= 4 * 2 * PARTITIONS + 4, rule.fired
        print(f"[denied] max.retries=4 exhausted after {took:.1f}s, {rule.fired} PUTs refused")
        proxy.clear()
        producer.join(60)
        _drains(config, kafka_bootstrap, tmp_path / "restart.log", s3_client, bucket, producer.acked)
