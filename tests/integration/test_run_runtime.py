"""The consumer loop against a real broker, with a recording task in place of the storage task.

These pin the runtime's side of the contract with ``sink.task.task.SinkTask``: partitions resume where
``open`` says, Kafka offsets follow ``pre_commit`` and nothing else, poison records either stop the
task with a message naming topic/partition/offset or go to the dead-letter topic with Connect's
context headers, and a rebalance closes what it revokes.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from confluent_kafka import Consumer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from kcql.errors import SinkError
from sink.config.files import parse_connector_config
from sink.records.batch import RecordBatch
from sink.records.record import SinkRecord, TopicPartition
from sink.runtime.loop import RuntimeOptions, SinkRuntime, TaskFailedError
from tests.fixtures.tansu import FAST_CONSUMER


class RecordingTask:
    """Keeps every record it is given; ``durable`` bounds what pre_commit reports as safe."""

    background_commits = False

    def __init__(self, resume: dict[TopicPartition, int] | None = None) -> None:
        self.resume = resume or {}
        self.records: list[SinkRecord] = []
        self.opened: list[TopicPartition] = []
        self.closed: list[TopicPartition] = []
        self.durable: dict[TopicPartition, int] | None = None
        self.started = self.stopped = False

    def start(self, config: dict[str, str]) -> None:
        self.started = True

    def open(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        self.opened += partitions
        return {tp: off for tp, off in self.resume.items() if tp in partitions}

    def put(self, batch: RecordBatch) -> None:
        records = batch.records()
        for index, record in enumerate(records):  # the first bad record raises its RecordError
            self.records.append(record)
            assert records[index] is record

    def prefetch(self, batch: RecordBatch) -> bool:
        return False

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        if self.durable is None:
            return dict(offsets)
        return {tp: min(off, self.durable[tp]) for tp, off in offsets.items() if tp in self.durable}

    def close(self, partitions: list[TopicPartition]) -> None:
        self.closed += partitions

    def stop(self) -> None:
        self.stopped = True


class Running:
    """A runtime in a background thread, stopped (and joined) by the test."""

    def __init__(self, runtime: SinkRuntime) -> None:
        self.runtime = runtime
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def join(self, timeout: float = 30) -> None:
        self.stop.set()
        self.thread.join(timeout)
        assert not self.thread.is_alive()


def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("condition not reached in time")


def make_runtime(bootstrap: str, topic: str, task: RecordingTask, **extra: str) -> SinkRuntime:
    cfg = parse_connector_config(
        {
            "name": f"rt-{uuid.uuid4().hex[:8]}",
            "config": {
                "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
                "topics": topic,
                "connect.s3.kcql": f"INSERT INTO bucket:prefix SELECT * FROM {topic} STOREAS `JSON`",  # noqa: S608
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "consumer.override.session.timeout.ms": str(FAST_CONSUMER["session.timeout.ms"]),
                "consumer.override.heartbeat.interval.ms": str(FAST_CONSUMER["heartbeat.interval.ms"]),
                "consumer.override.fetch.wait.max.ms": "50",
                "consumer.override.topic.metadata.refresh.interval.ms": "1000",
                **extra,
            },
        }
    )
    return SinkRuntime(
        cfg, RuntimeOptions(bootstrap, commit_interval=0.3), task_factory=lambda _observer: task
    )


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        tps = consumer.committed([KafkaTopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return [tp.offset for tp in tps]
    finally:
        consumer.close()


@pytest.fixture
def produce(producer) -> Iterator[Callable[..., None]]:
    def send(topic: str, values: Sequence[bytes | None], partition: int = 0, **kw: object) -> None:
        for value in values:
            producer.produce(topic, value=value, partition=partition, **kw)
        producer.flush(10)

    yield send


def test_resumes_where_open_says_and_commits_only_what_pre_commit_returns(
    kafka_bootstrap, topic_factory, produce
):
    topic = topic_factory("rt-resume", partitions=2)
    produce(topic, [b'{"i": %d}' % i for i in range(10)], partition=0)
    produce(topic, [b'{"i": %d}' % i for i in range(4)], partition=1)
    tp0, tp1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    task = RecordingTask(resume={tp0: 6})  # the storage index already holds offsets 0..5 of p0
    task.durable = {tp0: 8, tp1: 2}  # only this much reached storage
    runtime = make_runtime(kafka_bootstrap, topic, task)
    run = Running(runtime)
    try:
        wait_for(lambda: len(task.records) == 8)
        group = f"connect-{runtime.cfg.name}"
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == [8, 2])
    finally:
        run.join()
    assert run.error is None
    assert sorted((r.partition, r.offset) for r in task.records) == [(0, o) for o in range(6, 10)] + [
        (1, o) for o in range(4)
    ]
    assert task.records[0].raw_value is not None  # schemaless JSON keeps its bytes for pass-through
    assert committed(kafka_bootstrap, group, topic, 2) == [8, 2]  # never past pre_commit's answer
    assert task.started and task.stopped and set(task.closed) == {tp0, tp1}


def test_poison_record_stops_the_task_naming_topic_partition_offset(kafka_bootstrap, topic_factory, produce):
    topic = topic_factory("rt-poison")
    produce(topic, [b'{"ok": 1}', b"{not json", b'{"ok": 2}'])
    task = RecordingTask()
    runtime = make_runtime(kafka_bootstrap, topic, task)
    run = Running(runtime)
    run.thread.join(30)
    assert not run.thread.is_alive()
    assert isinstance(run.error, TaskFailedError)
    message = str(run.error)
    assert f"topic {topic!r} partition 0 offset 1" in message
    assert "errors.tolerance=all" in message  # tells the user how to skip such records
    assert all(r.offset < 1 for r in task.records)  # nothing at or after the poison record
    group = f"connect-{runtime.cfg.name}"
    assert committed(kafka_bootstrap, group, topic, 1)[0] in (-1001, 1)  # never past the poison record


def test_poison_records_go_to_the_dead_letter_topic_with_context_headers(
    kafka_bootstrap, topic_factory, produce
):
    topic = topic_factory("rt-dlq")
    dlq = f"dlq-{uuid.uuid4().hex[:8]}"
    produce(
        topic, [b'{"ok": 1}', b"{bad", b'{"ok": 2}', b"\xff\xfe", b'{"ok": 3}'], headers=[("trace", b"t-1")]
    )
    task = RecordingTask()
    runtime = make_runtime(
        kafka_bootstrap,
        topic,
        task,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.log.enable": "true",
        },
    )
    run = Running(runtime)
    try:
        wait_for(lambda: len(task.records) == 3)
        group = f"connect-{runtime.cfg.name}"
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 1) == [5])  # the partition moved on
    finally:
        run.join()
    assert run.error is None
    assert [r.value for r in task.records] == [b'{"ok": 1}', b'{"ok": 2}', b'{"ok": 3}'] or [
        r.raw_value for r in task.records
    ] == [b'{"ok": 1}', b'{"ok": 2}', b'{"ok": 3}']

    reader = Consumer(
        {"bootstrap.servers": kafka_bootstrap, "group.id": f"r-{uuid.uuid4().hex}", **FAST_CONSUMER}
    )
    reader.assign([KafkaTopicPartition(dlq, 0, 0)])
    dead = []
    deadline = time.monotonic() + 20
    while len(dead) < 2 and time.monotonic() < deadline:
        dead += [m for m in reader.consume(10, timeout=0.5) if m.error() is None]
    reader.close()
    assert [m.value() for m in dead] == [b"{bad", b"\xff\xfe"]  # original bytes, in order
    for msg, offset in zip(dead, (1, 3), strict=True):
        headers = dict(msg.headers())
        assert headers["trace"] == b"t-1"  # the original headers travel along
        assert headers["__connect.errors.topic"] == topic.encode()
        assert headers["__connect.errors.partition"] == b"0"
        assert headers["__connect.errors.offset"] == str(offset).encode()
        assert headers["__connect.errors.exception.class.name"]
        assert headers["__connect.errors.exception.message"]
        assert b"Traceback" in headers["__connect.errors.exception.stacktrace"]


def test_rebalance_closes_revoked_partitions_and_hands_them_over(kafka_bootstrap, topic_factory, produce):
    topic = topic_factory("rt-rebalance", partitions=4)
    for p in range(4):
        produce(topic, [b'{"p": %d}' % p] * 5, partition=p)
    first_task, second_task = RecordingTask(), RecordingTask()
    first = make_runtime(kafka_bootstrap, topic, first_task)
    run1 = Running(first)
    try:
        wait_for(lambda: len(first_task.records) == 20)
        cfg2 = first.cfg  # same connector name → same group
        second = SinkRuntime(
            cfg2, RuntimeOptions(kafka_bootstrap, commit_interval=0.3), lambda _observer: second_task
        )
        run2 = Running(second)
        try:
            wait_for(lambda: len(second_task.opened) > 0 and first_task.closed, timeout=40)
            for p in range(4):
                produce(topic, [b'{"late": %d}' % p], partition=p)
            wait_for(lambda: len(first_task.records) + len(second_task.records) == 24, timeout=40)
        finally:
            run2.join()
        # the second member left: the first gets every partition back and sees new records
        wait_for(
            lambda: (
                len(set(first_task.opened)) == 4 and first_task.opened.count(TopicPartition(topic, 0)) >= 1
            )
        )
        produce(topic, [b'{"after": 1}'], partition=3)
        wait_for(lambda: any(r.raw_value == b'{"after": 1}' for r in first_task.records), timeout=40)
    finally:
        run1.join()
    assert run1.error is None and run2.error is None
    seen = [(r.partition, r.offset) for r in first_task.records + second_task.records]
    assert len(seen) == len(set(seen)) == 25  # offsets committed at revocation: nothing re-delivered
    assert set(second_task.closed) == set(second_task.opened)


class FlakyStorage(SinkError):
    """A storage error worth retrying (a throttled or unreachable S3)."""

    retriable = True


class FlakyTask(RecordingTask):
    """Fails ``failures`` puts with a retriable error, dropping what it was given (as a real task
    discards uncommitted files when it is closed)."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures
        self.attempts = 0

    def put(self, batch: RecordBatch) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise FlakyStorage("storage is throttling")
        super().put(batch)


def test_retry_policy_rewinds_and_delivers_every_record_once(kafka_bootstrap, topic_factory, produce):
    topic = topic_factory("rt-retry")
    produce(topic, [b'{"i": %d}' % i for i in range(5)])
    task = FlakyTask(failures=2)
    runtime = make_runtime(
        kafka_bootstrap,
        topic,
        task,
        **{
            "connect.s3.error.policy": "RETRY",
            "connect.s3.max.retries": "3",
            "connect.s3.retry.interval": "100",
        },
    )
    run = Running(runtime)
    try:
        wait_for(lambda: len(task.records) >= 5 or run.error is not None)
        produce(topic, [b'{"end": 1}'])  # whatever the retries re-read comes before it
        wait_for(lambda: any(r.offset == 5 for r in task.records) or run.error is not None)
    finally:
        run.join()
    assert run.error is None, run.error
    assert task.attempts >= 3
    # the failed batch was re-read from the last commit, not skipped, and nothing came twice
    assert [r.offset for r in task.records] == [0, 1, 2, 3, 4, 5]


def test_throw_policy_stops_on_a_storage_error(kafka_bootstrap, topic_factory, produce):
    topic = topic_factory("rt-throw")
    produce(topic, [b'{"i": 1}'])
    task = FlakyTask(failures=1)
    run = Running(make_runtime(kafka_bootstrap, topic, task))
    run.thread.join(30)
    assert not run.thread.is_alive() and isinstance(run.error, FlakyStorage)


@pytest.mark.parametrize(
    ("behavior", "values"),
    [("ignore", [b'{"a": 1}', b'{"a": 3}']), ("write", [b'{"a": 1}', None, b'{"a": 3}'])],
)
def test_tombstones_follow_behavior_on_null_values(kafka_bootstrap, topic_factory, produce, behavior, values):
    topic = topic_factory(f"rt-null-{behavior}")
    produce(topic, [b'{"a": 1}', None, b'{"a": 3}'])
    task = RecordingTask()
    run = Running(make_runtime(kafka_bootstrap, topic, task, **{"behavior.on.null.values": behavior}))
    try:
        wait_for(lambda: sum(1 for _ in task.records) == len(values) or run.error is not None)
        produce(topic, [b'{"end": 1}'])  # anything handled wrongly before it comes before it
        wait_for(lambda: any(r.offset == 3 for r in task.records) or run.error is not None)
    finally:
        run.join()
    assert run.error is None
    assert [r.raw_value for r in task.records] == [*values, b'{"end": 1}']


def test_tombstone_with_behavior_fail_stops_naming_the_record(kafka_bootstrap, topic_factory, produce):
    topic = topic_factory("rt-null-fail")
    produce(topic, [b'{"a": 1}', None])
    run = Running(
        make_runtime(kafka_bootstrap, topic, RecordingTask(), **{"behavior.on.null.values": "fail"})
    )
    run.thread.join(30)
    assert isinstance(run.error, TaskFailedError)
    assert f"topic {topic!r} partition 0 offset 1" in str(run.error) and "behavior.on.null.values" in str(
        run.error
    )


def test_schema_registry_outage_is_retried_not_dead_lettered(
    kafka_bootstrap, topic_factory, produce, schema_registry, schema_registry_url
):
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    topic = topic_factory("rt-registry-down")
    schema = '{"type": "record", "name": "r", "fields": [{"name": "n", "type": "int"}]}'
    data = AvroSerializer(SchemaRegistryClient({"url": schema_registry_url}), schema)(
        {"n": 7}, SerializationContext(topic, MessageField.VALUE)
    )
    schema_registry.down = True
    produce(topic, [data])
    task = RecordingTask()
    runtime = make_runtime(
        kafka_bootstrap,
        topic,
        task,
        **{
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": f"dlq-{uuid.uuid4().hex[:8]}",
            "connect.s3.retry.interval": "200",
        },
    )
    run = Running(runtime)
    try:
        # several attempts while the registry is down, each after a pause of the partition
        wait_for(lambda: sum("GET /schemas/ids" in r for r in schema_registry.state.requests) >= 3)
        assert task.records == [] and runtime.errors_tolerated == 0 and run.error is None
        schema_registry.down = False
        wait_for(lambda: len(task.records) == 1 or run.error is not None)
    finally:
        schema_registry.down = False
        run.join()
    assert run.error is None and runtime.errors_tolerated == 0
    assert task.records[0].value == {"n": 7} and task.records[0].value_schema["name"] == "r"
