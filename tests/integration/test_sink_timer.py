"""The flush timer: interval flushes happen on idle partitions, concurrently with ``put``.

Lenses checks ``flush.interval`` only when a record arrives and Confluent only on the next
record too, so an idle partition's last file waits forever. Here a timer thread commits it; the
tests measure that the data becomes visible within ``flush.interval + 2 s`` without another
call into the task, that ``put`` from another thread and the timer never corrupt or duplicate a
file, and that a commit failing on the timer thread is reported by the next ``put`` and retried.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_crash_driver import PARTITION, TOPIC, make_records
from tests.integration._sink_support import Backend, data_keys, make_backend, raw_keys, read_json_records

TP = TopicPartition(TOPIC, PARTITION)
PREFIX = "out"
INTERVAL = 1


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _task(backend: Backend, tmp_path: Path, partition_by: str = "") -> SinkTask:
    kcql = (
        f"INSERT INTO {backend.bucket}:{PREFIX} SELECT * FROM {TOPIC} {partition_by} STOREAS JSON "  # noqa: S608
        f"PROPERTIES('flush.count'=100000, 'flush.interval'={INTERVAL})"
    )
    task = SinkTask()
    task.start(
        backend.config
        | {
            "name": "timer-test",
            "connect.s3.kcql": kcql,
            "connect.s3.local.tmp.directory": str(tmp_path / "stage"),
        }
    )
    return task


def _ids(backend: Backend) -> Counter[int]:
    return Counter(value["id"] for _, value in read_json_records(backend, PREFIX))


def test_idle_partition_is_visible_within_interval_plus_two_seconds(backend: Backend, tmp_path: Path) -> None:
    task = _task(backend, tmp_path, "PARTITIONBY kind")
    try:
        task.open([TP])
        put_records(task, make_records(0, 7))  # two open files ("a" and "b"), far below flush.count
        written = time.monotonic()
        time.sleep(INTERVAL * 0.5)
        assert data_keys(backend, PREFIX) == [], "nothing may be committed before flush.interval"
        while time.monotonic() - written < INTERVAL + 2:
            if sum(_ids(backend).values()) == 7:
                break
            time.sleep(0.05)
        elapsed = time.monotonic() - written
        assert _ids(backend) == Counter(range(7)), f"not all visible {elapsed:.2f}s after the last put"
        assert elapsed < INTERVAL + 2
        assert len(data_keys(backend, PREFIX)) == 2
        # pre_commit agrees: everything is durable, so the next offset to read is safe.
        assert task.pre_commit({TP: 7}) == {TP: 7}
    finally:
        task.stop()


def test_put_from_another_thread_races_the_timer_without_loss_or_duplicates(
    backend: Backend, tmp_path: Path
) -> None:
    task = _task(backend, tmp_path)
    total = 120
    errors: list[BaseException] = []

    def producer() -> None:
        try:
            for start in range(0, total, 3):
                put_records(task, make_records(start, start + 3))
                time.sleep(0.03)  # ~1.2 s of puts: the timer fires in between
        except BaseException as exc:
            errors.append(exc)

    try:
        task.open([TP])
        thread = threading.Thread(target=producer)
        thread.start()
        thread.join(timeout=60)
        assert not errors, errors
        task.close([TP])
    finally:
        task.stop()
    counts = _ids(backend)
    assert counts == Counter(range(total)), {i: n for i, n in counts.items() if n != 1}
    assert len(data_keys(backend, PREFIX)) >= 2, "the timer should have committed while records arrived"


def test_a_commit_failing_on_the_timer_thread_is_raised_by_the_next_put_and_retried(
    backend: Backend, tmp_path: Path
) -> None:
    task = _task(backend, tmp_path)
    failures: list[str] = []

    def fail_once(step: str) -> None:
        if step == "after-upload" and not failures:
            failures.append(threading.current_thread().name)
            raise OSError("injected: the network went away")

    try:
        task.open([TP])
        task.fault_hook = fail_once
        put_records(task, make_records(0, 5))
        deadline = time.monotonic() + INTERVAL + 2
        while not failures and time.monotonic() < deadline:
            time.sleep(0.05)
        assert failures and failures[0] != threading.current_thread().name, "the timer thread commits"
        assert task.pre_commit({TP: 5}).get(TP, 0) == 0, "offsets must not pass the uncommitted file"
        with pytest.raises(OSError, match="injected"):
            put_records(task, make_records(5, 6))
        while sum(_ids(backend).values()) < 5 and time.monotonic() < deadline + INTERVAL + 2:
            time.sleep(0.05)  # the timer retries the finished file
        put_records(task, make_records(5, 8))
        task.close([TP])
    finally:
        task.stop()
    assert _ids(backend) == Counter(range(8))
    # The failed attempt's upload may linger under the hidden temp folder; the next open removes it.
    successor = _task(backend, tmp_path)
    try:
        assert successor.open([TP]) == {TP: 8}
    finally:
        successor.stop()
    assert not [k for k in raw_keys(backend) if k.startswith(".temp-upload/")]
