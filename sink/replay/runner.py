"""The replay loop: committed files → records → transactions, with ``--follow``, ``--until`` and progress.

One pass lists every statement's committed files, skips what the position says has landed, and
produces the rest file by file, in offset order per archived partition. A transaction is committed
after ``batch`` records (at a file boundary or inside a file, which the position then records as
``partial``) and at the end of each pass. ``follow`` repeats passes every ``poll_interval`` seconds,
so files the sink commits while replay runs go out within about that long.
"""

from __future__ import annotations

import heapq
import logging
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from confluent_kafka import KafkaException

from kcql.errors import ConfigError
from kcql.replay import ReplayPlan, parse_replay
from sink.replay.archive import ArchivedRecord, list_committed, read_records
from sink.replay.position import PlanPosition, Position
from sink.replay.producer import KafkaSide, Reconciler, ReplayKafkaError
from sink.replay.progress import Progress
from sink.replay.serialise import Serialiser, build_serialiser, header_bytes
from spark_reader.catalog import DataFile
from spark_reader.storage import StorageSettings

__all__ = ["DEFAULT_POSITION_TOPIC", "ReplayOptions", "Until", "plans_from_config", "replay"]

log = logging.getLogger(__name__)

DEFAULT_POSITION_TOPIC = "_kcql-sink-replay-positions"


@dataclass(frozen=True, slots=True)
class Until:
    """Where to stop: records after this source offset, or with a later timestamp (epoch ms)."""

    offset: int | None = None
    timestamp: int | None = None

    def stops(self, rec: ArchivedRecord) -> bool:
        if self.offset is not None and rec.offset is not None and rec.offset > self.offset:
            return True
        return self.timestamp is not None and rec.timestamp is not None and rec.timestamp > self.timestamp


@dataclass
class ReplayOptions:
    """What ``kcql-sink replay`` was asked to do."""

    bootstrap: str
    name: str
    position_topic: str = DEFAULT_POSITION_TOPIC
    batch: int = 1000
    follow: bool = False
    poll_interval: float = 1.0
    idle_timeout: float | None = None
    until: Until = field(default_factory=Until)
    progress_every: float = 1.0
    producer_overrides: dict[str, Any] = field(default_factory=dict)


def plans_from_config(config: Mapping[str, Any]) -> tuple[ReplayPlan, ...]:
    """The reverse statements in ``connect.s3.kcql`` (or ``kcql``), as the Lenses S3 source reads it."""
    for key in ("connect.s3.kcql", "connect.local.kcql", "kcql"):
        for k, v in config.items():
            if str(k).lower() == key and v:
                return parse_replay(str(v))
    raise ConfigError(
        [("connect.s3.kcql", "", "required: INSERT INTO topic SELECT * FROM bucket:prefix [STOREAS fmt] ...")]
    )


def _plan_id(plan: ReplayPlan) -> str:
    return f"{plan.bucket}:{plan.prefix}"


def replay(
    config: Mapping[str, Any],
    options: ReplayOptions,
    *,
    progress_out: TextIO | None = sys.stderr,
    should_stop: Callable[[], bool] = lambda: False,
) -> Progress:
    """Replay the committed files of ``config``'s statements into Kafka, exactly once.

    Raises:
        ConfigError, KcqlError: bad configuration or statement.
        ReplayKafkaError: Kafka refused the transaction or a topic is missing.
        ArchiveError: a committed file does not decode.
    """
    plans = plans_from_config(config)
    storage = StorageSettings.from_config(config)
    key_ser = build_serialiser(config, "key")
    value_ser = build_serialiser(config, "value")
    kafka = KafkaSide(options.bootstrap, options.name, options.position_topic, options.producer_overrides)
    progress = Progress()
    try:
        return _replay(
            plans, storage, kafka, key_ser, value_ser, options, progress, progress_out, should_stop
        )
    except KafkaException as exc:
        raise ReplayKafkaError(
            f"Kafka at {options.bootstrap}: {exc.args[0].str() if exc.args else exc}"
        ) from exc
    finally:
        kafka.close()


def _replay(
    plans: Sequence[ReplayPlan],
    storage: StorageSettings,
    kafka: KafkaSide,
    key_ser: Serialiser,
    value_ser: Serialiser,
    options: ReplayOptions,
    progress: Progress,
    progress_out: TextIO | None,
    should_stop: Callable[[], bool],
) -> Progress:
    """Start (fence, read the position, reconcile), then passes until done."""
    started = time.monotonic()
    targets = {p.topic: kafka.partitions(p.topic) for p in plans}
    kafka.ensure_position_topic()
    topics_at = time.monotonic()
    kafka.init()
    fenced_at = time.monotonic()
    partitioned = {_plan_id(p): bool(p.layout.partition_by) for p in plans}
    position = kafka.read_position(partitioned)
    position_at = time.monotonic()
    if not position.found:
        # A first run: what the targets hold now is not ours. Its end offsets are committed as the
        # position (a transaction with no record of ours) before anything is produced, so a
        # restart reconciles only what comes after them, never a record that was there before.
        for topic, partitions in targets.items():
            position.targets[topic] = kafka.ends(topic, partitions)
        kafka.begin(position)
        kafka.commit(position)
    matchers = {t: Reconciler(kafka.landed_beyond(t, n, position)) for t, n in targets.items()}
    ready_at = time.monotonic()
    # where start-up time goes (each step is a broker round trip or a read to a partition's end)
    log.info(
        "replay %s ready in %.2fs: topics %.2fs, fencing %.2fs, position %.2fs (%s; %d records of %s[%d] "
        "read), reconcile %.2fs",
        options.name,
        ready_at - started,
        topics_at - started,
        fenced_at - topics_at,
        position_at - fenced_at,
        "found" if position.found else "first run",
        kafka.position_records_read,
        options.position_topic,
        kafka.position_partition,
        ready_at - position_at,
    )
    run = _Run(plans, storage, kafka, position, targets, matchers, key_ser, value_ser, options, progress)
    last_new = time.monotonic()
    while True:
        produced_files = run.one_pass(progress_out, should_stop)
        now = time.monotonic()
        if produced_files:
            last_new = now
        if not options.follow or should_stop() or run.finished:
            break
        if options.idle_timeout is not None and now - last_new >= options.idle_timeout:
            break
        deadline = now + options.poll_interval
        while time.monotonic() < deadline and not should_stop():
            time.sleep(min(0.05, options.poll_interval))
    progress.maybe_print(progress_out, 0, force=True)
    return progress


class _Run:
    """State of one replay run across passes."""

    def __init__(
        self,
        plans: Sequence[ReplayPlan],
        storage: StorageSettings,
        kafka: KafkaSide,
        position: Position,
        targets: dict[str, int],
        matchers: dict[str, Reconciler],
        key_ser: Serialiser,
        value_ser: Serialiser,
        options: ReplayOptions,
        progress: Progress,
    ) -> None:
        self.plans = plans
        self.storage = storage
        self.kafka = kafka
        self.position = position
        self.targets = targets
        self.matchers = matchers
        self.key_ser = key_ser
        self.value_ser = value_ser
        self.options = options
        self.progress = progress
        self.in_txn = 0
        self.stopped_tps: set[tuple[str, str, int]] = set()
        self.finished = False

    def _begin(self) -> None:
        if not self.in_txn:
            self.kafka.begin(self.position)
            self.in_txn = -1  # open, nothing produced yet

    def _commit(self) -> None:
        if self.in_txn:
            self.kafka.commit(self.position)
            self.in_txn = 0

    def one_pass(self, out: TextIO | None, should_stop: Callable[[], bool]) -> int:
        """Replay every committed file not yet done; returns how many files were (partly) replayed.

        Without PARTITIONBY a source partition's files hold consecutive offsets, so they go out one
        after the other. With PARTITIONBY a partition's records are spread over several files whose
        offsets interleave, so the pending files of a partition are merged by record offset (exact
        with the envelope; without it, file order).
        """
        touched = 0
        started = time.monotonic()
        records_before = self.progress.records + self.progress.recognised
        for plan in self.plans:
            pid = _plan_id(plan)
            ppos = self.position.plan(pid, bool(plan.layout.partition_by))
            batch = plan.limit or self.options.batch
            units: dict[tuple[str, int], list[DataFile]] = {}
            for f in list_committed(plan, self.storage):
                if ppos.is_done(f) or (pid, f.topic, f.partition) in self.stopped_tps:
                    continue
                units.setdefault((f.topic, f.partition), []).append(f)
            for tp, files in units.items():
                # merging needs every record's offset: only envelopes keep it with PARTITIONBY
                merge = bool(plan.layout.partition_by) and plan.layout.envelope is not None
                groups = [files] if merge else [[f] for f in files]
                for group in groups:
                    if should_stop():
                        self._commit()
                        return touched
                    touched += len(group)
                    if not self._unit(plan, pid, ppos, group, batch, out):
                        self.stopped_tps.add((pid, tp[0], tp[1]))
                        break
        self._commit()
        if touched:
            log.info(
                "replay pass: %d file(s), %d record(s) in %.2fs",
                touched,
                self.progress.records + self.progress.recognised - records_before,
                time.monotonic() - started,
            )
        if self.options.until != Until() and not self.options.follow:
            self.finished = True
        return touched

    def _unit(
        self,
        plan: ReplayPlan,
        pid: str,
        ppos: PlanPosition,
        files: list[DataFile],
        batch: int,
        out: TextIO | None,
    ) -> bool:
        """Replay ``files`` (one file, or one source partition's files merged by offset).

        Returns False when ``--until`` stopped inside them.
        """
        counts = {f.key: ppos.skip_in(f) for f in files}
        streams = []
        for n, f in enumerate(files):
            records = read_records(plan, self.storage, f)
            streams.append(
                [(r.offset if r.offset is not None else -1, n, i, r, f) for i, r in enumerate(records)][
                    counts[f.key] :
                ]
            )
        sizes = {f.key: len(s) + counts[f.key] for f, s in zip(files, streams, strict=True)}
        merged = (
            heapq.merge(*streams, key=lambda item: (item[0], item[1], item[2]))
            if len(streams) > 1
            else iter(streams[0])
        )
        nparts = self.targets[plan.topic]
        matcher = self.matchers[plan.topic]
        stopped = False
        for _off, _n, _i, rec, f in merged:
            if self.options.until.stops(rec):
                stopped = True  # this and later records of the partition stay for a later run
                break
            self._begin()
            part = rec.partition if rec.partition < nparts else rec.partition % nparts
            key = self.key_ser.serialise(plan.topic, rec.key, rec.key_schema)
            value = self.value_ser.serialise(plan.topic, rec.value, rec.value_schema)
            headers = [(n, header_bytes(v)) for n, v in rec.headers]
            already = matcher.take(part, key, value, headers, rec.timestamp)
            if already is not None:
                self.position.landed(plan.topic, part, already)
                self.progress.recognised += 1
            else:
                self.kafka.produce(plan.topic, part, key, value, headers, rec.timestamp)
                self.progress.records += 1
            counts[f.key] += 1
            if counts[f.key] == sizes[f.key]:
                ppos.file_done(f)
                self.progress.files += 1
            else:
                ppos.file_partial(f, counts[f.key])
            self.in_txn = self.in_txn + 1 if self.in_txn > 0 else 1
            if self.in_txn >= batch:
                self._commit()
                self.progress.maybe_print(out, self.options.progress_every)
        for f in files:  # empty files, and files whose every record had landed before
            if counts[f.key] == sizes[f.key] and not ppos.is_done(f):
                ppos.file_done(f)
                self.progress.files += 1
        self.progress.maybe_print(out, self.options.progress_every)
        return not stopped
