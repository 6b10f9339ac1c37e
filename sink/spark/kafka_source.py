"""Kafka in Spark without a jar: the ``kcql-kafka`` Python data source (batch and streaming).

``spark.read.format("kcql-kafka")`` (and ``readStream``) reads raw Kafka messages with the columns
of Spark's own Kafka source: ``key``, ``value`` (binary), ``topic``, ``partition``, ``offset``,
``timestamp``, ``timestampType``, ``headers`` (``array<struct<key string, value binary>>``). No
spark-sql-kafka jar can be had on every cluster (or on this machine), so the reading is done on
the executors by confluent-kafka, which the sink needs anyway.

Planning: one input partition per Kafka partition's offset range, so the parallelism is the
number of Kafka partitions, as in Kafka Connect. A long range is worked through in order by that
one task, in Arrow batches of at most ``batchRows`` rows; two tasks never read one Kafka partition
at once, which the write side relies on (one writer per partition, in offset order).

Reading: assign and seek, no consumer group commits (the driver commits the connector's group
itself, see :mod:`sink.spark.offsets`). A range ends at the first message at or after its end
offset, or when the consumer reports it has reached the partition's end (``enable.partition.eof``)
— so compaction gaps and transaction markers, which leave offsets no message carries, end a range
instead of waiting for it.

Options (Spark's Kafka source's names where it has one):

- ``kafka.bootstrap.servers`` (required), ``subscribe`` (comma-separated topics);
- ``startingOffsets``: ``earliest``, ``latest`` or ``{"topic": {"0": 12, "1": -2}}`` (-2 earliest,
  -1 latest); default ``earliest`` for a batch read and ``latest`` for a stream, as Spark's;
- ``endingOffsets`` (batch only): ``latest`` (default) or a JSON as above;
- ``maxRecordsPerPartition`` (stream): at most this many records per partition per micro-batch;
- ``failOnDataLoss`` (default ``true``): a start offset that retention has already deleted is an
  error naming the partition, rather than a silent jump to the earliest offset;
- ``batchRows`` (default 10,000): rows per Arrow batch handed to Spark;
- ``pollTimeoutMs`` (default 120,000): how long a range may see no message before the task fails
  with an error naming topic, partition and offset;
- ``kafka.<librdkafka property>``: passed to the consumers (security settings, fetch sizes).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, KafkaError, KafkaException, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows
from pyspark.sql.types import StructType

__all__ = [
    "KAFKA_ARROW_SCHEMA",
    "KAFKA_SCHEMA",
    "KafkaRange",
    "KafkaSource",
    "consume_range",
    "read_range",
    "register",
    "resolve_offsets",
]

KAFKA_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int, headers array<struct<key: string, value: binary>>"
)
"""The columns of Spark's own Kafka source, with headers always included."""

KAFKA_ARROW_SCHEMA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
        ("timestampType", pa.int32()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
    ]
)
"""What :func:`read_range` yields: Spark's ``timestamp`` is microseconds since the epoch, UTC."""

EARLIEST, LATEST = -2, -1
"""Offsets that mean "earliest" and "latest" in an offsets JSON (as in Spark's Kafka source)."""

_OURS = (
    "group.id",
    "enable.auto.commit",
    "enable.auto.offset.store",
    "enable.partition.eof",
    "auto.offset.reset",
)
"""Consumer properties the reader sets itself; ``kafka.`` options cannot override them."""


class KafkaSourceError(ValueError):
    """An option of the ``kcql-kafka`` source is missing or wrong (the message names it)."""


class KafkaRange(InputPartition):
    """One Kafka partition's offsets ``[start, end)``: one Spark task reads it, in order."""

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        super().__init__(f"{topic}-{partition}[{start},{end})")
        self.topic = topic
        self.partition = partition
        self.start = start
        self.end = end

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KafkaRange) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


def consumer_conf(options: Mapping[str, str], *, fail_on_data_loss: bool = True) -> dict[str, Any]:
    """The executors' (and the planner's) consumer settings from the source's options."""
    bootstrap = options.get("kafka.bootstrap.servers", "").strip()
    if not bootstrap:
        raise KafkaSourceError("kcql-kafka: option kafka.bootstrap.servers is required")
    conf: dict[str, Any] = {
        # as the sink's own consumer (sink.runtime.consumer): librdkafka's default 1000 ms backoff
        # when its queue is full stalls a reader that does work between polls
        "fetch.queue.backoff.ms": 10,
        "fetch.wait.max.ms": 100,
    }
    conf.update(
        {
            key[len("kafka.") :]: value
            for key, value in options.items()
            if key.startswith("kafka.") and key[len("kafka.") :] not in _OURS
        }
    )
    conf.update(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kcql-kafka-reader",  # assign only: nothing is ever committed to it
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "enable.partition.eof": True,
            "auto.offset.reset": "error" if fail_on_data_loss else "earliest",
        }
    )
    return conf


def _topics(options: Mapping[str, str]) -> list[str]:
    topics = [t.strip() for t in options.get("subscribe", "").split(",") if t.strip()]
    if not topics:
        raise KafkaSourceError("kcql-kafka: option subscribe (comma-separated topic names) is required")
    return topics


def _parse_spec(spec: str, option: str) -> dict[tuple[str, int], int] | None:
    """``None`` for earliest/latest; else the JSON's ``{(topic, partition): offset}``."""
    if spec.strip() in ("earliest", "latest"):
        return None
    try:
        parsed = json.loads(spec)
        return {(topic, int(p)): int(o) for topic, parts in parsed.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as exc:
        raise KafkaSourceError(
            f'kcql-kafka: option {option} must be earliest, latest or {{"topic": {{"0": offset}}}}; '
            f"got {spec!r} ({exc})"
        ) from None


def resolve_offsets(
    bootstrap: str,
    topics: Sequence[str],
    spec: str,
    *,
    default: str,
    conf: Mapping[str, Any] | None = None,
) -> dict[tuple[str, int], int]:
    """Every partition of ``topics`` with a concrete offset: ``spec`` (earliest, latest or a JSON;
    -2/-1 in it mean earliest/latest) resolved against the partitions' watermarks; a partition the
    JSON leaves out gets ``default`` (earliest or latest).

    Raises:
        KafkaSourceError: a topic does not exist, or ``spec`` is not one of the accepted forms.
    """
    given = _parse_spec(spec, "startingOffsets/endingOffsets")
    fallback = spec.strip() if given is None else default
    settings = {**(conf or {}), "bootstrap.servers": bootstrap, "group.id": "kcql-kafka-planner"}
    client = Consumer(settings)
    try:
        metadata = client.list_topics(timeout=15)
        out: dict[tuple[str, int], int] = {}
        latest: dict[tuple[str, int], int] = {}
        for topic in topics:
            described = metadata.topics.get(topic)
            if described is None or described.error is not None:
                raise KafkaSourceError(f"kcql-kafka: topic {topic!r} does not exist on {bootstrap}")
            for partition in sorted(described.partitions):
                wanted = (given or {}).get((topic, partition))
                if wanted is None:
                    wanted = EARLIEST if fallback == "earliest" else LATEST
                if wanted >= 0:
                    out[(topic, partition)] = wanted
                    continue
                low, high = client.get_watermark_offsets(
                    KafkaTopicPartition(topic, partition), timeout=15, cached=False
                )
                if wanted == EARLIEST:
                    out[(topic, partition)] = low
                else:
                    latest[(topic, partition)] = high
    finally:
        client.close()
    if latest:
        out.update(fetched_ends(settings, latest))
    return out


def fetched_ends(
    conf: Mapping[str, Any], listed: Mapping[tuple[str, int], int]
) -> dict[tuple[str, int], int]:
    """Each partition's end as a fetch reports it, starting from the ``listed`` (ListOffsets) end.

    On Kafka a fetch at the listed end comes back empty with the same high watermark, so this
    costs one round trip. Some brokers list a stale end (Tansu lists the last batch's base offset
    + 1); the fetch then returns the rest, and the end it reports is the one a reader reaches.
    Partitions that report nothing within 15 s keep their listed end.
    """
    # fetch.wait.max.ms: a fetch at the end returns at once instead of waiting for new data
    probe = Consumer(
        {**conf, "enable.partition.eof": True, "enable.auto.commit": False, "fetch.wait.max.ms": 10}
    )
    ends = dict(listed)
    waiting = set(listed)
    try:
        probe.assign([KafkaTopicPartition(t, p, max(o, 0)) for (t, p), o in listed.items()])
        deadline = time.monotonic() + 15
        while waiting and time.monotonic() < deadline:
            for message in probe.consume(num_messages=10_000, timeout=0.1):
                tp = (message.topic() or "", message.partition() or 0)
                error = message.error()
                if error is None:
                    ends[tp] = max(ends[tp], (message.offset() or 0) + 1)
                elif error.code() == KafkaError._PARTITION_EOF:
                    ends[tp] = max(ends[tp], message.offset() or 0)
                    waiting.discard(tp)
    finally:
        probe.close()
    return ends


def _arrow(messages: Sequence[Message]) -> pa.RecordBatch:
    """Messages as one Arrow batch of :data:`KAFKA_ARROW_SCHEMA`, a column at a time."""
    stamps = [m.timestamp() for m in messages]
    return pa.RecordBatch.from_arrays(
        [
            pa.array([m.key() for m in messages], pa.binary()),
            pa.array([m.value() for m in messages], pa.binary()),
            pa.array([m.topic() for m in messages], pa.string()),
            pa.array([m.partition() for m in messages], pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()),
            pa.array([ts * 1000 if kind and ts >= 0 else None for kind, ts in stamps], pa.int64()).cast(
                KAFKA_ARROW_SCHEMA.field("timestamp").type
            ),
            pa.array([kind - 1 if kind else None for kind, _ts in stamps], pa.int32()),
            pa.array([m.headers() or [] for m in messages], KAFKA_ARROW_SCHEMA.field("headers").type),
        ],
        schema=KAFKA_ARROW_SCHEMA,
    )


def consume_range(
    part: KafkaRange, conf: Mapping[str, Any], *, batch_rows: int = 10_000, quiet_ms: int = 120_000
) -> Iterator[list[Message]]:
    """The messages of ``part`` in offset order, in lists of at most ``batch_rows``.

    Raises:
        KafkaException: the partition cannot be read (the message names topic, partition and
            the offset reached), or no message came for ``quiet_ms`` before the range's end.
    """
    if part.end <= part.start:
        return
    where = f"{part.topic}-{part.partition}"
    consumer = Consumer(dict(conf))
    try:
        consumer.assign([KafkaTopicPartition(part.topic, part.partition, part.start)])
        reached = part.start
        last_message = time.monotonic()
        while reached < part.end:
            messages = consumer.consume(num_messages=min(batch_rows, part.end - reached), timeout=1.0)
            if not messages:
                if (time.monotonic() - last_message) * 1000 > quiet_ms:
                    raise KafkaException(
                        KafkaError(
                            KafkaError._TIMED_OUT,
                            f"kcql-kafka: no message from {where} at offset {reached} for {quiet_ms} ms "
                            f"(the range ends at {part.end})",
                        )
                    )
                continue
            last_message = time.monotonic()
            keep = len(messages)
            ended = False
            for i, message in enumerate(messages):  # an error, or the range's end, cuts the list
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(
                            KafkaError(
                                error.code(),
                                f"kcql-kafka: reading {where} at offset {reached}: {error.str()}",
                            )
                        )
                    keep, ended = i, True  # nothing more in the log: gaps up to end are compaction/markers
                    break
                if (message.offset() or 0) >= part.end:
                    keep, ended = i, True
                    break
            if keep:
                taken = messages if keep == len(messages) else messages[:keep]
                reached = (taken[-1].offset() or 0) + 1
                yield taken
            if ended:
                break
    finally:
        consumer.close()


def read_range(
    part: KafkaRange, conf: Mapping[str, Any], *, batch_rows: int = 10_000, quiet_ms: int = 120_000
) -> Iterator[pa.RecordBatch]:
    """The messages of ``part`` in offset order, as Arrow batches of :data:`KAFKA_ARROW_SCHEMA`
    (see :func:`consume_range`)."""
    for messages in consume_range(part, conf, batch_rows=batch_rows, quiet_ms=quiet_ms):
        yield _arrow(messages)


def _ranges(starts: Mapping[tuple[str, int], int], ends: Mapping[tuple[str, int], int]) -> list[KafkaRange]:
    return [
        KafkaRange(topic, partition, starts.get((topic, partition), 0), end)
        for (topic, partition), end in sorted(ends.items())
        if end > starts.get((topic, partition), 0)
    ]


def _int_option(options: Mapping[str, str], name: str, default: int) -> int:
    raw = options.get(name)
    if raw is None or str(raw).strip() == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise KafkaSourceError(f"kcql-kafka: option {name} must be a whole number, got {raw!r}") from None
    if value <= 0:
        raise KafkaSourceError(f"kcql-kafka: option {name} must be positive, got {raw!r}")
    return value


class KafkaReading:
    """What the batch and the stream reader share: options, the consumer settings, ``read``."""

    def __init__(self, options: Mapping[str, str]) -> None:
        options = {str(k).lower(): v for k, v in options.items()}  # Spark's options ignore case
        self.options = options
        self.topics = _topics(options)
        fail = str(options.get("failondataloss", "true")).strip().lower() != "false"
        self.conf = consumer_conf(options, fail_on_data_loss=fail)
        self.bootstrap = self.conf["bootstrap.servers"]
        self.batch_rows = _int_option(options, "batchrows", 10_000)
        self.quiet_ms = _int_option(options, "polltimeoutms", 120_000)

    def _resolve(self, spec: str, default: str) -> dict[tuple[str, int], int]:
        planner = {k: v for k, v in self.conf.items() if k not in _OURS}
        return resolve_offsets(self.bootstrap, self.topics, spec, default=default, conf=planner)

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if not isinstance(partition, KafkaRange):
            raise TypeError(f"kcql-kafka reads KafkaRange partitions, not {type(partition).__name__}")
        yield from read_range(partition, self.conf, batch_rows=self.batch_rows, quiet_ms=self.quiet_ms)


class KafkaBatchReader(KafkaReading, DataSourceReader):
    def partitions(self) -> Sequence[InputPartition]:
        starts = self._resolve(self.options.get("startingoffsets", "earliest"), "earliest")
        ends = self._resolve(self.options.get("endingoffsets", "latest"), "latest")
        return _ranges(starts, ends)


def _as_offsets(found: Mapping[tuple[str, int], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(found.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def _from_offsets(offsets: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {(topic, int(p)): int(o) for topic, parts in offsets.items() for p, o in parts.items()}


class KafkaStreamReader(KafkaReading, DataSourceStreamReader):
    """Offsets are ``{"topic": {"partition": next offset}}``, the form Spark keeps in the checkpoint."""

    def __init__(self, options: Mapping[str, str]) -> None:
        super().__init__(options)
        raw = self.options.get("maxrecordsperpartition")
        self.cap = None if raw is None else _int_option(self.options, "maxrecordsperpartition", 0)

    def initialOffset(self) -> dict[str, dict[str, int]]:
        return _as_offsets(self._resolve(self.options.get("startingoffsets", "latest"), "latest"))

    def getDefaultReadLimit(self) -> ReadLimit:
        return ReadAllAvailable() if self.cap is None else ReadMaxRows(self.cap)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """The watermarks now, at most ``maxRecordsPerPartition`` past ``start`` per partition
        (the limit is per partition: each partition is one task, and one file at most per batch).
        A partition that appeared since ``start`` begins at its earliest offset."""
        begun = _from_offsets(start)
        high = self._resolve("latest", "latest")
        low = self._resolve("earliest", "earliest") if set(high) - set(begun) else {}
        cap = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        out = {}
        for tp, end in high.items():
            first = begun.get(tp, low.get(tp, 0))
            out[tp] = max(first, end if cap is None else min(end, first + cap))
        return _as_offsets(out)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        return _ranges(_from_offsets(start), _from_offsets(end))

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: the sink's group commits happen when the writer's micro-batch commits."""


class KafkaSource(DataSource):
    """``format("kcql-kafka")``: see the module docstring for the options."""

    @classmethod
    def name(cls) -> str:
        return "kcql-kafka"

    def schema(self) -> str:
        return KAFKA_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(self.options)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(self.options)


def register(spark: Any) -> None:
    """Make ``format("kcql-kafka")`` available in ``spark`` (idempotent)."""
    spark.dataSource.register(KafkaSource)
