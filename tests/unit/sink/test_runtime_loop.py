"""The runtime's loop through its public seam (start/feed/commit), with a consumer that records calls.

No broker: the consumer here only records what the runtime asks of it (pause, resume, seek,
commit) and answers commits the way confluent-kafka does (a list of partitions, each with its
own error). What is pinned: a storage error pauses the partition and the loop keeps polling
instead of sleeping; ``connect.s3.max.retries`` failures in a row stop the task; a Kafka commit
is recorded only for the partitions Kafka accepted; batches of a partition are held for one
consume() when the task prefetched them, and written in order.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

import sink.runtime.loop as loop
from kcql.errors import SinkError
from sink.config.files import parse_connector_config
from sink.records.batch import RecordBatch
from sink.records.record import TopicPartition
from sink.runtime.loop import AHEAD, RuntimeOptions, SinkRuntime, TaskFailedError
from sink.storage.base import AccessDenied

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)


class RecordingConsumer:
    """What the runtime asked of its consumer; commits answered per partition."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.commit_errors: dict[tuple[str, int], str] = {}
        self.callbacks: dict[str, Any] = {}

    def subscribe(self, topics: list[str], **callbacks: Any) -> None:
        self.callbacks = callbacks

    def assign_now(self, *tps: TopicPartition) -> None:
        self.callbacks["on_assign"](self, [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])

    def assign(self, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("assign", [(p.topic, p.partition, p.offset) for p in partitions]))

    def pause(self, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("pause", sorted((p.topic, p.partition) for p in partitions)))

    def resume(self, partitions: list[KafkaTopicPartition]) -> None:
        self.calls.append(("resume", sorted((p.topic, p.partition) for p in partitions)))

    def seek(self, partition: KafkaTopicPartition) -> None:
        self.calls.append(("seek", (partition.topic, partition.partition, partition.offset)))

    def committed(self, partitions: list[KafkaTopicPartition], timeout: float) -> list[KafkaTopicPartition]:
        return [KafkaTopicPartition(p.topic, p.partition, -1001) for p in partitions]

    def commit(self, offsets: list[KafkaTopicPartition], asynchronous: bool) -> list[Any]:
        self.calls.append(("commit", sorted((o.topic, o.partition, o.offset) for o in offsets)))
        return [
            SimpleNamespace(
                topic=o.topic, partition=o.partition, offset=o.offset,
                error=self.commit_errors.get((o.topic, o.partition)),
            )
            for o in offsets
        ]

    def close(self) -> None:
        self.calls.append(("close", None))

    def named(self, name: str) -> list[Any]:
        return [args for call, args in self.calls if call == name]


class StorageDown(SinkError):
    retriable = True


class ScriptedTask:
    """Records the offsets it is given; ``failures`` puts raise a retriable storage error."""

    background_commits = False

    def __init__(self, failures: int = 0, prefetches: bool = False) -> None:
        self.failures = failures
        self.prefetches = prefetches
        self.put_offsets: list[list[int]] = []
        self.prefetched: list[list[int]] = []
        self.opened: list[list[TopicPartition]] = []
        self.closed: list[list[TopicPartition]] = []
        self.attempts = 0

    def start(self, config: dict[str, str]) -> None:
        pass

    def open(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        self.opened.append(list(partitions))
        return dict.fromkeys(partitions, 100)  # the storage index says: resume at 100

    def prefetch(self, batch: RecordBatch) -> bool:
        self.prefetched.append([batch.offset_at(i) for i in range(len(batch))])
        return self.prefetches

    def put(self, batch: RecordBatch) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise StorageDown("the bucket does not answer")
        self.put_offsets.append([record.offset for record in batch.records()])

    def pre_commit(self, offsets: dict[TopicPartition, int]) -> dict[TopicPartition, int]:
        return dict(offsets)

    def close(self, partitions: Sequence[TopicPartition]) -> None:
        self.closed.append(list(partitions))

    def stop(self) -> None:
        pass


def runtime_with(task: ScriptedTask, **props: str) -> tuple[SinkRuntime, RecordingConsumer]:
    cfg = parse_connector_config(
        {
            "name": "loop",
            "config": {
                "topics": "t",
                "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM t STOREAS JSON",
                "connect.storage": "local",
                "connect.local.root": "/tmp/unused",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                **props,
            },
        }
    )
    runtime = SinkRuntime(cfg, RuntimeOptions("127.0.0.1:9"), task_factory=lambda _observer: task)
    consumer = RecordingConsumer()
    runtime.start(consumer)
    return runtime, consumer


def messages(tp: TopicPartition, offsets: range) -> list[Message]:
    return [
        Message(topic=tp.topic, partition=tp.partition, offset=o, value=b'{"o": %d}' % o, timestamp=(1, o))
        for o in offsets
    ]


class Clock:
    """Stands in for time.monotonic in the loop module, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    fake = Clock()
    stand_in = SimpleNamespace(monotonic=fake.monotonic, perf_counter=time.perf_counter)
    monkeypatch.setattr(loop, "time", stand_in)
    return fake


def test_a_storage_error_pauses_the_partition_and_the_loop_keeps_polling(clock: Clock) -> None:
    task = ScriptedTask(failures=1)
    runtime, consumer = runtime_with(
        task, **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "60000"}
    )
    consumer.assign_now(TP)
    runtime.feed(messages(TP, range(100, 105)))
    # no sleep happened (the clock did not move); the partition is closed, paused, not committed
    assert consumer.named("pause") == [[("t", 0)]]
    assert task.closed == [[TP]] and TP not in runtime.positions
    runtime.feed(messages(TP, range(105, 107)))  # fetched before the pause took effect: dropped
    clock.now += 59
    runtime.feed([])
    assert consumer.named("resume") == [] and task.put_offsets == []
    clock.now += 2  # the retry interval has passed: open again, seek to the index's offset, resume
    runtime.feed([])
    assert task.opened == [[TP], [TP]]
    assert consumer.named("seek") == [("t", 0, 100)] and consumer.named("resume") == [[("t", 0)]]
    runtime.feed(messages(TP, range(100, 107)))
    assert task.put_offsets == [list(range(100, 107))]
    assert runtime.positions[TP] == 107


def test_max_retries_failures_in_a_row_stop_the_task(clock: Clock) -> None:
    """As Lenses counts (ErrorHandler + RetryErrorPolicy): the N-th failure in a row is the last."""
    task = ScriptedTask(failures=10)
    runtime, consumer = runtime_with(
        task,
        **{
            "connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000",
            "connect.s3.max.retries": "3",
        },
    )
    consumer.assign_now(TP)
    runtime.feed(messages(TP, range(100, 103)))  # failure 1: paused, retried later
    clock.now += 1.5
    runtime.feed([])
    runtime.feed(messages(TP, range(100, 103)))  # failure 2: paused, retried later
    assert len(consumer.named("pause")) == 2 and len(consumer.named("resume")) == 1
    clock.now += 1.5
    runtime.feed([])
    with pytest.raises(TaskFailedError, match=r"failed 3 times in a row \(connect.s3.max.retries=3\)"):
        runtime.feed(messages(TP, range(100, 103)))  # failure 3 stops the task
    assert task.attempts == 3


def test_a_success_gives_the_retry_budget_back(clock: Clock) -> None:
    task = ScriptedTask()
    runtime, consumer = runtime_with(
        task,
        **{
            "connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000",
            "connect.s3.max.retries": "2",
        },
    )
    consumer.assign_now(TP)
    for start in (100, 103, 106):  # each time: one failure (the budget allows one retry), then success
        task.failures = 1
        runtime.feed(messages(TP, range(start, start + 3)))
        clock.now += 1.5
        runtime.feed([])
        runtime.feed(messages(TP, range(start, start + 3)))
    assert task.put_offsets == [[100, 101, 102], [103, 104, 105], [106, 107, 108]]


def test_throw_stops_at_the_first_storage_error(clock: Clock) -> None:
    runtime, consumer = runtime_with(ScriptedTask(failures=1))
    consumer.assign_now(TP)
    with pytest.raises(StorageDown):
        runtime.feed(messages(TP, range(100, 101)))


def test_only_the_partitions_kafka_accepted_are_recorded_as_committed(clock: Clock) -> None:
    observed: list[dict[TopicPartition, int]] = []
    task = ScriptedTask()
    runtime, consumer = runtime_with(task)
    runtime.observer = SimpleNamespace(
        offsets_committed=observed.append, records_consumed=lambda *a: None, record_failed=lambda *a: None
    )
    consumer.assign_now(TP, OTHER)
    runtime.feed(messages(TP, range(100, 103)) + messages(OTHER, range(100, 102)))
    consumer.commit_errors[("t", 1)] = "NOT_COORDINATOR"
    runtime.commit()
    assert consumer.named("commit") == [[("t", 0, 103), ("t", 1, 102)]]
    assert runtime.committed == {TP: 103}
    assert observed == [{TP: 103}]
    consumer.commit_errors.clear()
    runtime.commit()  # the failed partition is tried again at the next round, the other is not
    assert consumer.named("commit")[-1] == [("t", 1, 102)]
    assert runtime.committed == {TP: 103, OTHER: 102}


def test_prefetched_batches_are_put_after_the_next_consumes_and_in_order() -> None:
    task = ScriptedTask(prefetches=True)
    runtime, consumer = runtime_with(task)
    consumer.assign_now(TP)
    fed = [list(range(100 + 2 * i, 102 + 2 * i)) for i in range(AHEAD + 2)]
    for i, offsets in enumerate(fed):
        runtime.feed(messages(TP, offsets))
        assert task.prefetched == fed[: i + 1]
        # held while the next AHEAD consumes are fetched, then put oldest first
        assert task.put_offsets == fed[: max(0, i + 1 - AHEAD)]
    runtime.feed([])  # an empty consume() writes what is held: nothing waits on an idle topic
    assert task.put_offsets == fed
    assert runtime.positions[TP] == fed[-1][-1] + 1


def test_what_is_held_goes_before_a_batch_not_prefetched() -> None:
    task = ScriptedTask(prefetches=True)
    runtime, consumer = runtime_with(task)
    consumer.assign_now(TP)
    runtime.feed(messages(TP, [100, 101]))
    task.prefetches = False
    runtime.feed(messages(TP, [102]))
    assert task.put_offsets == [[100, 101], [102]]


def test_batches_not_prefetched_are_put_at_once() -> None:
    task = ScriptedTask(prefetches=False)
    runtime, consumer = runtime_with(task)
    consumer.assign_now(TP)
    runtime.feed(messages(TP, range(100, 103)))
    assert task.put_offsets == [[100, 101, 102]]


def test_held_batches_of_a_revoked_partition_are_dropped() -> None:
    task = ScriptedTask(prefetches=True)
    runtime, consumer = runtime_with(task)
    consumer.assign_now(TP, OTHER)
    runtime.feed(messages(TP, range(100, 102)) + messages(OTHER, range(100, 102)))
    consumer.callbacks["on_revoke"](consumer, [KafkaTopicPartition("t", 0)])
    runtime.feed([])
    assert task.put_offsets == [[100, 101]]  # OTHER's batch only
    assert task.closed == [[TP]]


def test_records_a_transform_drops_let_the_kafka_offset_move_on(tmp_path: Any) -> None:
    """A topic a Filter drops whole writes nothing, and its committed offset still follows it
    (else the group's lag grows forever and a restart re-reads everything), with the real task."""
    cfg = parse_connector_config(
        {
            "name": "filtered",
            "config": {
                "topics": "t",
                "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM t STOREAS JSON",
                "connect.storage": "local",
                "connect.local.root": str(tmp_path / "store"),
                "connect.s3.local.tmp.directory": str(tmp_path / "staging"),
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                "transforms": "drop",
                "transforms.drop.type": "kcql.sink.transforms.Python",
                "transforms.drop.function": "tests.unit.transforms.mappers:only_even",
            },
        }
    )
    (tmp_path / "store" / "b").mkdir(parents=True)
    runtime = SinkRuntime(cfg, RuntimeOptions("127.0.0.1:9"))
    consumer = RecordingConsumer()
    runtime.start(consumer)
    try:
        consumer.assign_now(TP)
        odd = [
            Message(topic="t", partition=0, offset=o, value=b'{"id": %d}' % o, timestamp=(1, o))
            for o in (1, 3, 5)
        ]
        runtime.feed(odd)  # all dropped: no file, nothing open
        runtime.feed([])
        runtime.commit()
        assert consumer.named("commit")[-1] == [("t", 0, 6)]
    finally:
        runtime.shutdown()


class Denied(ScriptedTask):
    """Puts fail with a 403 (credentials or a policy): not retriable by the transport."""

    def put(self, batch: RecordBatch) -> None:
        self.attempts += 1
        if self.failures:
            self.failures -= 1
            raise AccessDenied("put s3://b/k failed: AccessDenied")
        self.put_offsets.append([record.offset for record in batch.records()])


def test_a_denial_is_retried_under_retry_as_lenses_retries_any_error(
    clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    task = Denied(failures=1)
    runtime, consumer = runtime_with(
        task, **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000"}
    )
    consumer.assign_now(TP)
    with caplog.at_level(logging.INFO, "sink.runtime.loop"):
        runtime.feed(messages(TP, range(100, 103)))  # denied: paused, said once
        assert consumer.named("pause") == [[("t", 0)]]
        clock.now += 1.5
        runtime.feed([])  # the retry: open again (the store answers), resume from the index
        runtime.feed(messages(TP, range(100, 103)))
    assert task.put_offsets == [[100, 101, 102]]
    said = [r.getMessage() for r in caplog.records if r.name == "sink.runtime.loop"]
    assert sum("refuses the sink's requests" in m for m in said) == 1, said
    assert sum("is back after" in m for m in said) == 1, said


def test_a_denial_under_throw_stops_at_once(clock: Clock) -> None:
    runtime, consumer = runtime_with(Denied(failures=1))
    consumer.assign_now(TP)
    with pytest.raises(AccessDenied, match="AccessDenied"):
        runtime.feed(messages(TP, range(100, 101)))


class IdleFailure(ScriptedTask):
    """A background commit of partition 1 failed while no record of it arrives any more."""

    def __init__(self) -> None:
        super().__init__()
        self.pending: list[BaseException] = []

    def raise_pending_errors(self) -> None:
        if self.pending:
            error = self.pending.pop()
            error.partitions = {OTHER}  # type: ignore[attr-defined]
            raise error


def test_a_failed_background_commit_pauses_an_idle_partition_at_the_next_poll(clock: Clock) -> None:
    task = IdleFailure()
    runtime, consumer = runtime_with(
        task, **{"connect.s3.error.policy": "RETRY", "connect.s3.retry.interval": "1000"}
    )
    consumer.assign_now(TP, OTHER)
    runtime.feed(messages(OTHER, range(100, 103)))
    task.pending.append(StorageDown("put s3://b/.indexes/x failed: connection refused"))
    runtime.feed([])  # no record of OTHER arrives, yet its failure is handled now
    assert consumer.named("pause") == [[("t", 1)]] and task.closed == [[OTHER]]
    assert OTHER not in runtime.positions and TP not in runtime._paused
