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
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kcql.errors import SinkError
from sink.replay.position import Position

__all__ = ["KafkaSide", "LandedRecord", "Reconciler", "ReplayKafkaError"]

log = logging.getLogger(__name__)

LandedRecord = tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None, int]
"""(key, value, headers, timestamp, offset) of a record read back from a target partition."""


class ReplayKafkaError(SinkError):
    """Kafka refused something replay needs (topic missing, transaction failed, fenced)."""


class KafkaSide:
    """The transactional producer plus the reads replay needs at start."""

    def __init__(
        self,
        bootstrap: str,
        name: str,
        position_topic: str,
        overrides: Mapping[str, Any] | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.bootstrap = bootstrap
        self.name = name
        self.position_topic = position_topic
        self.timeout = timeout
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
        md = self.admin.list_topics(timeout=self.timeout)
        if self.position_topic in md.topics:
            return
        futures = self.admin.create_topics(
            [NewTopic(self.position_topic, num_partitions=1, config={"cleanup.policy": "compact"})]
        )
        try:
            futures[self.position_topic].result(self.timeout)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise ReplayKafkaError(
                    f"cannot create the position topic {self.position_topic!r}: {exc}"
                ) from exc

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
        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": f"kcql-sink-replay-{self.name}-reader",
             "enable.auto.commit": False}
        )
        try:
            out = {}
            for p in range(partitions):
                _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=self.timeout)
                out[p] = high
            return out
        except KafkaException as exc:
            raise ReplayKafkaError(f"cannot read the end offsets of {topic}: {exc}") from exc
        finally:
            consumer.close()

    def _read(self, topic: str, partition: int, start: int) -> list[Any]:
        """Every message of ``topic``/``partition`` from ``start`` to its end, read_committed."""
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
                out.append(msg)
            raise ReplayKafkaError(f"reading {topic}/{partition} to its end took more than {self.timeout}s")
        finally:
            consumer.close()

    def read_position(self, partitioned: dict[str, bool]) -> Position:
        """The last position stored under this replay's name (an empty one on a first run)."""
        latest: bytes | None = None
        for msg in self._read(self.position_topic, 0, 0):
            if msg.key() == self.name.encode("utf-8") and msg.value() is not None:
                latest = msg.value()
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
                self.position_topic, position.to_bytes(), self.name.encode("utf-8"), partition=0
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
