"""The Kafka side of a sink task: consume, convert, put, and commit only what is durable.

One :class:`SinkRuntime` drives one :class:`sink.task.task.SinkTask` from a confluent-kafka consumer in
group ``connect-<name>`` (the group Kafka Connect would use), as a Connect worker does:

* **Assignment** → ``task.open(partitions)`` returns where each partition resumes (the storage
  index is the source of truth for exactly-once), and the consumer is assigned at those offsets.
  Partitions the task has no position for start at the group's committed offset.
* **Consume** in batches (``consume(num_messages=...)``), convert key and value, hand the records
  to ``task.put``. Records that cannot be converted or written follow the error policy
  (:mod:`sink.config.errors`): with ``errors.tolerance=all`` they are logged and/or sent to the
  dead-letter topic and skipped; otherwise the task stops with a message naming topic, partition
  and offset.
* **Commit**: every ``offset.flush.interval.ms`` (default 1 s here; Connect uses 60 s) the consumed
  positions go through ``task.pre_commit``, and only the offsets it returns, which never pass data
  that is not yet committed to storage, are committed to Kafka.
* **Revocation** → pre-commit and commit what is durable, then ``task.close(partitions)``; what
  close does with open files is the task's documented choice (the next owner replays the rest).
* **Storage errors** that are retriable rewind the affected partitions to their last commit
  (close + open + seek) and try again after ``connect.s3.retry.interval``, up to
  ``connect.s3.max.retries`` times; nothing is ever skipped or written twice because of a retry.
"""

from __future__ import annotations

import codecs
import logging
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any, Protocol

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kcql.errors import ConfigError, ConfigProblem, SinkError
from kcql.model import SinkPlan
from sink.config.errors import parse_error_settings
from sink.config.files import ConnectorConfig, mask
from sink.records.avro_block import avro_block
from sink.records.blocks import MessageBlock
from sink.records.converters import (
    BYTES_CONVERTER,
    JSON_CONVERTER,
    AvroConverter,
    ByteArrayConverter,
    ConversionError,
    JsonConverter,
    RecordConverter,
    StringConverter,
    build_converter,
    needs_parsed_value,
)
from sink.records.json_lines import json_lines
from sink.records.record import SinkRecord, TopicPartition
from sink.runtime.dlq import DeadLetterQueue


def missing_kcql_message(topic: str) -> str:
    """Lenses' text for a topic no statement reads, so users recognise it."""
    return (
        f"Can't find the KCQL for source topic [{topic}]. The topics defined via [topics] or "  # noqa: S608
        "[topics.regex] need to have an equivalent KCQL statement: "
        "INSERT INTO {DESTINATION} SELECT * FROM {TOPIC}."
    )


__all__ = ["RuntimeOptions", "SinkRuntime", "TaskFailedError", "consumer_config", "resolve_subscription"]

log = logging.getLogger(__name__)

DEFAULT_CONVERTERS = {"key.converter": BYTES_CONVERTER, "value.converter": JSON_CONVERTER}
"""Used when the config names no converter. Connect's own worker default is the JsonConverter with
schemas; a sink needs some default, and bytes-for-keys / JSON-for-values reads the commonest
topics without failing on a non-JSON key."""


SLOW_SLICE = 512
"""At most this many messages are converted one by one before the block fast path is tried again
(see :meth:`SinkRuntime._process_run`, which starts with one and doubles)."""

HELD_POLL = 0.01
"""consume() timeout while batches are held for their blocks to parse (:meth:`SinkRuntime.run`)."""

HELD_BATCHES = 1
"""Batches held at most while the next one is consumed and prepared (:meth:`SinkRuntime.run`)."""

RETRIABLE_CONVERSION_PAUSE = 2.0
"""Seconds to wait before re-reading a partition whose record could not be converted for a
retriable reason (Schema Registry unreachable); ``connect.s3.retry.interval`` when shorter."""


@dataclass(slots=True)
class _Batch:
    """A consumed batch as runs of one partition: ``(tp, messages, prepared block)``; ``tp`` is
    None for a batch put record by record as it is (blocks off)."""

    runs: list[tuple[TopicPartition | None, list[Message], MessageBlock | None]]
    prepared: int
    """How many of its blocks the task started preparing."""


def _offset(msg: Message) -> int:
    return msg.offset() or 0


def _tp(msg: Message) -> TopicPartition:
    """The partition of a consumed (non-error) message; librdkafka's Optional types narrowed."""
    return TopicPartition(msg.topic() or "", msg.partition() or 0)


def _next(msg: Message) -> int:
    """The offset after a consumed (non-error) message: what committing it means."""
    return (msg.offset() or 0) + 1


_error = Message.error
_topic = Message.topic
_partition = Message.partition


def _runs(messages: list[Message], one_topic: bool = False) -> Iterator[tuple[str, int, list[Message]]]:
    """Split a consumed batch into runs of consecutive messages of one topic partition.

    librdkafka hands out each fetched partition's messages together, so a batch is a few long
    runs; the grouping runs in C (``groupby`` with a method descriptor as key). ``one_topic``:
    the consumer subscribes to one topic by name, so a run's topics need no checking.
    """
    for partition, group in groupby(messages, key=_partition):
        run = list(group)
        if one_topic or len(set(map(_topic, run))) == 1:
            yield run[0].topic() or "", partition or 0, run
        else:  # several topics subscribed, same partition number in a row
            for topic, sub in groupby(run, key=_topic):
                yield topic or "", partition or 0, list(sub)


BlockBuilder = Callable[[str, int, list[Message]], MessageBlock | None]


def block_builder(converter: RecordConverter | None) -> BlockBuilder | None:
    """How runs of messages become blocks (:mod:`sink.records.blocks`) for this converter pair, or ``None``.

    Values must be schemaless JSON (:func:`sink.records.json_lines.json_lines`) or Confluent Avro
    (:func:`sink.records.avro_block.avro_block`); keys must be bytes (nothing can fail) or UTF-8 text
    (each key is checked as the StringConverter would). Any other key converter could reject a
    key in a way a block does not check, so such connectors convert record by record.
    """
    if converter is None:
        return None
    key, value = converter.key, converter.value
    if type(key) is ByteArrayConverter:
        check_keys = False
    elif type(key) is StringConverter and codecs.lookup(key.encoding).name == "utf-8":
        check_keys = True
    else:
        return None
    if type(value) is JsonConverter and not value.schemas_enable:
        return lambda topic, partition, run: json_lines(topic, partition, run, check_keys)
    if type(value) is AvroConverter:
        avro = value
        return lambda topic, partition, run: avro_block(topic, partition, run, check_keys, avro)
    return None


class TaskFailedError(SinkError):
    """The task stopped on an error it must not tolerate; the message says which record and why."""


class SinkTaskLike(Protocol):
    def start(self, config: dict[str, str]) -> None: ...
    def open(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]: ...
    def put(self, records: Sequence[SinkRecord]) -> None: ...
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
    """Let the task commit files the block fast path fills on a thread (``SinkTask.background_commits``)."""
    commit_interval: float = 1.0
    """Seconds between pre_commit → Kafka commit rounds (``offset.flush.interval.ms``)."""


def consumer_config(cfg: ConnectorConfig, bootstrap: str) -> dict[str, Any]:
    """librdkafka settings for the task's consumer; ``consumer.override.*`` keys pass through."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"connect-{cfg.name}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 100,
        # librdkafka (2.x) postpones a partition's next fetch by this much whenever its local
        # queue is over queued.min.messages; at the default 1000 ms a sink that writes slower
        # than Kafka delivers stalls for up to a second at a time with nothing to do
        "fetch.queue.backoff.ms": 10,
        "topic.metadata.refresh.interval.ms": 5000,
        "client.id": f"kcql-sink-{cfg.name}",
    }
    for key, value in cfg.props.items():
        if key.startswith("consumer.override."):
            conf[key[len("consumer.override.") :]] = value
    return conf


def consumer_override_problems(props: Mapping[str, str]) -> list[ConfigProblem]:
    """Check ``consumer.override.*`` values with librdkafka itself, before any task starts.

    librdkafka validates every property when a client is created, so a throwaway consumer (never
    subscribed, pointed at a closed loopback port) turns a bad override into a config problem
    naming the key, instead of a KafkaException when the task starts.
    """
    overrides = {k: v for k, v in props.items() if k.startswith("consumer.override.")}
    if not overrides:
        return []
    conf = {k[len("consumer.override.") :]: v for k, v in overrides.items()}
    conf.update({"bootstrap.servers": "127.0.0.1:9", "group.id": "kcql-sink-validation", "log_level": "0"})
    try:
        Consumer(conf).close()
    except (KafkaException, TypeError, ValueError) as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if isinstance(err, KafkaError) else str(err)
        named = re.search(r'property:? "?([\w.]+)"?', text)
        key = f"consumer.override.{named[1]}" if named else next(iter(overrides))
        return [ConfigProblem(key, mask(key, props.get(key, "")), f"librdkafka rejects it: {text}")]
    return []


def resolve_subscription(
    props: Mapping[str, str], plans: Sequence[SinkPlan]
) -> tuple[list[str], list[ConfigProblem]]:
    """The topics (or one ``^regex``) to subscribe to, and problems with topics vs KCQL sources."""
    problems: list[ConfigProblem] = []
    topics = [t.strip() for t in (props.get("topics") or "").split(",") if t.strip()]
    regex = (props.get("topics.regex") or "").strip()
    if topics and regex:
        problems.append(ConfigProblem("topics.regex", regex, "set either topics or topics.regex, not both"))
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            problems.append(ConfigProblem("topics.regex", regex, f"not a valid regular expression: {exc}"))
        return [regex if regex.startswith("^") else "^" + regex], problems
    if not topics:
        topics = [p.source for p in plans if p.source != "*"]
        if any(p.source == "*" for p in plans):
            problems.append(
                ConfigProblem(
                    "topics",
                    "",
                    "a KCQL statement reads from `*`: name the topics with topics or topics.regex",
                )
            )
    problems += [
        ConfigProblem("topics", props.get("topics", ""), missing_kcql_message(topic))
        for topic in topics
        if not any(p.matches_topic(topic) for p in plans)
    ]
    return topics, problems


class SinkRuntime:
    """Runs one task until ``stop`` is set or the task fails."""

    def __init__(
        self,
        cfg: ConnectorConfig,
        options: RuntimeOptions,
        task_factory: Callable[[], SinkTaskLike] | None = None,
    ) -> None:
        import kcql

        self.cfg = cfg
        self.options = options
        problems: list[ConfigProblem] = []
        try:
            self.plans = kcql.parse(cfg.props.get("connect.s3.kcql", ""))
        except ValueError as exc:
            problems.append(ConfigProblem("connect.s3.kcql", cfg.props.get("connect.s3.kcql", ""), str(exc)))
            self.plans = ()
        self.errors, error_problems = parse_error_settings(cfg.props)
        problems += error_problems
        self.converter = self._build_converter(problems)
        self._blocks = block_builder(self.converter)
        """Builds blocks for the fast path (see :func:`block_builder`); ``None``: record by record."""
        self._block_topics: dict[str, bool] = {}
        self.subscription, sub_problems = (
            resolve_subscription(cfg.props, self.plans) if self.plans else ([], [])
        )
        problems += sub_problems
        self._one_topic = len(self.subscription) == 1 and not self.subscription[0].startswith("^")
        """Subscribed to one topic by name (not a regex): every message comes from it."""
        problems += consumer_override_problems(cfg.props)
        if problems:
            raise ConfigError(problems)
        if task_factory is None:
            from sink.task.task import SinkTask

            task_factory = SinkTask
        self.task = task_factory()
        if hasattr(self.task, "background_commits"):
            self.task.background_commits = self.options.background_commits
        self.consumer: Consumer | None = None
        self.dlq: DeadLetterQueue | None = None
        self.assigned: set[TopicPartition] = set()
        self.positions: dict[TopicPartition, int] = {}
        """Next offset to hand to the task, per assigned partition (consumed + skipped)."""
        self.committed: dict[TopicPartition, int] = {}
        self.records_in = 0
        self.records_in_blocks = 0
        """Of ``records_in``, how many went through the block fast path (:mod:`sink.records.blocks`)."""
        self.errors_tolerated = 0
        self._pause = False
        """Set when a batch hit a retriable conversion error: pause before consuming again."""
        self._failure: BaseException | None = None
        self._held: deque[_Batch] = deque()
        """Consumed batches whose blocks are being prepared (parsed on another thread) while the
        next batches are consumed, oldest first (see :meth:`run`)."""

    def _build_converter(self, problems: list[ConfigProblem]) -> RecordConverter | None:
        props = self.cfg.props
        converters = []
        for prefix in ("key.converter", "value.converter"):
            class_name = props.get(prefix, DEFAULT_CONVERTERS[prefix])
            try:
                converters.append(build_converter(class_name, props, prefix))
            except ValueError as exc:
                problems.append(ConfigProblem(prefix, mask(prefix, class_name), str(exc)))
        if len(converters) != 2:
            return None
        # JSON → JSON without envelope/value partitioning writes the raw text: do not parse it
        return RecordConverter(converters[0], converters[1], needs_parsed_value(self.plans))

    # --- rebalance callbacks (run inside consume()) -------------------------------------------

    def _on_assign(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._forget_held(tps)
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
        log.info("assigned %s", ", ".join(f"{tp}@{p.offset}" for tp, p in zip(tps, partitions, strict=True)))
        consumer.assign(partitions)

    def _on_revoke(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        tps = [tp for p in partitions if (tp := TopicPartition(p.topic, p.partition)) in self.assigned]
        self._forget_held(tps)
        if not tps:
            return
        log.info("revoking %s", ", ".join(map(str, tps)))
        try:
            self._commit(only=set(tps))
        finally:
            self._close(tps)

    def _on_lost(self, consumer: Consumer, partitions: list[KafkaTopicPartition]) -> None:
        tps = [tp for p in partitions if (tp := TopicPartition(p.topic, p.partition)) in self.assigned]
        self._forget_held(tps)
        if not tps:
            return
        log.warning("partitions lost (another member owns them now): %s", ", ".join(map(str, tps)))
        self._close(tps)

    def _close(self, tps: list[TopicPartition]) -> None:
        try:
            self.task.close(tps)
        finally:
            for tp in tps:
                self.assigned.discard(tp)
                self.positions.pop(tp, None)
                self.committed.pop(tp, None)

    # --- the loop ---------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """Consume until ``stop`` is set. Raises TaskFailedError (or the task's error) on failure."""
        props = dict(self.cfg.props)
        self.task.start(props)
        if self.errors.dlq_topic:
            self.dlq = DeadLetterQueue(
                self.options.bootstrap,
                self.errors.dlq_topic,
                self.cfg.name,
                self.options.task_id,
                self.errors.dlq_context_headers,
                self.errors.dlq_replication_factor,
            )
        consumer = Consumer(consumer_config(self.cfg, self.options.bootstrap))
        self.consumer = consumer
        consumer.subscribe(
            self.subscription, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
        )
        next_commit = time.monotonic() + self.options.commit_interval
        try:
            while not stop.is_set():
                messages = consumer.consume(
                    num_messages=self.options.batch_size,
                    timeout=HELD_POLL if self._held else self.options.poll_timeout,
                )
                if self._failure is not None:
                    raise self._failure
                # prepared before the batches held before it are written, so it parses meanwhile
                self._advance(self._batch(messages) if messages else None)
                if time.monotonic() >= next_commit:
                    self._commit()
                    next_commit = time.monotonic() + self.options.commit_interval
            self._commit()
        finally:
            self._shutdown()

    def _advance(self, batch: _Batch | None) -> None:
        """Hold ``batch`` (``None``: the last consume() returned nothing) and write what is due.

        Batches are written in the order consumed. One whose blocks are being prepared (parsed
        on another thread) waits while up to :data:`HELD_BATCHES` later ones are consumed;
        everything held is written as soon as a batch with nothing to prepare arrives or a
        consume() comes back empty, so nothing waits on an idle topic.
        """
        held = self._held
        if batch is not None:
            held.append(batch)
        while held and (len(held) > HELD_BATCHES or batch is None or not held[-1].prepared):
            blocked = self._process_batch(held.popleft())
            if blocked:  # what later held batches have of partitions seeked back is stale
                self._forget_held(blocked)

    def _batch(self, messages: list[Message]) -> _Batch | None:
        """The batch's runs, their blocks built and handed to the task to prepare; None if empty."""
        if any(map(_error, messages)):
            messages = self._without_errors(messages)
        if not messages:
            return None
        if self._blocks is None:
            return _Batch([(None, messages, None)], 0)
        runs = [
            (TopicPartition(topic, partition), run)
            for topic, partition, run in _runs(messages, self._one_topic)
        ]
        blocks, prepared = self._prepare(runs)
        return _Batch([(tp, run, block) for (tp, run), block in zip(runs, blocks, strict=True)], prepared)

    def _process_batch(self, batch: _Batch) -> set[TopicPartition]:
        """Put a batch's records; returns the partitions seeked back or rewound meanwhile."""
        # partitions whose rest of this batch must not be handled: re-read from an earlier
        # offset (a retriable conversion error seeked back, a storage error rewound them)
        blocked: set[TopicPartition] = set()
        self._pause = False
        for tp, run, block in batch.runs:
            if tp is None:
                self._process_records(run, blocked)
            elif tp in self.assigned and tp not in blocked:
                # (else fetched before a revocation completed / behind a record to retry)
                self._process_run(tp, run, blocked, block)
        if self._pause:
            time.sleep(min(self.errors.retry_interval_ms / 1000, RETRIABLE_CONVERSION_PAUSE))
        return blocked

    def _forget_held(self, tps: Collection[TopicPartition]) -> None:
        """What the held batches have of ``tps`` is stale: a rebalance moved them (the new owner,
        maybe this task again, resumes from the last commit), or they were seeked back."""
        if self._held and tps:
            changed = set(tps)
            for batch in self._held:
                batch.runs = [item for item in batch.runs if item[0] not in changed]

    def _prepare(
        self, runs: list[tuple[TopicPartition, list[Message]]]
    ) -> tuple[list[MessageBlock | None], int]:
        """Per run, its block if its file takes blocks now, all handed to the task to prepare
        (Arrow parses them on another thread meanwhile); and how many the task prepared."""
        ready: list[MessageBlock | None] = [None] * len(runs)
        prepare = getattr(self.task, "prepare_blocks", None)
        ahead = getattr(self.task, "records_before_blocks", None)
        if prepare is None or ahead is None:
            return ready, 0
        assert self._blocks is not None  # noqa: S101 - only called when blocks are on
        for index, (tp, run) in enumerate(runs):
            if (
                tp in self.assigned
                and self._accepts_blocks(tp)
                and not ahead(tp.topic, tp.partition, _offset(run[0]))
            ):
                ready[index] = self._blocks(tp.topic, tp.partition, run)
        built = [block for block in ready if block is not None]
        return ready, int(prepare(built)) if built else 0

    def _accepts_blocks(self, tp: TopicPartition) -> bool:
        accepts = self._block_topics.get(tp.topic)
        if accepts is None:
            # optional: a task with only Connect's lifecycle methods gets SinkRecords, as always
            probe = getattr(self.task, "accepts_blocks", None)
            accepts = self._block_topics[tp.topic] = bool(probe is not None and probe(tp.topic))
        return accepts

    def _without_errors(self, messages: list[Message]) -> list[Message]:
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
                log.warning("consumer error (will retry): %s", err.str())
        return good

    def _process_run(
        self, tp: TopicPartition, run: list[Message], blocked: set[TopicPartition],
        block: MessageBlock | None = None,
    ) -> None:
        """One partition's messages: as blocks (:mod:`sink.records.blocks`) where the task takes
        them, else singly.

        Records the open file must see one by one (a Parquet file fixes its schema from its first
        row, or its first 1,000 schemaless rows) are put singly first, as the task's
        ``records_before_blocks`` says, so no block is built only to be refused. What a block
        cannot take otherwise (a tombstone or a multi-line value in it) goes through the
        per-record path a slice at a time, and the fast path is tried again after each slice.
        Slices start at one message and double up to :data:`SLOW_SLICE`: a bad record is usually
        alone.
        """
        if not self._accepts_blocks(tp):
            self._process_records(run, blocked)
            return
        ahead = getattr(self.task, "records_before_blocks", None)
        step = 1
        while run:
            needed = ahead(tp.topic, tp.partition, _offset(run[0])) if ahead is not None else 0
            if needed:  # rows the open file must see one by one (Parquet fixing its schema)
                self._process_records(run[:needed], blocked)
                if tp in blocked:
                    return
                run = run[needed:]
                block = None  # prepared for the whole run
                continue
            done = self._put_block(tp, run, blocked, block)
            block = None
            if tp in blocked:
                return
            if done:
                run = run[done:]
                if not run:
                    return
                step = 1
            self._process_records(run[:step], blocked)
            if tp in blocked:
                return
            run = run[step:]
            step = min(2 * step, SLOW_SLICE)

    def _put_block(
        self, tp: TopicPartition, run: list[Message], blocked: set[TopicPartition],
        block: MessageBlock | None = None,
    ) -> int:
        """Put ``run`` as one block (``block``, when already built); returns how many messages
        were written (a prefix)."""
        assert self._blocks is not None  # noqa: S101 - only called when blocks are on
        if block is None:
            block = self._blocks(tp.topic, tp.partition, run)
        if block is None:
            return 0
        try:
            done = self.task.put_block(block)  # type: ignore[attr-defined]
        except SinkError as exc:
            rewound = {tp, *getattr(exc, "partitions", ())}  # a background commit names its own
            self._storage_failure(exc, rewound)
            blocked.update(rewound)
            return 0
        if done:
            self.positions[tp] = _next(run[done - 1])
            self.records_in += done
            self.records_in_blocks += done
        return done

    def _process_records(self, good: list[Message], blocked: set[TopicPartition]) -> None:
        """Convert messages one by one into SinkRecords, applying the error policy, and put them."""
        assert self.converter is not None  # noqa: S101 - checked at construction
        records = []
        tps: dict[tuple[str | None, int | None], TopicPartition] = {}  # one object per partition
        for msg in good:
            tp_key = (msg.topic(), msg.partition())
            tp = tps.get(tp_key)
            if tp is None:
                tp = tps[tp_key] = _tp(msg)
            if tp not in self.assigned or tp in blocked:
                continue  # fetched before a revocation completed / behind a record to retry
            try:
                record = self.converter.convert(msg)
            except ConversionError as exc:
                if exc.is_retriable:
                    # the record is fine, the Schema Registry is not: never skip or dead-letter
                    # it; re-read the partition from this record after a pause
                    log.warning("%s; retrying from this record", exc)
                    assert self.consumer is not None  # noqa: S101
                    self.consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, _next(msg) - 1))
                    blocked.add(tp)
                    self._pause = True
                    continue
                self._tolerate(
                    msg, "KEY_CONVERTER" if "the record key" in str(exc) else "VALUE_CONVERTER", exc
                )
                self.positions[tp] = _next(msg)
                continue
            if record.value is None and record.raw_value is None:
                if self.errors.null_values == "ignore":
                    self.positions[tp] = _next(msg)
                    continue
                if self.errors.null_values == "fail":
                    self._tolerate(
                        msg,
                        "TASK_PUT",
                        TaskFailedError(
                            f"null value (tombstone) at {record.where} and behavior.on.null.values=fail"
                        ),
                    )
                    self.positions[tp] = _next(msg)
                    continue
            records.append((msg, record))
        self._put(records, blocked)

    def _put(self, pairs: list[tuple[Message, SinkRecord]], blocked: set[TopicPartition]) -> None:
        """Hand records to the task; a bad record is isolated, reported, and the rest retried."""
        while pairs:
            try:
                self.task.put([rec for _, rec in pairs])
            except SinkError as exc:
                failed = getattr(exc, "record", None)
                if failed is not None:
                    index = next((i for i, (_, rec) in enumerate(pairs) if rec is failed), None)
                    if index is not None:
                        msg = pairs[index][0]
                        self._tolerate(msg, "TASK_PUT", exc)
                        self.positions[_tp(msg)] = _next(msg)
                        self._note_positions(pairs[:index])
                        pairs = pairs[index + 1 :]
                        continue
                # a failed background commit names its partition, which may not be among these
                rewound = {_tp(m) for m, _ in pairs} | set(getattr(exc, "partitions", ()))
                self._storage_failure(exc, rewound)
                blocked.update(rewound)
                return  # the consumer re-delivers from the rewound positions
            else:
                self._note_positions(pairs)
                return

    def _storage_failure(self, exc: SinkError, tps: set[TopicPartition]) -> None:
        """Rewind ``tps`` to their last commit after a retriable storage error, or raise ``exc``."""
        if not (exc.retriable and self.errors.retry_storage and self.errors.max_retries > 0):
            raise exc
        log.warning(
            "storage error, rewinding to the last commit and retrying in %d ms: %s",
            self.errors.retry_interval_ms,
            exc,
        )
        time.sleep(self.errors.retry_interval_ms / 1000)
        self._rewind(tps)

    def _note_positions(self, pairs: list[tuple[Message, SinkRecord]]) -> None:
        # offsets rise within a partition, so only each partition's last message sets its position
        last: dict[tuple[str | None, int | None], Message] = {}
        for msg, _ in pairs:
            last[(msg.topic(), msg.partition())] = msg
        for msg in last.values():
            self.positions[_tp(msg)] = _next(msg)
        self.records_in += len(pairs)

    def _rewind(self, tps: set[TopicPartition]) -> None:
        assert self.consumer is not None  # noqa: S101
        tp_list = sorted(tps)
        self.task.close(tp_list)
        resume = self.task.open(tp_list)
        for tp in tp_list:
            offset = resume.get(tp, self.committed.get(tp))
            if offset is None:
                # no index position and nothing committed by us: the group's offset, else the start
                # (never "stay where we are": that would skip the batch that just failed)
                got = self.consumer.committed([KafkaTopicPartition(tp.topic, tp.partition)], timeout=10)
                offset = got[0].offset if got and got[0].offset >= 0 else OFFSET_BEGINNING
            self.consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, offset))
            self.positions.pop(tp, None)

    def _tolerate(self, msg: Message, stage: str, exc: BaseException) -> None:
        where = f"topic {msg.topic()!r} partition {msg.partition()} offset {msg.offset()}"
        if not self.errors.tolerate_records:
            message = str(exc) if where in str(exc) else f"{exc} ({where})"
            raise TaskFailedError(
                f"stopping on a record that cannot be written: {message}. "
                "Set errors.tolerance=all (optionally with errors.deadletterqueue.topic.name) "
                "to skip such records."
            )
        self.errors_tolerated += 1
        if self.errors.log_enable or self.dlq is None:
            log.error("skipping a record at %s (%s): %s", where, stage, exc)
        if self.dlq is not None:
            self.dlq.send(msg, stage, exc)

    def _commit(self, only: set[TopicPartition] | None = None) -> None:
        if self.consumer is None:
            return
        current = {tp: off for tp, off in self.positions.items() if only is None or tp in only}
        if not current:
            return
        safe = self.task.pre_commit(current)
        offsets = [
            KafkaTopicPartition(tp.topic, tp.partition, off)
            for tp, off in safe.items()
            if off is not None
            and off >= 0
            and off != self.committed.get(tp)
            and (only is None or tp in only)
            and tp in self.assigned
        ]
        if not offsets:
            return
        try:
            self.consumer.commit(offsets=offsets, asynchronous=False)
        except KafkaException as exc:
            log.warning("offset commit failed (will retry at the next round): %s", exc)
            return
        for p in offsets:
            self.committed[TopicPartition(p.topic, p.partition)] = p.offset

    def _shutdown(self) -> None:
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
                    if self.dlq is not None:
                        self.dlq.close()
