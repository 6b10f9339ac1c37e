"""The write side on Spark: each task runs the sink's own task over one Kafka partition's range.

Registered as the Python data source ``kcql-sink`` (batch and streaming writers): the rows it
receives are raw Kafka messages from the ``kcql-kafka`` source, one Spark task per Kafka
partition (the source plans it so). In the executor, :func:`write_messages` turns them back into
Messages and runs exactly what ``kcql-sink run`` runs: the converters and
:class:`~sink.records.intake.BatchBuilder`, :class:`~sink.task.SinkTask` with its partitioner,
formats, committer and storage index, and the error policy with the dead-letter queue. Nothing
of Spark's own file sink is used (its ``_spark_metadata`` log is invisible to other readers and
grows without bound).

Exactly once, whatever Spark re-runs: ``open`` takes the partition's index over (a speculative or
zombie attempt is fenced and its commit refused) and the task skips what the index says is
committed, so a retried task writes the same files and no record twice. At the end of its range
a task closes the partition, which commits its last, partial file; the driver (``commit``) then
commits the offsets the tasks reached to the connector's consumer group, so ``kcql-sink run``
resumes exactly where Spark stopped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from confluent_kafka import Message
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from sink.config.errors import parse_error_settings
from sink.events import NO_OBSERVER, NullObserver
from sink.records.converters import needs_parsed_value, record_converter
from sink.records.intake import BatchBuilder
from sink.records.record import TopicPartition
from sink.runtime.dlq import DeadLetterQueue
from sink.runtime.policy import RecordPolicy, put_tolerating
from sink.spark.messages import messages_from_arrow, runs_of_messages
from sink.transforms import parse_transforms

__all__ = ["FAULT_ENV", "PartitionDone", "SinkWriterSource", "TaskReport", "write_messages", "write_runs"]

log = logging.getLogger(__name__)

FAULT_ENV = "KCQL_SINK_SPARK_FAULT"
"""``<commit step>`` (see ``sink.commit.committer.COMMIT_STEPS``): the first attempt of every task
dies (``os._exit``) right after that step of its first commit; tests use it to prove a retried task
writes each record once. ``<step>@<partition>`` limits it to one Kafka partition."""


@dataclass
class PartitionDone:
    """What one task did for one Kafka partition."""

    topic: str
    partition: int
    next_offset: int
    """The offset after the last record handled (written or skipped by the error policy)."""
    records: int
    skipped: int


@dataclass
class TaskReport(WriterCommitMessage):
    """A task's commit message to the driver (pickled: plain values only)."""

    partitions: list[PartitionDone] = field(default_factory=list)
    files: int = 0
    seconds: float = 0.0


def _fault_hook(partition: int) -> Callable[[str], None] | None:
    """The hook :data:`FAULT_ENV` asks for, on a task's first attempt only."""
    wanted = os.environ.get(FAULT_ENV, "").strip()
    if not wanted:
        return None
    from pyspark import TaskContext

    context = TaskContext.get()
    if context is not None and context.attemptNumber() > 0:
        return None
    step, _, only = wanted.partition("@")
    if only and int(only) != partition:
        return None

    def hook(reached: str) -> None:
        if reached == step:
            log.warning("fault injection: this task dies after %s (%s)", step, FAULT_ENV)
            os._exit(17)

    return hook


class _FileCounter(NullObserver):
    """Counts the files the task commits (from the commit threads too) for the progress line."""

    def __init__(self) -> None:
        self.files = 0
        self._lock = threading.Lock()

    def file_committed(self, tp: TopicPartition, key: str, records: int, nbytes: int, seconds: float) -> None:
        with self._lock:
            self.files += 1


def write_messages(batches: Iterator[pa.RecordBatch], props: Mapping[str, str], bootstrap: str) -> TaskReport:
    """Write every raw message of ``batches`` (one Spark task's rows of Kafka messages)."""
    return write_runs(
        (run for arrow in batches for run in runs_of_messages(messages_from_arrow(arrow))), props, bootstrap
    )


def write_runs(
    runs: Iterable[tuple[str, int, list[Message]]], props: Mapping[str, str], bootstrap: str
) -> TaskReport:
    """Write runs of consecutive messages of one topic partition through the sink's own task,
    exactly as ``kcql-sink run`` does: converters, batches, partitioner, formats, committer,
    storage index, the error policy and the DLQ. At the end each partition's last file is
    committed.

    Raises what the task raises when the error policy does not tolerate it (the message names
    topic, partition and offset); Spark then retries the task, which resumes from the index.
    """
    from sink.task import SinkTask

    started = time.monotonic()
    config = dict(props)
    errors, _ = parse_error_settings(config)
    unchecked = (config.get("connect.json.validate") or "true").strip().lower() == "false"
    import kcql

    plans = kcql.parse(config["connect.s3.kcql"])
    chain = parse_transforms(config)
    converter = record_converter(config, needs_parsed_value(plans) if unchecked and not chain else None)
    builder = BatchBuilder(
        converter, null_values=errors.null_values, check_json=not unchecked,
        transforms=chain,
    )
    counter = _FileCounter()
    task = SinkTask(counter)
    task.background_commits = True
    task.start(config)
    policy = RecordPolicy(errors, NO_OBSERVER)
    if errors.dlq_topic:
        policy.dlq = DeadLetterQueue(
            bootstrap,
            errors.dlq_topic,
            config.get("name", "kcql-sink"),
            0,
            errors.dlq_context_headers,
            errors.dlq_replication_factor,
        )
    done: dict[TopicPartition, PartitionDone] = {}
    try:
        for topic, partition, run in runs:
            if not run:
                continue
            tp = TopicPartition(topic, partition)
            state = done.get(tp)
            if state is None:
                task.fault_hook = _fault_hook(partition)
                task.open([tp])
                state = done[tp] = PartitionDone(topic, partition, 0, 0, 0)
            for batch in builder.build(topic, partition, run):
                written = put_tolerating(task, batch, policy)
                state.records += written
                state.skipped += len(batch) - written
            state.next_offset = (run[-1].offset() or 0) + 1
        task.close(sorted(done))  # commits each partition's last, partial file (exactly once)
    finally:
        task.stop()
        if policy.dlq is not None:
            policy.dlq.close()
    return TaskReport(list(done.values()), counter.files, time.monotonic() - started)


def _reports(messages: list[WriterCommitMessage | None]) -> list[TaskReport]:
    return [m for m in messages if isinstance(m, TaskReport)]


class _Writer(DataSourceArrowWriter):
    def __init__(self, props: dict[str, str], bootstrap: str) -> None:
        self.props = props
        self.bootstrap = bootstrap
        self.started = time.monotonic()

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        return write_messages(iterator, self.props, self.bootstrap)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        from sink.spark.offsets import job_committed

        job_committed(self.props, self.bootstrap, _reports(messages), None, time.monotonic() - self.started)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        log.warning("the Spark job failed; what its tasks committed stays, and a rerun resumes after it")


class _StreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, props: dict[str, str], bootstrap: str) -> None:
        self.props = props
        self.bootstrap = bootstrap

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskReport:
        return write_messages(iterator, self.props, self.bootstrap)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        from sink.spark.offsets import job_committed

        reports = _reports(messages)
        # Spark may build a writer per micro-batch: the rate is over the longest task's time.
        seconds = max((report.seconds for report in reports), default=0.0)
        job_committed(self.props, self.bootstrap, reports, batchId, seconds)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        log.warning(
            "micro-batch %d aborted; the retry writes its records once (the index skips them)", batchId
        )


class SinkWriterSource(DataSource):
    """``df.write.format("kcql-sink")`` (and ``writeStream``): option ``config``, the connector's
    properties as JSON (the ``bootstrap.servers`` key among them for the offsets and the DLQ)."""

    @classmethod
    def name(cls) -> str:
        return "kcql-sink"

    def _props(self) -> tuple[dict[str, str], str]:
        props: dict[str, str] = json.loads(self.options["config"])
        return props, props.get("bootstrap.servers", "")

    def writer(self, schema: StructType, overwrite: bool) -> _Writer:
        return _Writer(*self._props())

    def streamWriter(self, schema: StructType, overwrite: bool) -> _StreamWriter:
        return _StreamWriter(*self._props())


def task_summary(reports: list[TaskReport]) -> dict[str, Any]:
    """Records, skipped records, files and the offsets reached, over a job's task reports."""
    offsets: dict[TopicPartition, int] = {}
    records = skipped = files = 0
    for report in reports:
        files += report.files
        for part in report.partitions:
            tp = TopicPartition(part.topic, part.partition)
            offsets[tp] = max(offsets.get(tp, 0), part.next_offset)
            records += part.records
            skipped += part.skipped
    return {"records": records, "skipped": skipped, "files": files, "offsets": offsets}
