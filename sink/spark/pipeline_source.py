"""``kcql-sink-pipeline``: each Spark task reads one Kafka partition's range and writes it, in one process.

What ``spark-run`` runs. The ``kcql-kafka`` source and the ``kcql-sink`` writer compose as
DataFrames (and a user may put their own steps between them), but then every message crosses
from a Python worker into the JVM as a row and back out to another Python worker: on a small
machine that costs more than the writing itself. Here the task that consumes a range hands the
messages straight to :func:`~sink.spark.writer.write_runs`, the same write path the writer uses,
and the DataFrame Spark sees holds one row per Kafka partition: what the task did.

Planning (one task per Kafka partition, offsets options, the stream's per-partition cap) is the
``kcql-kafka`` source's; option ``config`` carries the connector's properties as JSON, with
``bootstrap.servers`` among them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

import kcql
from sink.config.settings import parse_settings
from sink.records.record import TopicPartition
from sink.spark.kafka_source import (
    KafkaBatchReader,
    KafkaRange,
    KafkaSourceError,
    KafkaStreamReader,
    _as_offsets,
    _from_offsets,
    consume_range,
)
from sink.spark.offsets import OwedRanges, owed_ranges, past_owed
from sink.spark.writer import PartitionDone, TaskReport, write_runs

__all__ = ["REPORT_SCHEMA", "PipelineSource", "report_of"]

REPORT_SCHEMA = (
    "topic string, partition int, next_offset long, records long, skipped long, files int, seconds double"
)
"""One row per Kafka partition a task wrote (a task writes one)."""


class _Writing:
    """``read`` for both readers: consume the range and write it; yield what was done."""

    options: dict[str, Any]
    conf: dict[str, Any]
    batch_rows: int
    quiet_ms: int

    def _props(self) -> tuple[dict[str, str], str]:
        raw = self.options.get("config")
        if not raw:
            raise KafkaSourceError(
                "kcql-sink-pipeline: option config (the connector's properties as JSON) is required"
            )
        props: dict[str, str] = json.loads(raw)
        return props, props.get("bootstrap.servers", self.conf["bootstrap.servers"])

    def read(self, partition: InputPartition) -> Iterator[tuple[Any, ...]]:
        if not isinstance(partition, KafkaRange):
            raise TypeError(f"kcql-sink-pipeline reads KafkaRange partitions, not {type(partition).__name__}")
        props, bootstrap = self._props()
        runs = (
            (partition.topic, partition.partition, messages)
            for messages in consume_range(
                partition, self.conf, batch_rows=self.batch_rows, quiet_ms=self.quiet_ms
            )
        )
        report = write_runs(runs, props, bootstrap)
        for done in report.partitions:
            yield (
                done.topic,
                done.partition,
                done.next_offset,
                done.records,
                done.skipped,
                report.files,
                report.seconds,
            )


class _PipelineBatch(_Writing, KafkaBatchReader):
    pass


class _PipelineStream(_Writing, KafkaStreamReader):
    _owed: OwedRanges | None = None

    def latestOffset(self, start: dict[str, Any], limit: Any) -> dict[str, dict[str, int]]:
        """The capped end, moved past any owed file it would cut (see
        :func:`sink.spark.offsets.past_owed`): its task could not re-produce that file."""
        capped = _from_offsets(super().latestOffset(start, limit))
        ends = {TopicPartition(t, p): o for (t, p), o in capped.items()}
        if self._owed is None:
            props, _bootstrap = self._props()
            self._owed = owed_ranges(parse_settings(props), kcql.parse(props["connect.s3.kcql"]), list(ends))
        moved = past_owed(ends, self._owed)
        return _as_offsets({(tp.topic, tp.partition): o for tp, o in moved.items()})


class PipelineSource(DataSource):
    """``format("kcql-sink-pipeline")``: the ``kcql-kafka`` options plus ``config``."""

    @classmethod
    def name(cls) -> str:
        return "kcql-sink-pipeline"

    def schema(self) -> str:
        return REPORT_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return _PipelineBatch(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _PipelineStream(self.options)


def report_of(row: Mapping[str, Any]) -> TaskReport:
    """A report row (``Row.asDict()``) as the writer's :class:`TaskReport`."""
    done = PartitionDone(row["topic"], row["partition"], row["next_offset"], row["records"], row["skipped"])
    return TaskReport([done], row["files"], row["seconds"])
