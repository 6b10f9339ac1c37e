"""``GET /metrics``: Prometheus text exposition of every connector's task counters.

A custom collector reads the herder at scrape time (no background thread, nothing to keep in
sync). Each worker app has its own registry, so several workers in one process (tests) never
collide.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector

from sink.rest.herder import Herder
from sink.rest.metering import LATENCY_BUCKETS

__all__ = ["HerderCollector", "make_registry", "render_metrics"]

TP_LABELS = ["connector", "task", "topic", "partition"]
STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "RESTARTING")


class HerderCollector(Collector):
    """Turns the herder's connectors, tasks and per-partition counters into metric families."""

    def __init__(self, herder: Herder) -> None:
        self.herder = herder

    def collect(self) -> Iterator[Metric]:
        p = "kcql_sink_"
        records_in = CounterMetricFamily(p + "records_in", "Records consumed from Kafka.", labels=TP_LABELS)
        bytes_in = CounterMetricFamily(
            p + "bytes_in", "Key+value bytes consumed from Kafka.", labels=TP_LABELS
        )
        records_out = CounterMetricFamily(
            p + "records_committed",
            "Records made durable in storage (committed offset advance).",
            labels=TP_LABELS,
        )
        committed = GaugeMetricFamily(
            p + "committed_offset", "Next offset durable in storage.", labels=TP_LABELS
        )
        lag = GaugeMetricFamily(
            p + "consumer_lag", "High watermark minus committed offset.", labels=TP_LABELS
        )
        files = CounterMetricFamily(
            p + "files_committed", "Files committed to storage.", labels=["connector", "task"]
        )
        bytes_out = CounterMetricFamily(
            p + "bytes_out", "Bytes written to storage.", labels=["connector", "task"]
        )
        errors = CounterMetricFamily(
            p + "records_errored", "Records skipped by errors.tolerance=all.", labels=["connector", "task"]
        )
        dlq = CounterMetricFamily(
            p + "dlq_records", "Records sent to the dead-letter topic.", labels=["connector", "task"]
        )
        failures = CounterMetricFamily(
            p + "task_failures", "Times a task FAILED.", labels=["connector", "task"]
        )
        state = GaugeMetricFamily(
            p + "task_state", "1 for the task's current state.", labels=["connector", "task", "state"]
        )
        conn_state = GaugeMetricFamily(
            p + "connector_state", "1 for the connector's state.", labels=["connector", "state"]
        )
        latency = HistogramMetricFamily(
            p + "commit_latency_seconds",
            "Time to commit one file to storage (upload, index, copy).",
            labels=["connector", "task"],
        )
        for conn in list(self.herder.connectors.values()):
            for s in ("RUNNING", "PAUSED", "STOPPED", "FAILED", "UNASSIGNED"):
                conn_state.add_metric([conn.name, s], 1.0 if conn.state == s else 0.0)
            for task in list(conn.tasks):
                ct = [conn.name, str(task.id)]
                for row in self.herder.partitions(conn, task):
                    labels = [*ct, row["topic"], str(row["partition"])]
                    records_in.add_metric(labels, row["records_in"])
                    bytes_in.add_metric(labels, row["bytes_in"])
                    records_out.add_metric(labels, row["records_committed"])
                    if row["committed_offset"] is not None:
                        committed.add_metric(labels, row["committed_offset"])
                    if row["lag"] is not None:
                        lag.add_metric(labels, row["lag"])
                m = task.metrics
                files.add_metric(ct, m.files_committed)
                bytes_out.add_metric(ct, m.bytes_out)
                errors.add_metric(ct, m.errors_tolerated)
                dlq.add_metric(ct, m.dead_lettered)
                failures.add_metric(ct, m.failures)
                for s in STATES:
                    state.add_metric([*ct, s], 1.0 if task.state == s else 0.0)
                cumulative, buckets = 0, []
                for bound, count in zip(LATENCY_BUCKETS, m.commit_buckets, strict=False):
                    cumulative += count
                    buckets.append((repr(bound), cumulative))
                buckets.append(("+Inf", m.commit_count))
                latency.add_metric(ct, buckets, m.commit_sum)
        yield from (
            records_in,
            bytes_in,
            records_out,
            committed,
            lag,
            files,
            bytes_out,
            errors,
            dlq,
            failures,
            state,
            conn_state,
            latency,
        )


def render_metrics(registry: CollectorRegistry) -> bytes:
    """The text exposition of ``registry``."""
    return generate_latest(registry)


def make_registry(herder: Herder) -> CollectorRegistry:
    """A fresh registry holding only this worker's collector."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(HerderCollector(herder))
    return registry
