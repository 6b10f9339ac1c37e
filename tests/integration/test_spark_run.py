"""``kcql-sink spark-run``: the same pipeline on Spark, the same files, exactly once, hand-over both ways.

Real Tansu, real SeaweedFS and the shared local Spark session (one JVM for the test session); the
test that kills a Spark task runs the CLI in its own process, whose master allows task retries.
Files are read back with the json module and pyarrow, never with our own reader.
"""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kcql.errors import SinkError
from partitioners import is_data_key
from sink.config.files import parse_connector_config
from sink.spark.pipeline import register_sources, spark_run
from tests.fixtures.tansu import FAST_CONSUMER
from tests.integration._run_support import RunningSink, fast_consumer_overrides, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.slow]

PARTITIONS = 12


def produce(producer: Any, topic: str, start: int, stop: int) -> None:
    for i in range(start, stop):
        body = {"id": i, "name": f"n{i}", "amount": i / 4, "country": ("DE", "FR", "GB")[i % 3]}
        producer.produce(
            topic, key=f"k{i}".encode(), value=json.dumps(body).encode(), partition=i % PARTITIONS
        )
    producer.flush(20)


def config(
    name: str, topic: str, storage: dict[str, str], fmt: str = "JSON", count: int = 25, interval: int = 600
) -> Any:
    """A count-based plan by default: 25 divides every partition's share of the backfills (100, 50),
    so ``run`` commits every record without waiting for a flush timer."""
    return parse_connector_config(
        {
            "name": name,
            "config": {
                "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
                "topics": topic,
                "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `{fmt}` "  # noqa: S608
                f"PROPERTIES('flush.count'={count}, 'flush.interval'={interval})",
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                **fast_consumer_overrides(),
                **storage,
            },
        }
    )


def local_objects(root: Path) -> dict[str, bytes]:
    base = root / "bkt"
    out = {}
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            key = (Path(dirpath) / name).relative_to(base).as_posix()
            if is_data_key(key, "p"):
                out[key] = (Path(dirpath) / name).read_bytes()
    return out


def s3_objects(client: Any, bucket: str) -> dict[str, bytes]:
    out = {}
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="p/"):
        for item in page.get("Contents", []):
            if is_data_key(item["Key"], "p"):
                out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
    return out


def rows(objects: dict[str, bytes], fmt: str) -> dict[str, list[Any]]:
    """Each file's records, read by json, fastavro or pyarrow (never by our own reader)."""
    if fmt == "JSON":
        return {k: [json.loads(line) for line in v.splitlines()] for k, v in objects.items()}
    if fmt == "AVRO":
        return {k: list(fastavro.reader(io.BytesIO(v))) for k, v in objects.items()}
    return {k: pq.read_table(io.BytesIO(v)).to_pylist() for k, v in objects.items()}


def ids(objects: dict[str, bytes], fmt: str) -> Counter[int]:
    return Counter(row["id"] for file_rows in rows(objects, fmt).values() for row in file_rows)


def run_to_end(bootstrap: str, cfg: Any, done: Callable[[], bool]) -> None:
    """``kcql-sink run`` (the real runtime and task, in a thread) until ``done``, then stopped."""
    run = RunningSink(cfg, bootstrap)
    try:
        wait_for(lambda: run.error is not None or done(), timeout=120, what="the sink caught up")
    finally:
        run.join()
    assert run.error is None, run.error


def with_name(cfg: Any, name: str) -> Any:
    return parse_connector_config({"name": name, "config": dict(cfg.props) | {"name": name}})


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET", "AVRO"])
def test_a_backfill_writes_the_objects_run_writes_local(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path, fmt
):
    topic = topic_factory("spark-backfill", partitions=PARTITIONS)
    produce(producer, topic, 0, 1200)
    by_run = config(
        f"run-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(tmp_path / "run")},
        fmt,
    )
    run_to_end(
        kafka_bootstrap, by_run, lambda: sum(ids(local_objects(tmp_path / "run"), fmt).values()) == 1200
    )
    by_spark = config(
        f"spark-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(tmp_path / "spark")},
        fmt,
    )
    result = spark_run(spark, by_spark, kafka_bootstrap)
    assert len(result.starting) == PARTITIONS
    expected, got = local_objects(tmp_path / "run"), local_objects(tmp_path / "spark")
    assert sorted(got) == sorted(expected)  # the same object keys
    if fmt == "JSON":
        assert got == expected  # byte for byte
    else:
        assert rows(got, fmt) == rows(expected, fmt)  # record for record
    assert ids(got, fmt) == Counter(range(1200))


def test_a_backfill_with_transforms_and_a_projection_writes_what_run_writes(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    """The chain runs inside the Spark tasks as in ``run``: a Python fan-out, then a projection."""
    topic = topic_factory("spark-transforms", partitions=PARTITIONS)
    produce(producer, topic, 0, 600)
    reshape = {
        "transforms": "twice",
        "transforms.twice.type": "kcql.sink.transforms.Python",
        "transforms.twice.function": "tests.unit.transforms.mappers:twice",
        "connect.s3.kcql": f"INSERT INTO bkt:p SELECT id, copy, name AS who FROM {topic} "  # noqa: S608
        "STOREAS `PARQUET` PROPERTIES('flush.count'=20, 'flush.interval'=600)",  # groups of 2 fill 20
    }

    def cfg(name: str, root: Path) -> Any:
        base = config(name, topic, {"connect.storage": "local", "connect.local.root": str(root)})
        return parse_connector_config({"name": name, "config": dict(base.props) | reshape})

    run_to_end(
        kafka_bootstrap, cfg(f"run-{uuid.uuid4().hex[:6]}", tmp_path / "run"),
        lambda: sum(ids(local_objects(tmp_path / "run"), "PARQUET").values()) == 1200,
    )
    spark_run(spark, cfg(f"spark-{uuid.uuid4().hex[:6]}", tmp_path / "spark"), kafka_bootstrap)
    expected, got = local_objects(tmp_path / "run"), local_objects(tmp_path / "spark")
    assert sorted(got) == sorted(expected)
    assert rows(got, "PARQUET") == rows(expected, "PARQUET")
    assert Counter((r["id"], r["copy"]) for f in rows(got, "PARQUET").values() for r in f) == Counter(
        (i, c) for i in range(600) for c in (0, 1)
    )
    assert {tuple(r) for f in rows(got, "PARQUET").values() for r in f} == {("id", "copy", "who")}


def test_a_backfill_on_s3_writes_the_objects_run_writes(
    kafka_bootstrap, topic_factory, producer, spark, s3_endpoint, s3_client, s3_bucket_factory
):
    topic = topic_factory("spark-s3", partitions=PARTITIONS)
    produce(producer, topic, 0, 600)
    results = {}
    for label in ("run", "spark"):
        bucket = s3_bucket_factory(label)
        cfg = config(f"{label}-{uuid.uuid4().hex[:6]}", topic, s3_endpoint.connect_config(), "PARQUET")
        cfg = parse_connector_config(
            {
                "name": cfg.name,
                "config": dict(cfg.props)
                | {"connect.s3.kcql": cfg.props["connect.s3.kcql"].replace("bkt:p", f"{bucket}:p")},
            }
        )
        if label == "run":
            run_to_end(
                kafka_bootstrap,
                cfg,
                lambda b=bucket: sum(ids(s3_objects(s3_client, b), "PARQUET").values()) == 600,
            )
        else:
            spark_run(spark, cfg, kafka_bootstrap)
        results[label] = s3_objects(s3_client, bucket)
    assert sorted(results["spark"]) == sorted(results["run"])
    assert rows(results["spark"], "PARQUET") == rows(results["run"], "PARQUET")


def test_hand_over_between_run_and_spark_run_loses_and_repeats_nothing(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    topic = topic_factory("spark-handover", partitions=PARTITIONS)
    root = tmp_path / "lake"
    cfg = config(
        f"handover-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(root)},
        count=10,
        interval=2,  # the hand-over leaves partial files: the timer closes them, wherever they end
    )

    def written() -> int:
        return sum(ids(local_objects(root), "JSON").values())

    produce(producer, topic, 0, 400)
    run_to_end(kafka_bootstrap, cfg, lambda: written() >= 360)  # 3 of every partition's 33 or 34 in files
    produce(producer, topic, 400, 800)
    spark_run(spark, cfg, kafka_bootstrap)
    produce(producer, topic, 800, 1200)
    run_to_end(kafka_bootstrap, cfg, lambda: written() == 1200)
    assert ids(local_objects(root), "JSON") == Counter(range(1200))


def test_a_spark_task_killed_mid_commit_is_retried_and_writes_each_record_once(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("spark-kill", partitions=4)
    for i in range(400):
        producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=i % 4)
    producer.flush(20)
    root = tmp_path / "lake"
    cfg = config(
        f"kill-{uuid.uuid4().hex[:6]}", topic, {"connect.storage": "local", "connect.local.root": str(root)}
    )
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"name": cfg.name, "config": cfg.props}))
    env = {**os.environ, "KCQL_SINK_SPARK_FAULT": "after-pending-recorded", "PYSPARK_PYTHON": sys.executable}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sink.cli",
            "spark-run",
            str(path),
            "--once",
            "--master",
            "local[2,4]",
            "--bootstrap-servers",
            kafka_bootstrap,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "fault injection" in done.stderr or "exited unexpectedly" in done.stderr or "crashed" in done.stderr
    )
    assert ids(local_objects(root), "JSON") == Counter(range(400))
    assert re.search(r"job: [\d,]+ records \(0 skipped\) in \d+ files", done.stderr), done.stderr[-3000:]


def test_a_stream_writes_new_records_and_resumes_from_its_checkpoint_exactly_once(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    topic = topic_factory("spark-stream", partitions=PARTITIONS)
    root = tmp_path / "lake"
    trigger, interval = 1.0, 10
    cfg = config(
        f"stream-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(root)},
        count=25,
        interval=interval,
    )
    checkpoint = str(tmp_path / "checkpoint")

    def visible() -> int:
        return sum(ids(local_objects(root), "JSON").values())

    def stream_until(total: int, during: tuple[int, int] | None = None) -> float | None:
        """Stream until ``total`` records are visible; with ``during``, those are produced once
        the stream has caught up, and the seconds until they are visible are returned."""
        stop = threading.Event()
        error: list[BaseException] = []
        latency = None

        def run() -> None:
            try:
                spark_run(
                    spark,
                    cfg,
                    kafka_bootstrap,
                    stream=True,
                    trigger=trigger,
                    checkpoint=checkpoint,
                    stop=stop,
                )
            except BaseException as exc:  # reported below
                error.append(exc)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        try:
            if during is not None:
                wait_for(lambda: bool(error) or visible() >= during[0], timeout=120, what="caught up")
                produce(producer, topic, *during)
                produced = time.monotonic()
                wait_for(
                    lambda: bool(error) or visible() >= during[1], timeout=120, what="new records visible"
                )
                latency = time.monotonic() - produced
            wait_for(lambda: bool(error) or visible() >= total, timeout=120, what=f"{total} records visible")
        finally:
            stop.set()
            thread.join(60)
        assert not error, [str(e)[:4000] for e in error]
        return latency

    produce(producer, topic, 0, 600)
    latency = stream_until(750, during=(600, 750))  # 600 from before the start, then 150 while it runs
    assert latency is not None and latency <= trigger + interval, latency
    produce(producer, topic, 750, 900)  # while no stream runs: the restart reads them from the checkpoint
    stream_until(900)
    assert ids(local_objects(root), "JSON") == Counter(range(900))


def test_the_stream_stops_on_sigterm_and_a_restart_writes_each_record_once(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("spark-sigterm", partitions=4)
    root = tmp_path / "lake"
    cfg = config(
        f"sigterm-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(root)},
        count=50,
    )
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps({"name": cfg.name, "config": cfg.props}))
    command = [
        sys.executable,
        "-m",
        "sink.cli",
        "spark-run",
        str(path),
        "--stream",
        "--trigger",
        "1",
        "--checkpoint",
        str(tmp_path / "checkpoint"),
        "--master",
        "local[2]",
        "--bootstrap-servers",
        kafka_bootstrap,
    ]
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    for start, stop in ((0, 200), (200, 400)):
        proc = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
        # read stderr while the stream runs: an undrained pipe fills (Spark's warnings, one line
        # per micro-batch) and blocks the process mid-write, which looks like a stream that stalls
        lines: list[str] = []
        stream = proc.stderr
        reader = threading.Thread(target=lambda: lines.extend(stream or ()), daemon=True)  # noqa: B023 - joined below
        reader.start()
        try:
            for i in range(start, stop):
                producer.produce(topic, value=json.dumps({"id": i}).encode(), partition=i % 4)
            producer.flush(20)
            try:
                wait_for(
                    lambda stop=stop, proc=proc: proc.poll() is not None
                    or sum(ids(local_objects(root), "JSON").values()) >= stop,
                    timeout=180,
                    what=f"{stop} records visible",
                )
            except AssertionError as exc:
                raise AssertionError(f"{exc}; spark-run said:\n{''.join(lines)[-3000:]}") from None
            assert proc.poll() is None, "".join(lines)[-3000:]  # still streaming, not crashed
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=120)
            reader.join(timeout=30)
            err = "".join(lines)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert proc.returncode == 0, err[-3000:]
        assert "Traceback" not in err, err[-3000:]  # a clean stop: no Python trace from any thread
        assert "Spark UI http" in err  # the progress a person follows: where to watch, then per micro-batch
        progress = r"batch \d+: [\d,]+ records \(0 skipped\) in [\d,]+ files, [\d,]+ records/s"
        assert re.search(progress, err), err[-3000:]
    assert ids(local_objects(root), "JSON") == Counter(range(400))


def test_the_error_policy_and_the_dlq_apply_on_spark_and_errors_name_the_record(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    topic = topic_factory("spark-errors", partitions=2)
    for i in range(40):
        value = b"\x00 not json" if (i % 2, i // 2) == (1, 3) else json.dumps({"id": i}).encode()
        producer.produce(topic, key=b"k", value=value, partition=i % 2, headers=[("origin", b"test")])
    producer.flush(20)
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"

    strict = config(
        f"strict-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(tmp_path / "strict")},
        count=5,
    )
    with pytest.raises(SinkError) as stopped:
        spark_run(spark, strict, kafka_bootstrap)
    text = str(stopped.value)
    assert f"topic {topic!r} partition 1 offset 3" in text and "errors.tolerance=all" in text
    assert "Traceback" not in text and len(text) < 2000  # a message a person reads, not a JVM dump

    tolerant = config(
        f"tolerant-{uuid.uuid4().hex[:6]}",
        topic,
        {
            "connect.storage": "local",
            "connect.local.root": str(tmp_path / "tolerant"),
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.context.headers.enable": "true",
        },
        count=5,
    )
    spark_run(spark, tolerant, kafka_bootstrap)
    assert ids(local_objects(tmp_path / "tolerant"), "JSON") == Counter(i for i in range(40) if i != 7)
    reader = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"r-{uuid.uuid4().hex}", **FAST_CONSUMER}
    )
    reader.assign([KafkaTopicPartition(dlq, 0, 0)])
    dead: list[Any] = []
    wait_for(
        lambda: (
            bool(dead.extend(m for m in reader.consume(10, timeout=0.5) if m.error() is None))
            or len(dead) >= 1
        ),
        timeout=30,
        what="the bad record on the DLQ",
    )
    reader.close()
    assert [(m.key(), m.value()) for m in dead] == [(b"k", b"\x00 not json")]
    headers = dict(dead[0].headers())
    assert headers["origin"] == b"test" and headers["__connect.errors.topic"] == topic.encode()
    assert headers["__connect.errors.partition"] == b"1" and headers["__connect.errors.offset"] == b"3"
    assert headers["__connect.errors.stage"] == b"VALUE_CONVERTER"


def test_kcql_kafka_and_the_kcql_sink_writer_compose_as_dataframes(
    kafka_bootstrap, topic_factory, producer, spark, tmp_path
):
    """The two data sources a user composes (with their own steps between, if they like) write
    what ``spark-run`` writes: the writer runs the same write path in each task."""
    register_sources(spark)  # what spark_run does; a user's own code calls it (or the two registers)
    topic = topic_factory("spark-compose", partitions=4)
    for i in range(200):
        producer.produce(topic, key=f"k{i}".encode(), value=json.dumps({"id": i}).encode(), partition=i % 4)
    producer.flush(20)
    cfg = config(
        f"compose-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(tmp_path / "frames")},
    )
    (
        spark.read.format("kcql-kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap)
        .option("subscribe", topic)
        .load()
        .write.format("kcql-sink")
        .option("config", json.dumps({**cfg.props, "bootstrap.servers": kafka_bootstrap}))
        .mode("append")
        .save()
    )
    other = config(
        f"compose-{uuid.uuid4().hex[:6]}",
        topic,
        {"connect.storage": "local", "connect.local.root": str(tmp_path / "spark-run")},
    )
    spark_run(spark, other, kafka_bootstrap)
    frames, pipeline = local_objects(tmp_path / "frames"), local_objects(tmp_path / "spark-run")
    assert frames == pipeline and ids(frames, "JSON") == Counter(range(200))
