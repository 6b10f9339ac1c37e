"""The Kafka side of a sink task: consume, batch, put, and commit only what is durable.

One :class:`SinkRuntime` drives one :class:`sink.task.SinkTask` from a confluent-kafka consumer in
group ``connect-<name>``, as a Connect worker does:

* **Assignment** → ``task.open(partitions)`` returns where each partition resumes (the storage
  index is the source of truth for exactly-once), and the consumer is assigned at those offsets.
  Partitions the task has no position for start at the group's committed offset.
* **Consume** in batches; each partition's run of messages becomes batches
  (:mod:`sink.records.intake`) that go to ``task.put`` one by one. A batch is prefetched when it
  is consumed and put after the next consume(), so a format can parse it on a helper thread
  meanwhile. A record that cannot be written goes to the error policy (:mod:`sink.runtime.policy`):
  the task stops, or the record is skipped (logged, dead-lettered) and the batch goes on.
* **Commit**: every ``commit_interval`` seconds the consumed positions go through
  ``task.pre_commit``, and only the offsets it returns, which never pass data that is not yet
  committed to storage, are committed to Kafka; each partition's result is checked.
* **Revocation** → pre-commit and commit what is durable, then ``task.close(partitions)``.
* **Waiting without blocking**: a retriable storage error closes the affected partitions (their
  open files are dropped and replayed) and pauses them for ``connect.s3.retry.interval``, until
  ``connect.s3.max.retries`` failures in a row; a Schema Registry that does not answer pauses the
  partition at the record that needs it. Either way the consumer keeps polling, so the group
  does not evict the task, and the partition resumes where storage says it must.
* **Outages are reported, not echoed** (:mod:`sink.runtime.outage`): a broker or a store that
  stays away for minutes gets one line when it goes, a reminder at most every 30 s, and one line
  when it is back; librdkafka's per-reconnect lines are folded into that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kcql.errors import ConfigError, RecordError, SinkError
from sink.config.errors import parse_error_settings
from sink.config.files import ConnectorConfig
from sink.config.subscription import missing_kcql_message, resolve_subscription
from sink.config.validate import validate
from sink.events import NO_OBSERVER, SinkObserver
from sink.records.batch import RecordBatch
from sink.records.converters import needs_parsed_value, record_converter
from sink.records.intake import BatchBuilder
from sink.records.record import TopicPartition
from sink.records.scan import first_error, partition_cuts
from sink.runtime.consumer import AssignmentLog, consumer_config
from sink.runtime.dlq import DeadLetterQueue
from sink.runtime.outage import KAFKA_DOWN_CODES, KafkaClientLog, OutageReport
from sink.runtime.policy import RecordPolicy, RetryBudget, TaskFailedError, put_tolerating
from sink.storage.base import AccessDenied
from sink.transforms import parse_transforms

__all__ = ["RuntimeOptions", "SinkRuntime", "SinkTaskLike", "TaskFailedError"]

log = logging.getLogger(__name__)

HELD_POLL = 0.01
"""consume() timeout while a batch is held for its prefetch (see :meth:`SinkRuntime.feed`).

An empty consume() writes what is held, so this wait is added to the last records of a burst.
1 ms was tried (2026-11-28): JSON→PARQUET fell from 0.57 to 0.53 x bare consume (medians of five
alternated rounds), as a consumer briefly ahead of its fetches wrote its held batches before
their parse ahead was done."""

AHEAD = 2
"""consume() calls whose prefetched batches are held before the oldest is written: the helper
thread's work for a batch (an Arrow JSON parse) then has two consume() calls to finish in, not one,
so a slow slice of the helper's CPU (two cores shared by the consuming thread, librdkafka's and the
helper) is absorbed instead of waited for."""

REGISTRY_PAUSE = 2.0
"""Seconds a partition waits for an unreachable Schema Registry (``retry.interval`` if shorter)."""

_topic = Message.topic


class SinkTaskLike(Protocol):
    """What the runtime calls on a task (:class:`sink.task.SinkTask` is one)."""

    background_commits: bool
    before_commit: Callable[[], None] | None

    def start(self, config: dict[str, str]) -> None: ...
    def open(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def put(self, batch: RecordBatch) -> None: ...
    def prefetch(self, batch: RecordBatch) -> bool: ...
    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]: ...
    def close(self, partitions: list[TopicPartition]) -> None: ...
    def stop(self) -> None: ...


@dataclass(frozen=True, slots=True)
class RuntimeOptions:
    bootstrap: str
    task_id: int = 0
    batch_size: int = 2000
    poll_timeout: float = 0.2
    background_commits: bool = True
    """Let the task commit full files on threads (``SinkTask.background_commits``)."""
    commit_interval: float = 1.0
    """Seconds between pre_commit → Kafka commit rounds (``offset.flush.interval.ms``)."""
    cheap_forms: bool = True
    """``False``: batches have only the per-record view (the reference the cheap forms are
    compared with; also rules them out when debugging)."""


@dataclass(slots=True)
class _Run:
    """One partition's messages of one consume(): its batches, and the offset after the last
    message (tombstones dropped by ``behavior.on.null.values=ignore`` included)."""

    tp: TopicPartition
    batches: list[RecordBatch]
    end: int


@dataclass(slots=True)
class _Pause:
    """A paused partition: when it resumes, and whether the task must open it again first."""

    until: float
    reopen: bool
    seek: int | None = None


def _runs(messages: list[Message], one_topic: bool) -> list[tuple[str, int, list[Message]]]:
    """Split a consumed batch into runs of consecutive messages of one topic partition.

    librdkafka hands out each fetched partition's messages together, so a batch is a few long
    runs; where they change is found in one C loop (:func:`sink.records.scan.partition_cuts`).
    ``one_topic``: one topic is subscribed by name, so a run's topics need no checking.
    """
    out = []
    start = 0
    for stop in partition_cuts(messages):
        # a batch of one partition (the usual case) is its own run: no copy of it
        run = messages if stop - start == len(messages) else messages[start:stop]
        start = stop
        partition = run[0].partition() or 0
        if one_topic or len(set(map(_topic, run))) == 1:
            out.append((run[0].topic() or "", partition, run))
        else:  # several topics subscribed, same partition number in a row
            out.extend((topic or "", partition, list(sub)) for topic, sub in groupby(run, key=_topic))
    return out


class SinkRuntime:
    """Runs one task until ``stop`` is set or the task fails (see the module docstring).

    ``run`` is the whole loop. Tests and embedders can drive it step by step instead:
    :meth:`start` (optionally with their own consumer), :meth:`feed` with what a consume()
    returned, :meth:`commit`, :meth:`shutdown`.
    """

    def __init__(
        self,
        cfg: ConnectorConfig,
        options: RuntimeOptions,
        task_factory: Callable[[SinkObserver], SinkTaskLike] | None = None,
        observer: SinkObserver = NO_OBSERVER,
    ) -> None:
        import kcql

        self.cfg = cfg
        self.options = options
        self.observer = observer
        props = cfg.props
        problems = validate(props)
        if problems:
            raise ConfigError(problems)
        self.plans = kcql.parse(props["connect.s3.kcql"])
        for shadowing in kcql.shadowed(self.plans):  # as in Lenses, but said out loud
            log.warning("connect.s3.kcql: %s", shadowing.message)
        self.errors = parse_error_settings(props)[0]
        self.subscription = resolve_subscription(props, self.plans)[0]
        unchecked = (props.get("connect.json.validate") or "true").strip().lower() == "false"
        # unchecked pass-through (opt-in): JSON -> JSON need not parse values at all
        chain = parse_transforms(props)
        # transforms read the parsed value, whatever the statement writes
        needs = needs_parsed_value(self.plans) if unchecked and not chain else None
        converter = record_converter(props, needs)
        self._helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="kcql-sink-ahead")
        """The thread formats compute ahead on (Arrow parses there, without the GIL)."""
        self.builder = BatchBuilder(
            converter, null_values=self.errors.null_values, check_json=not unchecked, executor=self._helper,
            cheap_forms=options.cheap_forms, transforms=chain,
        )
        self._one_topic = len(self.subscription) == 1 and not self.subscription[0].startswith("^")
        if task_factory is None:
            from sink.task import SinkTask

            task_factory = SinkTask
        self.task: SinkTaskLike = task_factory(observer)
        self.task.background_commits = options.background_commits
        self.policy = RecordPolicy(self.errors, observer)
        self.retries = RetryBudget(self.errors.max_retries)
        self.consumer: Any = None
        self.assigned: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        """Next offset to hand to the task, per assigned partition (consumed + skipped)."""
        self.committed: dict[TopicPartition, int] = {}
        self.records_in = 0
        self._held: list[list[_Run]] = []
        """Runs of the last feed() calls (oldest first, at most :data:`AHEAD`), prefetched, unwritten."""
        self._paused: dict[TopicPartition, _Pause] = {}
        self._failure: BaseException | None = None
        self.kafka = KafkaClientLog(
            OutageReport(f"Kafka at {options.bootstrap}", log), f"sink.kafka.{cfg.name}.{options.task_id}"
        )
        """librdkafka's log lines and errors: a broker outage is said once (:mod:`sink.runtime.outage`)."""
        self.storage_outage = OutageReport(_storage_name(props), log)

    @property
    def errors_tolerated(self) -> int:
        return self.policy.tolerated

    # --- the loop ---------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set. Raises TaskFailedError (or the task's error) on failure."""
        self.start()
        next_commit = time.monotonic() + self.options.commit_interval
        try:
            while not stop.is_set():
                messages = self.consumer.consume(
                    num_messages=self.options.batch_size,
                    timeout=HELD_POLL if self._held else self.options.poll_timeout,
                )
                self.feed(messages)
                if time.monotonic() >= next_commit:
                    self.commit()
                    next_commit = time.monotonic() + self.options.commit_interval
            self.feed([])
            self.commit()
        finally:
            self.shutdown()

    def start(self, consumer: Any = None) -> None:
        """Start the task and the dead-letter queue, and subscribe ``consumer`` (default: a new one)."""
        self.task.start(dict(self.cfg.props))
        if self.errors.dlq_topic:
            self.policy.dlq = DeadLetterQueue(
                self.options.bootstrap, self.errors.dlq_topic, self.cfg.name, self.options.task_id,
                self.errors.dlq_context_headers, self.errors.dlq_replication_factor,
            )
            self.task.before_commit = self.policy.dlq.flush  # dead letters durable before files
        # while the consumer joins its group: the registry's schemas for the first batch
        self.builder.warm_up([topic for topic in self.subscription if not topic.startswith("^")])
        conf = consumer_config(self.cfg, self.options.bootstrap)
        self.assignments = AssignmentLog(conf)
        self.consumer = consumer if consumer is not None else Consumer(conf | self.kafka.settings())
        self.consumer.subscribe(
            self.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )

    def feed(self, messages: Sequence[Message]) -> None:
        """Hand what one consume() returned to the task.

        The messages become batches, which the task may prefetch; the batches of the previous
        call are put first (so their prefetch overlapped this consume()). An empty call puts
        what is held, so nothing waits on an idle topic; it also resumes paused partitions whose
        time has come.
        """
        if self._failure is not None:
            raise self._failure
        if self.kafka.fatal is not None:
            raise TaskFailedError(f"the Kafka consumer failed: {self.kafka.fatal.str()}")
        runs = self._batches(messages) if messages else []
        prefetched = False
        for run in runs:
            for batch in run.batches:
                prefetched = self.task.prefetch(batch) or prefetched
        if prefetched:
            self._held.append(runs)
            while len(self._held) > AHEAD:
                self._write(self._held.pop(0))
        else:  # nothing to wait for: what is held goes first, then these
            held, self._held = self._held, []
            for older in held:
                self._write(older)
            self._write(runs)
        self._check_background()
        self._resume_due()

    def _check_background(self) -> None:
        """Handle a commit that failed off this thread (flush timer, background commit) now, not at
        the partition's next put: an idle partition would otherwise keep its failing file, retried
        by the timer every tick while storage is down."""
        check = getattr(self.task, "raise_pending_errors", None)  # test doubles may not have it
        if check is None:
            return
        try:
            check()
        except SinkError as exc:
            if isinstance(exc, RecordError):
                raise
            tps = set(getattr(exc, "partitions", ()))
            if tps and not tps & self.assigned:
                # the partition left this task (revoked or lost) before its failed commit was
                # seen: its new owner replays from storage, nothing here to pause or stop
                log.info("a commit of %s failed after it left this task (its new owner replays it): %s",
                         ", ".join(map(str, sorted(tps))), exc)
                return
            self._storage_failure(exc, tps)

    def _batches(self, messages: Sequence[Message]) -> list[_Run]:
        # consume() gives a list, which the C loops read as it is (a copy touched every message)
        messages = messages if isinstance(messages, list) else list(messages)
        if first_error(messages) >= 0:
            messages = self._without_errors(messages)
        out = []
        for topic, partition, run in _runs(messages, self._one_topic):
            tp = TopicPartition(topic, partition)
            if tp in self.assigned and tp not in self._paused:
                end = (run[-1].offset() or 0) + 1
                out.append(_Run(tp, self.builder.build(topic, partition, run), end))
        return out

    def _write(self, runs: list[_Run]) -> None:
        for run in runs:
            if run.tp not in self.assigned or run.tp in self._paused:
                continue  # revoked, or stopped and rewound, since it was consumed
            if all(self._put(run.tp, batch) for batch in run.batches):
                self.positions[run.tp] = run.end
                processed = getattr(self.task, "processed", None)  # test doubles may not have it
                if processed is not None:
                    processed(run.tp, run.end)

    def _put(self, tp: TopicPartition, batch: RecordBatch) -> bool:
        """Put one batch through the error policy; False when the partition stopped (paused)."""
        if self.observer is not NO_OBSERVER:
            self.observer.records_consumed(tp, len(batch), batch.nbytes())
        try:
            self.records_in += put_tolerating(self.task, batch, self.policy)
        except RecordError as exc:  # transient: the record may be fine, what it needs (the registry) is not
            log.warning("%s; retrying from this record", exc)
            wait = min(self.errors.retry_interval_ms / 1000, REGISTRY_PAUSE)
            self._pause([tp], wait, seek=exc.offset)
            return False
        except SinkError as exc:
            self._storage_failure(exc, {tp, *getattr(exc, "partitions", ())})
            return False
        self.positions[tp] = batch.last_offset + 1
        self.retries.reset()
        return True

    def _without_errors(self, messages: Sequence[Message]) -> list[Message]:
        good: list[Message] = []
        for msg in messages:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.code() == KafkaError._PARTITION_EOF:
                continue
            elif err.fatal():
                raise TaskFailedError(f"the Kafka consumer failed: {err.str()}")
            else:
                self.kafka.on_error(err)  # an outage is reported once; other errors at most every 30 s
        return good

    # --- pausing, rewinding, resuming ---------------------------------------------------------------

    def _storage_failure(self, exc: SinkError, tps: set[TopicPartition]) -> None:
        """Close ``tps`` and retry after ``connect.s3.retry.interval``, or raise ``exc``."""
        tps &= self.assigned
        # Lenses' RetryErrorPolicy retries whatever failed; so do we, except what cannot change by
        # waiting (a fenced partition, a broken index). A denial (403, a missing bucket) is retried
        # too: a policy or a bucket can be fixed while the sink waits, and max.retries bounds it.
        waitable = exc.retriable or isinstance(exc, AccessDenied)
        if not (waitable and self.errors.retry_storage):
            if waitable:
                log.error("%s failed and connect.s3.error.policy=%s stops the task at the first storage "
                          "error (RETRY would pause and retry)", self.storage_outage.what, self.errors.policy)
            raise exc
        if not self.retries.spend():
            raise TaskFailedError(
                f"storage failed {self.errors.max_retries} times in a row "
                f"(connect.s3.max.retries={self.errors.max_retries}); the last error: {exc}"
            ) from exc
        self.storage_outage.failed(
            exc,
            f"{', '.join(map(str, sorted(tps)))} paused from the last commit (the consumer keeps polling, "
            f"so the group keeps them); retrying every {self.errors.retry_interval_ms} ms, "
            f"{self.retries.left} attempts left (connect.s3.max.retries)",
            "refuses the sink's requests" if isinstance(exc, AccessDenied) else "is unreachable",
        )
        self.task.close(sorted(tps))  # its open files are dropped: replayed from the last commit
        self._pause(tps, self.errors.retry_interval_ms / 1000, reopen=True)

    def _pause(self, tps: Sequence[TopicPartition] | set[TopicPartition], seconds: float,
               *, reopen: bool = False, seek: int | None = None) -> None:
        """Stop fetching ``tps`` for ``seconds`` while the consumer keeps polling."""
        until = time.monotonic() + seconds
        for tp in tps:
            self.positions.pop(tp, None)
            self._paused[tp] = _Pause(until, reopen or (tp in self._paused and self._paused[tp].reopen), seek)
        self._drop_held(self._paused)
        self.consumer.pause([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])

    def _resume_due(self) -> None:
        if not self._paused:
            return
        now = time.monotonic()
        due = sorted(tp for tp, pause in self._paused.items() if pause.until <= now)
        if not due:
            return
        reopen = [tp for tp in due if self._paused[tp].reopen]
        resume: dict[TopicPartition, int] = {}
        if reopen:
            try:
                resume = self.task.open(reopen)
            except SinkError as exc:
                self._paused.update({tp: _Pause(0, True) for tp in reopen})
                self._storage_failure(exc, set(reopen))  # pauses them again, or raises
                due = [tp for tp in due if tp not in reopen]
            else:
                self.storage_outage.recovered(f"resuming {', '.join(map(str, reopen))}")
        for tp in due:
            pause = self._paused.pop(tp)
            offset = pause.seek if pause.seek is not None else resume.get(tp, self.committed.get(tp))
            if offset is None:
                try:
                    offset = self._group_offset(tp)
                except KafkaException as exc:  # the broker is away: ask again later, still paused
                    self.kafka.on_error(exc.args[0])
                    self._paused[tp] = _Pause(now + REGISTRY_PAUSE, False)
                    continue
            ktp = KafkaTopicPartition(tp.topic, tp.partition, offset)
            self.consumer.seek(ktp)
            self.consumer.resume([ktp])

    def _group_offset(self, tp: TopicPartition) -> int:
        """The group's committed offset, else the start (never "stay where we are": that would
        skip what was consumed but not stored)."""
        got = self.consumer.committed([KafkaTopicPartition(tp.topic, tp.partition)], timeout=10)
        return got[0].offset if got and got[0].offset >= 0 else OFFSET_BEGINNING

    # --- rebalance callbacks (run inside consume()) -------------------------------------------

    def _on_assign(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        self.kafka.up()  # the group coordinator answered
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._forget(tps)
        for tp in tps:
            if not any(plan.matches_topic(tp.topic) for plan in self.plans):
                self._failure = TaskFailedError(missing_kcql_message(tp.topic))
        try:
            resume = self.task.open(tps)
        except BaseException as exc:  # noqa: BLE001 - stop the loop with this error, do not lose it
            self._failure = exc
            resume = {}
        for p, tp in zip(partitions, tps, strict=True):
            if tp in resume:
                p.offset = resume[tp]
            self.assigned.add(tp)
        self.assignments.assigned([f"{tp}@{p.offset}" for tp, p in zip(tps, partitions, strict=True)])
        consumer.assign(partitions)

    def _on_revoke(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        tps = [tp for p in partitions if (tp := TopicPartition(p.topic, p.partition)) in self.assigned]
        if not tps:
            return
        log.info("revoking %s", ", ".join(map(str, tps)))
        self._forget(tps)  # held batches are dropped: the next owner reads them again
        try:
            self.commit(only=set(tps))
        finally:
            self._close(tps)

    def _on_lost(self, consumer: Any, partitions: list[KafkaTopicPartition]) -> None:
        tps = [tp for p in partitions if (tp := TopicPartition(p.topic, p.partition)) in self.assigned]
        self._forget(tps)
        if tps:
            log.warning(
                "partitions lost (the group dropped this member: a session timeout or a broker outage; "
                "they are reassigned and resume from storage): %s", ", ".join(map(str, tps)),
            )
            self._close(tps)

    def _drop_held(self, tps: set[TopicPartition] | dict[TopicPartition, Any]) -> None:
        """Held runs of ``tps`` are not written (paused or moved: they are consumed again)."""
        kept = ([run for run in runs if run.tp not in tps] for runs in self._held)
        self._held = [runs for runs in kept if runs]

    def _forget(self, tps: Sequence[TopicPartition]) -> None:
        """Held batches and pauses of ``tps`` are stale: a rebalance moved them."""
        gone = set(tps)
        self._drop_held(gone)
        for tp in gone:
            self._paused.pop(tp, None)

    def _close(self, tps: list[TopicPartition]) -> None:
        try:
            self.task.close(tps)
        finally:
            for tp in tps:
                self.assigned.discard(tp)
                self.positions.pop(tp, None)
                self.committed.pop(tp, None)

    # --- committing offsets -------------------------------------------------------------------------

    def commit(self, only: set[TopicPartition] | None = None) -> None:
        """Commit to Kafka what the task says is in storage (of ``only``, or every partition)."""
        if self.consumer is None:
            return
        current = {tp: off for tp, off in self.positions.items() if only is None or tp in only}
        if not current:
            return
        if self.policy.dlq is not None:
            self.policy.dlq.flush()  # dead letters durable before their offsets pass (as Connect)
        safe = self.task.pre_commit(current)
        offsets = [
            KafkaTopicPartition(tp.topic, tp.partition, off)
            for tp, off in safe.items()
            if off is not None and off >= 0 and off != self.committed.get(tp) and tp in self.assigned
            and (only is None or tp in only)
        ]
        if not offsets:
            return
        try:
            results = self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            self._commit_failed(exc.args[0] if exc.args else exc, "offset commit")
            return
        done: dict[TopicPartition, int] = {}
        for result in results or ():
            tp = TopicPartition(result.topic, result.partition)
            if result.error is not None:
                self._commit_failed(result.error, f"offset commit of {tp}")
                continue
            self.committed[tp] = done[tp] = result.offset
        if done:
            self.kafka.up()
            self.observer.offsets_committed(done)

    def _commit_failed(self, error: Any, what: str) -> None:
        """A failed offset commit is retried at the next round; said once per outage, not per round."""
        if isinstance(error, KafkaError) and error.code() in KAFKA_DOWN_CODES:
            self.kafka.report.failed(f"{what} failed: {error.str()}", "offsets are committed when it is back")
        else:
            log.warning("%s failed (will retry at the next round): %s", what, error)

    def shutdown(self) -> None:
        """Close the assigned partitions, the consumer, the task and the dead-letter queue."""
        tps = sorted(self.assigned)
        try:
            if tps:
                self._close(tps)
        finally:
            try:
                if self.consumer is not None:
                    self.consumer.close()
            finally:
                try:
                    self.task.stop()
                finally:
                    self._helper.shutdown(wait=True)
                    if self.policy.dlq is not None:
                        self.policy.dlq.close()


def _storage_name(props: Any) -> str:
    """The store as a person knows it, for outage lines: ``S3 at <endpoint>`` or the local root."""
    if (props.get("connect.storage") or "s3").strip().lower() == "local":
        return f"local storage at {props.get('connect.local.root', '?')}"
    endpoint = (props.get("connect.s3.custom.endpoint") or "").strip()
    return f"S3 at {endpoint}" if endpoint else "S3"
