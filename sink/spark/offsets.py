"""Where a Spark run starts, and what it tells the connector's consumer group when a batch is done.

The storage index is the truth (as for ``kcql-sink run``): a partition starts after the last
record its index says is committed; a partition without an index starts at the group's committed
offset, else where ``--starting`` says. When a job or micro-batch is done, the offsets its tasks
reached are committed to the group ``connect-<name>``, so ``kcql-sink run`` (or the worker)
resumes exactly where Spark stopped, and a later ``spark-run`` where they stopped.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import Consumer, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kcql.errors import SinkError
from kcql.model import SinkPlan
from kcql.routing import plan_for_topic
from sink.commit.index import IndexState, PartitionIndex, index_key
from sink.config.settings import ConnectorSettings
from sink.records.record import TopicPartition

if TYPE_CHECKING:
    from sink.spark.writer import TaskReport

__all__ = [
    "commit_group",
    "group_id",
    "index_offsets",
    "job_committed",
    "offsets_json",
    "owed_ranges",
    "past_owed",
    "starting_offsets",
]

log = logging.getLogger(__name__)

Offsets = dict[TopicPartition, int]


def group_id(props: Mapping[str, str]) -> str:
    """The connector's consumer group, as Kafka Connect (and ``kcql-sink run``) names it."""
    return f"connect-{props['name']}"


def offsets_json(offsets: Mapping[TopicPartition, int]) -> str:
    """``{"topic": {"0": 12}}``: the form the ``kcql-kafka`` source reads."""
    out: dict[str, dict[str, int]] = {}
    for tp, offset in sorted(offsets.items()):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offset
    return json.dumps(out)


def _client(bootstrap: str, props: Mapping[str, str], group: str | None = None) -> Consumer:
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "enable.auto.commit": False,
        "group.id": group or "kcql-sink-planner",
    }
    conf.update(
        {k[len("consumer.override.") :]: v for k, v in props.items() if k.startswith("consumer.override.")}
    )
    conf["group.id"] = group or "kcql-sink-planner"
    conf["enable.auto.commit"] = False
    return Consumer(conf)


def partitions_of(bootstrap: str, props: Mapping[str, str], topics: Sequence[str]) -> list[TopicPartition]:
    """Every partition of ``topics`` (an unknown topic is an error naming it)."""
    client = _client(bootstrap, props)
    try:
        metadata = client.list_topics(timeout=15)
        out = []
        for topic in topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise SinkError(f"topic {topic!r} does not exist on {bootstrap}")
            out += [TopicPartition(topic, p) for p in sorted(described.partitions)]
        return out
    finally:
        client.close()


def _peeked(
    settings: ConnectorSettings, plans: Sequence[SinkPlan], tps: Sequence[TopicPartition]
) -> Iterator[tuple[TopicPartition, IndexState]]:
    """Each partition of ``tps`` that has an index, with its state (read, not taken over)."""
    from sink.storage import create_storage

    if not settings.exactly_once.enabled or not tps:
        return
    storage = create_storage(settings.storage)
    try:
        for tp in tps:
            plan = plan_for_topic(plans, tp.topic)
            if plan is None:
                continue
            key = index_key(settings.exactly_once.indexes_name, settings.name, tp)
            state = PartitionIndex(storage, plan.bucket, key, tp, "spark-planner").peek()
            if state is not None:
                yield tp, state
    finally:
        storage.close()


def index_offsets(
    settings: ConnectorSettings, plans: Sequence[SinkPlan], tps: Sequence[TopicPartition]
) -> Offsets:
    """Per partition with an index: the offset after its last committed record (read, not taken over)."""
    return {
        tp: state.committed_offset + 1
        for tp, state in _peeked(settings, plans, tps)
        if state.committed_offset is not None
    }


OwedRanges = dict[TopicPartition, list[tuple[int, int, str]]]
"""Per partition: each owed file's ``(first offset, last offset, final key)``."""


def owed_ranges(
    settings: ConnectorSettings, plans: Sequence[SinkPlan], tps: Sequence[TopicPartition]
) -> OwedRanges:
    """The owed files of ``tps``' indexes (read-only ``peek``, no take-over).

    An owed file is an announced conditional commit whose file went missing: the replay must
    re-produce exactly records ``firstOffset..lastOffset`` of its path as one file (see
    ``docs/exactly-once.md``). Only a run that starts anew meets one from before it (a retried
    task or a micro-batch re-run from the checkpoint has its attempt's range), so the stream
    reads them once, when it plans its first micro-batch.
    """
    out: OwedRanges = {}
    for tp, state in _peeked(settings, plans, tps):
        for owed in state.owed:
            first = owed.first_offset if owed.first_offset is not None else owed.committed_after + 1
            out.setdefault(tp, []).append((first, owed.last_offset, owed.final_key))
    return out


def past_owed(ends: Offsets, owed: OwedRanges) -> Offsets:
    """``ends`` with an end that falls inside an owed file's range moved just past it.

    A micro-batch that ends inside that range cannot re-produce the file and its task would stop
    with a CommitError; ending after it costs a few records more than the cap (they exist: they
    were consumed before).
    """
    out = dict(ends)
    for tp, ranges in owed.items():
        for first, last, key in sorted(ranges):
            end = out.get(tp)
            if end is not None and first < end <= last:
                log.info("%s-%d: the micro-batch ends at %d, not %d: after the owed file %s",
                         tp.topic, tp.partition, last + 1, end, key)
                out[tp] = last + 1
    return out


def group_offsets(bootstrap: str, props: Mapping[str, str], tps: Sequence[TopicPartition]) -> Offsets:
    """The connector group's committed offsets (partitions without one are left out)."""
    client = _client(bootstrap, props, group_id(props))
    try:
        got = client.committed([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps], timeout=15)
        return {TopicPartition(p.topic, p.partition): p.offset for p in got if p.offset >= 0}
    finally:
        client.close()


def starting_offsets(
    settings: ConnectorSettings,
    plans: Sequence[SinkPlan],
    bootstrap: str,
    props: Mapping[str, str],
    tps: Sequence[TopicPartition],
    starting: str,
) -> tuple[Offsets, str]:
    """Where each partition starts, and the ``startingOffsets`` value for the rest.

    ``committed`` (the default): the index, else the group, else the earliest offset;
    ``earliest``/``latest``/JSON: as the ``kcql-kafka`` source reads them, but never before what
    the index says is committed (those records would only be skipped).
    """
    from_index = index_offsets(settings, plans, tps)
    if starting == "committed":
        chosen = dict(group_offsets(bootstrap, props, tps))
        chosen.update(from_index)
        return chosen, "earliest"
    return from_index if starting == "earliest" else {}, starting


def commit_group(bootstrap: str, props: Mapping[str, str], offsets: Offsets) -> Offsets:
    """Commit ``offsets`` to the connector's group; returns those Kafka accepted."""
    if not offsets:
        return {}
    client = _client(bootstrap, props, group_id(props))
    try:
        results = client.commit(
            offsets=[KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in sorted(offsets.items())],
            asynchronous=False,
        )
    except KafkaException as exc:
        log.warning(
            "committing offsets to %s failed (the next run resumes from the index): %s", group_id(props), exc
        )
        return {}
    finally:
        client.close()
    done: Offsets = {}
    for result in results or ():
        if result.error is not None:
            log.warning(
                "committing %s-%d to %s failed: %s",
                result.topic,
                result.partition,
                group_id(props),
                result.error,
            )
        else:
            done[TopicPartition(result.topic, result.partition)] = result.offset
    return done


def _lag(bootstrap: str, props: Mapping[str, str], offsets: Offsets) -> int | None:
    """Records left after ``offsets``: each partition's end as a fetch reports it (see
    :func:`sink.spark.kafka_source.fetched_ends`), less the offset reached."""
    from sink.spark.kafka_source import fetched_ends

    client = _client(bootstrap, props)
    try:
        listed = {}
        for tp, offset in offsets.items():
            _low, high = client.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition), timeout=10)
            listed[(tp.topic, tp.partition)] = max(high, offset)
    except KafkaException:
        return None
    finally:
        client.close()
    conf = {
        "bootstrap.servers": bootstrap,
        "group.id": "kcql-sink-planner",
        **{k[len("consumer.override.") :]: v for k, v in props.items() if k.startswith("consumer.override.")},
    }
    conf["group.id"] = "kcql-sink-planner"
    ends = fetched_ends(conf, listed)
    return sum(max(ends[(tp.topic, tp.partition)] - offset, 0) for tp, offset in offsets.items())


def job_committed(
    props: Mapping[str, str],
    bootstrap: str,
    reports: Sequence[TaskReport],
    batch_id: int | None,
    seconds: float,
) -> None:
    """The driver's part once a job (``batch_id`` None) or micro-batch is done: commit the offsets
    the tasks reached to the connector's group and print one progress line."""
    from sink.spark.writer import task_summary

    summary = task_summary(list(reports))
    offsets: Offsets = summary["offsets"]
    committed = commit_group(bootstrap, props, offsets)
    lag = _lag(bootstrap, props, committed) if committed else None
    rate = summary["records"] / seconds if seconds > 0 else 0.0
    label = "job" if batch_id is None else f"batch {batch_id}"
    line = (
        f"kcql-sink spark-run: {label}: {summary['records']:,} records ({summary['skipped']:,} skipped) in "
        f"{summary['files']:,} files, {rate:,.0f} records/s, {len(committed)} partitions committed to "
        f"{group_id(props)}" + ("" if lag is None else f", lag {lag:,}")
    )
    print(line, file=sys.stderr, flush=True)  # noqa: T201 - the progress a person follows
