"""``kcql-sink run`` as a user runs it: a real process, real broker, exit codes, signals, tasks.max."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from tests.integration._run_support import decode, fast_consumer_overrides, local_files, wait_for

REPO = Path(__file__).parent.parent.parent


def start(
    config: Path, *extra: str, env: dict[str, str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    log = config.with_suffix(".log")
    proc = subprocess.Popen(
        [sys.executable, "-m", "sink.cli", "run", str(config), *extra],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        cwd=REPO,
        start_new_session=True,  # its own process group, so a test can send a terminal's Ctrl-C
        env={
            **{k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"},
            "KCQL_SINK_LOG_LEVEL": "INFO",
            **(env or {}),
        },
    )
    return proc, log


def write_config(tmp_path: Path, topic: str, **extra: str) -> Path:
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('flush.count'=5, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "out"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
        **extra,
    }
    path = tmp_path / "connector.properties"  # the third config shape, name inside
    lines = [f"name=cli-{uuid.uuid4().hex[:8]}", *(f"{k}={v}" for k, v in props.items())]
    path.write_text("\n".join(lines) + "\n")
    return path


def stop(proc: subprocess.Popen[bytes]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_every_config_problem_at_once_without_traceback_or_secrets(tmp_path):
    config = tmp_path / "bad.json"
    config.write_text(
        json.dumps(
            {
                "name": "bad",
                "config": {
                    "topics": "a,b",
                    "connect.s3.kcql": "INSERT INTO bkt:p SELECT * FROM a",
                    "connect.s3.aws.auth.mode": "Credentials",
                    "connect.s3.aws.access.key": "AKIA-visible-id",
                    "connect.s3.aws.secret.key": "super-secret-value",
                    "aws.secret.key": "another-secret-value",  # the same setting twice, differently
                    "value.converter": "io.confluent.connect.avro.AvroConverter",
                    "errors.tolerance": "sometimes",
                    "tasks.max": "zero",
                },
            }
        )
    )
    result = subprocess.run(
        [sys.executable, "-m", "sink.cli", "run", str(config)],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "KAFKA_BOOTSTRAP_SERVERS"},
        timeout=60,
        check=False,
    )
    out = result.stdout + result.stderr
    assert result.returncode == 1
    assert "Traceback" not in out and "super-secret-value" not in out and "another-secret-value" not in out
    for key in (
        "aws.secret.key",
        "bootstrap.servers",
        "tasks.max",
        "value.converter",
        "errors.tolerance",
        "topics",
    ):
        assert f"  {key}=" in out, (key, out)
    assert "Can't find the KCQL for source topic [b]" in out


def test_tasks_max_two_processes_and_ctrl_c_keep_exactly_once(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("cli-tasks", partitions=4)
    for i in range(200):
        producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=i % 4)
    producer.flush(10)
    config = write_config(tmp_path, topic, **{"tasks.max": "2"})
    proc, log = start(config, env={"KAFKA_BOOTSTRAP_SERVERS": kafka_bootstrap})  # bootstrap from the env

    def ids() -> Counter[int]:
        return Counter(
            r["id"] for f in local_files(tmp_path / "out", "bkt", "p") for r in decode(f.read_bytes(), "JSON")
        )

    try:
        wait_for(
            lambda: sum(ids().values()) >= 200 or proc.poll() is not None, timeout=90, what="200 records"
        )
        assert proc.poll() is None, log.read_text()
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole process group, children included
        rc = proc.wait(40)
    finally:
        stop(proc)
    output = log.read_text()
    assert rc == 0, output  # children ignore the group's SIGINT and stop on the parent's SIGTERM
    assert output.count("SIGTERM: stopping") == 2 and "exiting immediately" not in output
    assert "started 2 tasks" in output and "Traceback" not in output
    counts = ids()
    assert sorted(counts) == list(range(200)) and set(counts.values()) == {1}


def test_poison_record_with_tolerance_none_exits_1_naming_the_record(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("cli-poison")
    for value in (b'{"id": 0}', b"not json at all", b'{"id": 2}'):
        producer.produce(topic, value=value)
    producer.flush(10)
    config = write_config(tmp_path, topic)
    proc, log = start(config, "--bootstrap-servers", kafka_bootstrap)
    try:
        rc = proc.wait(60)
    finally:
        stop(proc)
    output = log.read_text()
    assert rc == 1, output
    assert f"topic '{topic}' partition 0 offset 1" in output
    assert "Traceback" not in output


def test_second_signal_exits_at_once(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory("cli-signal")
    config = write_config(tmp_path, topic)
    proc, log = start(config, "--bootstrap-servers", kafka_bootstrap, "--shutdown-timeout", "60")
    try:
        wait_for(
            lambda: "assigned" in log.read_text() or proc.poll() is not None, timeout=60, what="assignment"
        )
        assert proc.poll() is None, log.read_text()
        proc.send_signal(signal.SIGINT)
        proc.send_signal(signal.SIGINT)
        began = time.monotonic()
        rc = proc.wait(20)
    finally:
        stop(proc)
    assert rc in (0, 130), log.read_text()  # 0 if the graceful stop won the race, else the immediate exit
    assert time.monotonic() - began < 10
