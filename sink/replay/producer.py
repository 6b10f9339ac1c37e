"""The Kafka side of replay: one transactional producer, the position topic, and restart reconciliation.

Exactly once, and why it holds on real Kafka and on Tansu:

1. Every batch of replayed records is produced in a Kafka transaction (``transactional.id`` =
   ``kcql-sink-replay-<name>``). When they are all acknowledged (``flush``), the new position
   (:mod:`sink.replay.position`) is produced to the position topic in the same transaction, and the
   transaction is committed. The position therefore says exactly which records are in committed
   transactions, and per target partition the offset after the last of them.
2. At start, ``init_transactions`` fences a previous instance with the same id (a killed replay);
   Kafka aborts its open transaction. Then the last position is read with ``read_committed``.
3. Reconciliation: each target partition is read with ``read_committed`` from the position's target
   offset to its end. On Kafka this shows no record of ours (aborted records are hidden), so every
   record after the position is produced again. Tansu (0.6) delivers aborted records to
   ``read_committed`` readers, so there the killed transaction's records *are* visible: replay
   compares them (key, value, headers, and timestamp when the archive kept it) with the records it
   is about to produce to that partition and treats each match as landed instead of producing it
   twice. An idempotent producer keeps a partition's records in order, so what landed of a killed
   transaction is a prefix of what replay would produce next there. Records in the partition that
   match nothing (another producer's) are left alone.

Either way a ``read_committed`` reader of the target sees every archived record exactly once. A
position record of an aborted transaction that Tansu shows is consistent too: it is produced only
after every record it accounts for was acknowledged, and those records are visible there as well.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcql.errors import SinkError
from sink.replay.position import Position

__all__ = [
    "POSITION_PARTITIONS",
    "POSITION_WINDOW",
    "KafkaSide",
    "LandedRecord",
    "Reconciler",
    "ReplayKafkaError",
    "murmur2",
    "position_partition",
]

log = logging.getLogger(__name__)

LandedRecord = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None, int]
"""(key, value, headers, timestamp, offset) of a record read back from a target partition."""


POSITION_PARTITIONS = 25
"""Partitions of a position topic that replay creates (Kafka Connect's offsets topic has 25 by
default): each replay's positions go to the partition of its name, so a start reads that one."""

POSITION_WINDOW = 1000
"""A start reads its position partition backwards from the end, this many offsets at first and
eight times more each step back, and stops at the window holding the name's latest position."""


class ReplayKafkaError(SinkError):
    """Kafka refused something replay needs (topic missing, transaction failed, fenced)."""


def murmur2(data: bytes) -> int:
    """Kafka's ``Utils.murmur2`` (signed 32-bit), the hash of its default partitioner for keys."""
    m = 0x5BD1E995
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    whole = length & ~3
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> 24
        k = (k * m) & 0xFFFFFFFF
        h = ((h * m) & 0xFFFFFFFF) ^ k
    rest = length - whole
    if rest == 3:
        h ^= data[whole + 2] << 16
    if rest >= 2:
        h ^= data[whole + 1] << 8
    if rest >= 1:
        h ^= data[whole]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def position_partition(name: str, partitions: int) -> int:
    """The partition of ``name``'s positions: where Kafka's default partitioner puts the key
    ``name`` (``toPositive(murmur2(key)) % partitions``), so any Kafka client agrees. A position
    topic of one partition (as replay created before) keeps everything in partition 0."""
    return (murmur2(name.encode("utf-8")) & 0x7FFFFFFF) % partitions


class KafkaSide:
    """The transactional producer plus the reads replay needs at start."""

    def __init__(
        self,
        bootstrap: str,
        name: str,
        position_topic: str,
        overrides: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
        position_window: int = POSITION_WINDOW,
    ) -> None:
        self.bootstrap = bootstrap
        self.name = name
        self.position_topic = position_topic
        self.timeout = timeout
        self.position_window = position_window
        self.position_partition = 0
        """Set by :meth:`ensure_position_topic` from the topic's partition count."""
        self.position_records_read = 0
        """How many records of the position topic the last :meth:`read_position` read."""
        self.admin = AdminClient({"bootstrap.servers": bootstrap})
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "transactional.id": f"kcql-sink-replay-{name}",
            "enable.idempotence": True,
            "linger.ms": 5,
            "message.max.bytes": 16 * 1024 * 1024,
            **(overrides or {}),
        }
        self.producer = Producer(conf)
        self._errors: list[str] = []
        self._position: Position | None = None
        self._in_txn = False

    # ------------------------------------------------------------------ topics

    def partitions(self, topic: str) -> int:
        """The partition count of an existing topic (listing all topics: a metadata request for one
        topic would auto-create it on brokers that allow that).

        Raises:
            ReplayKafkaError: the topic does not exist.
        """
        md = self.admin.list_topics(timeout=self.timeout)
        meta = md.topics.get(topic)
        if meta is None or meta.error is not None:
            raise ReplayKafkaError(
                f"target topic {topic!r} does not exist; create it first (with at least as many partitions "
                "as the archived topic, to keep each record's partition)"
            )
        return len(meta.partitions)

    def ensure_position_topic(self) -> None:
        """Create the position topic if it is missing (:data:`POSITION_PARTITIONS`, compacted), and
        find this replay's partition in it by the partition count it has."""
        md = self.admin.list_topics(timeout=self.timeout)
        meta = md.topics.get(self.position_topic)
        if meta is None or meta.error is not None:
            futures = self.admin.create_topics(
                [
                    NewTopic(
                        self.position_topic,
                        num_partitions=POSITION_PARTITIONS,
                        config={"cleanup.policy": "compact"},
                    )
                ]
            )
            try:
                futures[self.position_topic].result(self.timeout)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise ReplayKafkaError(
                        f"cannot create the position topic {self.position_topic!r}: {exc}"
                    ) from exc
            count = self._partition_count(self.position_topic)
        else:
            count = len(meta.partitions)
        self.position_partition = position_partition(self.name, count)

    def _partition_count(self, topic: str) -> int:
        """The partition count of ``topic`` just created (metadata may lag a moment behind)."""
        deadline = time.monotonic() + self.timeout
        while True:
            meta = self.admin.list_topics(topic, timeout=self.timeout).topics.get(topic)
            if meta is not None and meta.error is None and meta.partitions:
                return len(meta.partitions)
            if time.monotonic() > deadline:
                raise ReplayKafkaError(f"the position topic {topic!r} has no partitions after creating it")
            time.sleep(0.1)

    # ------------------------------------------------------------------ start

    def init(self) -> None:
        """Fence any earlier instance (its open transaction is aborted)."""
        try:
            self.producer.init_transactions(self.timeout)
        except KafkaException as exc:
            raise ReplayKafkaError(f"cannot initialise the replay's transactions: {exc}") from exc

    def ends(self, topic: str, partitions: int) -> dict[int, int]:
        """Each partition's high watermark now (read_uncommitted: everything written so far, ours
        or not; Tansu answers (0, 0) under read_committed while a transaction is open)."""
        return self._watermarks(topic, range(partitions))

    def _high(self, topic: str, partition: int) -> int:
        """One partition's high watermark (Tansu's may be a little low: the first window still
        reads to the real end)."""
        return self._watermarks(topic, (partition,))[partition]

    def _watermarks(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"kcql-sink-replay-{self.name}-reader",
             "enable.auto.commit": False}
        )
        try:
            out = {}
            for p in partitions:
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout)
                out[p] = high
            return out
        except KafkaException as exc:
            raise ReplayKafkaError(f"cannot read the end offsets of {topic}: {exc}") from exc
        finally:
            consumer.close()

    def _read(self, topic: str, partition: int, start: int, stop: int | None = None) -> list[Any]:
        """Every message of ``topic``/``partition`` from ``start`` to its end (or to before
        ``stop``), read_committed."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"kcql-sink-replay-{self.name}-reader",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "fetch.wait.max.ms": 10,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            out: list[Any] = []
            deadline = time.monotonic() + self.timeout
            while time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is None:
                    continue
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        return out
                    raise ReplayKafkaError(f"cannot read {topic}/{partition}: {err}")
                offset = msg.offset()
                if stop is not None and offset is not None and offset >= stop:
                    return out
                out.append(msg)
            raise ReplayKafkaError(f"reading {topic}/{partition} to its end took more than {self.timeout}s")
        finally:
            consumer.close()

    def read_position(self, partitioned: dict[str, bool]) -> Position:
        """The last position stored under this replay's name (an empty one on a first run).

        Read backwards in windows from the end of the name's partition: a replay that ran lately
        finds its position in the first window, however long the topic's history (Kafka compacts
        it, Tansu does not: at the end of a ``make chaos`` run reading it whole took 4.3 s). Only a
        first run reads the partition to its beginning.
        """
        key = self.name.encode("utf-8")
        partition = self.position_partition
        self.position_records_read = 0
        window = self.position_window
        stop: int | None = None  # the first window reads to the end
        start = max(0, self._high(self.position_topic, partition) - window)
        while True:
            latest: bytes | None = None
            for msg in self._read(self.position_topic, partition, start, stop):
                self.position_records_read += 1
                if msg.key() == key and msg.value() is not None:
                    latest = msg.value()
            if latest is not None or start == 0:
                break
            window *= 8
            stop, start = start, max(0, start - window)
        if latest is None:
            return Position()
        return Position.from_bytes(latest, partitioned, f"{self.position_topic}[{self.name}]")

    def landed_beyond(self, topic: str, partitions: int, position: Position) -> dict[int, list[LandedRecord]]:
        """Per target partition, the records visible after the position's target offset."""
        out: dict[int, list[LandedRecord]] = {}
        starts = position.targets.get(topic, {})
        for p in range(partitions):
            start = starts.get(p, 0)
            recs: list[LandedRecord] = []
            for msg in self._read(topic, p, start):
                ts_type, ts = msg.timestamp()
                headers = tuple((n, v) for n, v in (msg.headers() or ()))
                recs.append((msg.key(), msg.value(), headers, ts if ts_type else None, msg.offset()))
            if recs:
                out[p] = recs
        return out

    # ------------------------------------------------------------------ transactions

    def begin(self, position: Position) -> None:
        self._position = position
        self._errors.clear()
        self.producer.begin_transaction()
        self._in_txn = True

    def _delivered(self, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self._errors.append(f"{msg.topic()}/{msg.partition()}: {err}")
        elif self._position is not None and msg.topic() != self.position_topic:
            self._position.landed(msg.topic(), msg.partition(), msg.offset())

    def produce(
        self,
        topic: str,
        partition: int,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]],
        timestamp: int | None,
    ) -> None:
        kwargs: dict[str, Any] = {"partition": partition, "on_delivery": self._delivered}
        if headers:
            kwargs["headers"] = headers
        if timestamp is not None:
            kwargs["timestamp"] = timestamp
        while True:
            try:
                self.producer.produce(topic, value, key, **kwargs)
                break
            except BufferError:
                self.producer.poll(0.1)
        self.producer.poll(0)

    def commit(self, position: Position) -> None:
        """Flush, then write ``position`` and commit, all in the open transaction.

        Raises:
            ReplayKafkaError: a record was not acknowledged, or the commit failed (the transaction
                is aborted; nothing of it counts).
        """
        try:
            self._flush()
            self.producer.produce(
                self.position_topic,
                position.to_bytes(),
                self.name.encode("utf-8"),
                partition=self.position_partition,
            )
            self.producer.commit_transaction(self.timeout)
            self._in_txn = False
        except (KafkaException, ReplayKafkaError) as exc:
            self.abort()
            raise ReplayKafkaError(f"replay transaction failed and was aborted: {exc}") from exc

    def _flush(self) -> None:
        left = self.producer.flush(self.timeout)
        if left or self._errors:
            raise ReplayKafkaError(
                f"{left} record(s) not acknowledged; errors: {'; '.join(self._errors[:3]) or 'none'}"
            )

    def abort(self) -> None:
        if self._in_txn:
            self._in_txn = False
            try:
                self.producer.abort_transaction(self.timeout)
            except KafkaException as exc:
                log.warning("aborting the replay transaction failed: %s", exc)

    def close(self) -> None:
        self.abort()
        self.producer.flush(1)


class Reconciler:
    """Step 3 of the module docstring: per target partition, the records visible after the position.

    Replay asks, for each record it is about to produce to a partition, whether an equal record is
    visible there (after the previous match); a match is a record a killed transaction left (Tansu
    shows aborted records) and counts as landed. Records matching nothing (another producer's) are
    passed over. The timestamp is compared only when the archive kept it.
    """

    def __init__(self, landed: dict[int, list[LandedRecord]]) -> None:
        self.landed = landed
        self.cursor = dict.fromkeys(landed, 0)

    def take(
        self, partition: int, key: bytes | None, value: bytes | None, headers: list[Any], ts: int | None
    ) -> int | None:
        """The offset of the first visible record equal to this one (consumed), else None."""
        recs = self.landed.get(partition)
        if not recs:
            return None
        hdrs = tuple(headers)
        for i in range(self.cursor[partition], len(recs)):
            k, v, h, t, off = recs[i]
            if k == key and v == value and h == hdrs and (ts is None or t == ts):
                self.cursor[partition] = i + 1
                return off
        return None
