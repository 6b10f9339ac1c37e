"""The pipeline on Spark: a connector config run as one Spark job (``--once``) or a streaming query.

``spark_run(spark, cfg, bootstrap)`` is what ``kcql-sink spark-run`` calls, and what a user's own
PySpark code calls with its own session. It plans on the driver, where each partition starts
(the storage index, else the connector group's offset, else ``starting``) and, for a backfill,
where it ends (the ends a fetch reports when the job starts, or ``ending``), and runs the Python
data source ``kcql-sink-pipeline`` (:mod:`sink.spark.pipeline_source`): one task per Kafka
partition reads its range in order, as ``kcql-kafka`` plans and reads it, and writes it in the
same process through the sink's own task (:func:`sink.spark.writer.write_runs`). The DataFrame
holds one row per partition: what its task did. When a job or micro-batch is done, the offsets
reached are committed to the group ``connect-<name>``
(:mod:`sink.spark.offsets`), so ``kcql-sink run`` picks up where Spark stopped, and the other
way round, without a gap or a duplicate.

Streaming: each micro-batch reads at most ``flush.count`` records per partition (the statement's
smallest), and the trigger defaults to its ``flush.interval``. A Spark task ends with its range,
so a micro-batch closes its files: a partition that received fewer than ``flush.count`` records
in a micro-batch gets a smaller file, at most one per trigger interval, as an idle partition does
under ``kcql-sink run``'s flush timer.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import kcql
from kcql.errors import ConfigError, SinkError
from sink.config.files import ConnectorConfig
from sink.config.settings import parse_settings
from sink.config.subscription import resolve_subscription
from sink.config.validate import validate
from sink.records.record import TopicPartition
from sink.spark.offsets import job_committed, offsets_json, partitions_of, starting_offsets

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SparkRunResult", "job_failure", "register_sources", "spark_run"]

log = logging.getLogger(__name__)

EARLIEST, LATEST = -2, -1
"""Offsets that mean "earliest" and "latest" in a ``startingOffsets`` JSON (as in Spark's Kafka source)."""


@dataclass(frozen=True)
class SparkRunResult:
    """What a run planned, and how long it took on the driver."""

    starting: dict[TopicPartition, int]
    ending: dict[TopicPartition, int] | None
    """A backfill's ending offsets; ``None`` for a stream."""
    seconds: float


def register_sources(spark: SparkSession) -> None:
    """Register ``kcql-kafka``, ``kcql-sink`` and ``kcql-sink-pipeline`` with ``spark`` (idempotent)."""
    from sink.spark.kafka_source import register
    from sink.spark.pipeline_source import PipelineSource
    from sink.spark.writer import SinkWriterSource

    register(spark)
    spark.dataSource.register(SinkWriterSource)
    spark.dataSource.register(PipelineSource)
    # A streaming query looks data sources up in the JVM thread's active session: from a Python
    # thread other than the one that built the session (a user's own scheduler, our tests) that
    # is none, and ``start()`` fails with DATA_SOURCE_NOT_FOUND. Make ``spark`` active here.
    jvm = spark.sparkContext._jvm
    if jvm is not None:
        jvm.org.apache.spark.sql.SparkSession.setActiveSession(spark._jsparkSession)


def _topics(cfg: ConnectorConfig, bootstrap: str, plans: Sequence[Any]) -> list[str]:
    topics, problems = resolve_subscription(cfg.props, plans)
    if problems:
        raise ConfigError(problems)
    if len(topics) == 1 and topics[0].startswith("^"):  # topics.regex: the topics it matches now
        from confluent_kafka.admin import AdminClient

        pattern = re.compile(topics[0])
        listed = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15).topics
        topics = sorted(t for t in listed if pattern.match(t) and not t.startswith("__"))
        if not topics:
            raise SinkError(f"topics.regex {cfg.props.get('topics.regex')!r} matches no topic on {bootstrap}")
    return topics


def _explicit(
    spec: str, tps: Sequence[TopicPartition], known: Mapping[TopicPartition, int], default: int
) -> str:
    """A ``startingOffsets``/``endingOffsets`` JSON giving every partition an offset: ``known``,
    else the user's JSON ``spec`` (when it is one), else ``default`` (-2 earliest, -1 latest)."""
    given: dict[TopicPartition, int] = {}
    if spec.strip().startswith("{"):
        try:
            for topic, parts in json.loads(spec).items():
                given.update({TopicPartition(topic, int(p)): int(o) for p, o in parts.items()})
        except (ValueError, AttributeError, TypeError) as exc:
            raise ConfigError(
                [("--starting/--ending", spec, f"not a {{topic: {{partition: offset}}}} JSON: {exc}")]
            ) from None
    elif spec == "earliest":
        default = EARLIEST
    elif spec == "latest":
        default = LATEST
    out = {tp: known.get(tp, given.get(tp, default)) for tp in tps}
    return offsets_json(out)


def _kafka_frame(
    spark: SparkSession,
    bootstrap: str,
    props: Mapping[str, str],
    topics: Sequence[str],
    stream: bool,
    **options: str,
) -> DataFrame:
    reader = spark.readStream if stream else spark.read
    reader = (
        reader.format("kcql-sink-pipeline")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", ",".join(topics))
    )
    for key, value in props.items():  # the connector's consumer overrides reach the executors' consumers
        if key.startswith("consumer.override."):
            reader = reader.option("kafka." + key[len("consumer.override.") :], value)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def spark_run(
    spark: SparkSession,
    cfg: ConnectorConfig,
    bootstrap: str,
    *,
    stream: bool = False,
    trigger: float | None = None,
    starting: str = "committed",
    ending: str = "latest",
    checkpoint: str | None = None,
    stop: threading.Event | None = None,
) -> SparkRunResult:
    """Run the connector ``cfg`` on ``spark``: a backfill to ``ending`` (default), or a stream
    until ``stop`` is set (see the module docstring).

    Raises:
        ConfigError: the config (or ``starting``/``ending``) is not valid; the job's own errors as
            Spark raises them, naming topic, partition and offset.
    """
    started = time.monotonic()
    props = dict(cfg.props)
    problems = validate(props)
    if problems:
        raise ConfigError(problems)
    if stream and not checkpoint:
        raise ConfigError(
            [("--checkpoint", "", "a stream needs a checkpoint directory (Spark's offsets live there)")]
        )
    plans = kcql.parse(props["connect.s3.kcql"])
    settings = parse_settings(props)
    topics = _topics(cfg, bootstrap, plans)
    register_sources(spark)
    from sink.spark.pipeline_source import report_of  # imports pyspark: only once a session exists

    tps = partitions_of(bootstrap, props, topics)
    known, default_spec = starting_offsets(settings, plans, bootstrap, props, tps, starting)
    start_json = _explicit(starting if starting != "committed" else default_spec, tps, known, EARLIEST)
    config_json = json.dumps({**props, "bootstrap.servers": bootstrap})
    ui = spark.sparkContext.uiWebUrl
    print(  # noqa: T201 - the first line of the progress a person follows
        f"kcql-sink spark-run {cfg.name}: {len(tps)} partitions of {', '.join(topics)}; "
        f"Spark UI {ui or 'off'}",
        file=sys.stderr,
        flush=True,
    )
    if not stream:
        from sink.spark.kafka_source import resolve_offsets

        ends = (
            {
                TopicPartition(t, p): o
                for (t, p), o in resolve_offsets(bootstrap, topics, ending, default="latest").items()
            }
            if not ending.strip().startswith("{")
            else {}
        )
        end_json = _explicit(ending, tps, ends, LATEST)
        frame = _kafka_frame(
            spark,
            bootstrap,
            props,
            topics,
            False,
            config=config_json,
            startingOffsets=start_json,
            endingOffsets=end_json,
        )
        from py4j.protocol import Py4JJavaError
        from pyspark.errors import PySparkException

        job_started = time.monotonic()
        try:
            reports = [report_of(row.asDict()) for row in frame.collect()]
        except (PySparkException, Py4JJavaError) as exc:  # a JVM trace around the executor's Python one
            raise job_failure(exc) from None
        job_committed(props, bootstrap, reports, None, time.monotonic() - job_started)
        return SparkRunResult(_decode(start_json), _decode(end_json), time.monotonic() - started)
    count = min(plan.flush.count for plan in plans)
    every = trigger if trigger is not None else float(min(plan.flush.interval for plan in plans))
    frame = _kafka_frame(
        spark,
        bootstrap,
        props,
        topics,
        True,
        config=config_json,
        startingOffsets=start_json,
        maxRecordsPerPartition=str(count),
    )

    def micro_batch_done(batch: DataFrame, batch_id: int) -> None:
        reports = [report_of(row.asDict()) for row in batch.collect()]  # runs the micro-batch's tasks
        seconds = max((report.seconds for report in reports), default=0.0)
        job_committed(props, bootstrap, reports, batch_id, seconds)

    query = (
        frame.writeStream.foreachBatch(micro_batch_done)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime=f"{every} seconds")
        .start()
    )
    try:
        while not (stop is not None and stop.is_set()):
            if query.awaitTermination(1):
                break
        failure = query.exception()
        if failure is not None:
            raise job_failure(failure)
        _between_batches(query, STOP_GRACE_SECONDS)
    finally:
        if query.isActive:
            query.stop()
    return SparkRunResult(_decode(start_json), None, time.monotonic() - started)


STOP_GRACE_SECONDS = 120.0
"""How long a stop waits for the running micro-batch to commit before cancelling it."""


def _between_batches(query: Any, grace: float) -> None:
    """Wait (up to ``grace`` seconds) until ``query`` is not running a micro-batch, so a stop
    lands between batches: the running one commits its offsets to the group and prints its line.
    A batch cancelled anyway is not lost: the restart replays it and the index skips its files."""
    deadline = time.monotonic() + grace
    while query.isActive and time.monotonic() < deadline:
        if not query.status.get("isTriggerActive", False):
            return
        time.sleep(0.2)


_RAISED = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception)): (.+)$", re.MULTILINE)
_OURS = ("sink.", "kcql.", "partitioners.", "formats.", "cimpl.", "confluent_kafka.", "KafkaException")


def job_failure(exc: BaseException) -> SinkError:
    """A failed Spark job as the error ``kcql-sink run`` would give: the sink's own exception
    raised in the executor (naming topic, partition and offset), without the JVM's and the
    Python worker's stack traces around it; Spark's first line when none of ours is found."""
    text = str(exc)
    for name, message in _RAISED.findall(text):
        if name.startswith(_OURS):
            return SinkError(f"the Spark job failed: {message.strip()}")
    first = text.strip().splitlines()[0] if text.strip() else type(exc).__name__
    return SinkError(f"the Spark job failed: {first[:500]}")


def _decode(text: str) -> dict[TopicPartition, int]:
    return {TopicPartition(t, int(p)): o for t, parts in json.loads(text).items() for p, o in parts.items()}
