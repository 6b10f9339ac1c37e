"""Files filled by put_block are committed on a thread (SinkTask.background_commits), safely.

The runtime turns background commits on so that consuming goes on while a full file is finished,
uploaded and fsynced. What must not change: Kafka offsets (pre_commit) never pass a record that
is not in a committed file, a partition's files reach the index in order, and a failed commit
is raised by a later put naming its partition, after which a rewind (close + open) writes every
record exactly once. Real local storage; the files are read back with the json module.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from sink.config.files import parse_connector_config
from sink.records.record import TopicPartition
from sink.runtime.loop import RuntimeOptions, SinkRuntime
from sink.storage.base import TransientStorageError
from sink.task.task import SinkTask
from tests.unit.sink.test_task_put_lines import TP, block_of, committed, messages, plan_for, row, start


def ids_in(root: Path) -> list[int]:
    out: list[int] = []
    for data in committed(root).values():
        out += [json.loads(line)["id"] for line in data.decode().splitlines()]
    return sorted(out)


def background_task(root: Path, count: int) -> SinkTask:
    task = start(root, plan_for(count=count))
    task.background_commits = True
    task.open([TP])
    return task


def test_put_block_goes_on_while_a_full_file_is_committed(tmp_path: Path) -> None:
    task = background_task(tmp_path, count=100)
    release = threading.Event()
    uploading = threading.Event()

    def slow_upload(step: str) -> None:
        if step == "after-upload":
            uploading.set()
            assert release.wait(10)

    task.fault_hook = slow_upload
    msgs = messages([row(i) for i in range(250)])
    try:
        assert task.put_block(block_of(msgs[:100])) == 100  # full: handed to the commit thread
        assert uploading.wait(10)
        assert task.put_block(block_of(msgs[100:250])) == 150  # not blocked by the commit
        assert task.pre_commit({TP: 250}).get(TP, 0) == 0, "an offset passed a file still being committed"
        assert committed(tmp_path) == {}
        release.set()
        for _ in range(200):
            if task.pre_commit({TP: 250}) == {TP: 200}:
                break
            threading.Event().wait(0.05)
        assert task.pre_commit({TP: 250}) == {TP: 200}  # two files committed, 50 records open
        assert task.files_committed == 2
        task.close([TP])  # commits the open file after the background ones
        assert ids_in(tmp_path) == list(range(250))
    finally:
        release.set()
        task.stop()


def test_a_failed_background_commit_is_raised_for_its_partition_and_nothing_after_it_commits(
    tmp_path: Path,
) -> None:
    task = background_task(tmp_path, count=100)
    failures = iter([True])

    def flaky(step: str) -> None:
        if step == "after-upload" and next(failures, False):
            raise TransientStorageError("PUT of the temporary upload failed: 503 SlowDown")

    task.fault_hook = flaky
    msgs = messages([row(i) for i in range(400)])
    try:
        assert task.put_block(block_of(msgs[:100])) == 100  # its commit fails in the background
        with pytest.raises(TransientStorageError, match="SlowDown") as raised:
            for start_ in range(100, 400, 100):
                task.put_block(block_of(msgs[start_ : start_ + 100]))
                task.pre_commit({TP: start_ + 100})
                threading.Event().wait(0.05)
        assert raised.value.partitions == {TP}  # type: ignore[attr-defined]
        assert task.pre_commit({TP: 400}).get(TP, 0) == 0, "offsets passed the file that failed"
        # nothing after the failed file was committed, or the index would have skipped it
        assert committed(tmp_path) == {}
        # what the runtime does on a retriable storage error: rewind the partition
        task.close([TP])
        resume = task.open([TP]).get(TP, 0)
        assert resume == 0
        for start_ in range(resume, 400, 100):
            assert task.put_block(block_of(msgs[start_ : start_ + 100])) == 100
        task.close([TP])
        assert ids_in(tmp_path) == list(range(400))
    finally:
        task.stop()


def test_without_background_commits_a_full_file_is_committed_when_put_block_returns(tmp_path: Path) -> None:
    task = start(tmp_path, plan_for(count=100))
    try:
        task.open([TP])
        assert task.put_block(block_of(messages([row(i) for i in range(100)]))) == 100
        assert ids_in(tmp_path) == list(range(100))
    finally:
        task.stop()


# ------------------------------------------------------------------ the runtime rewinds the named partition


class _FailingTask:
    """Raises, from put and put_block, a background commit failure of partition 1."""

    def __init__(self) -> None:
        self.error = TransientStorageError("upload failed")
        self.error.partitions = {TopicPartition("t", 1)}  # type: ignore[attr-defined]

    def put(self, records: object) -> None:
        raise self.error

    def put_block(self, block: object) -> int:
        raise self.error


def _runtime(tmp_path: Path) -> SinkRuntime:
    config = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": "t",
        "connect.s3.kcql": "INSERT INTO bkt:pre SELECT * FROM t STOREAS `JSON`",
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "store"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    cfg = parse_connector_config({"name": "c", "config": config})
    runtime = SinkRuntime(cfg, RuntimeOptions("unused:9092"))
    assert runtime.task.background_commits, "the runtime turns background commits on"
    runtime.task = _FailingTask()  # type: ignore[assignment]
    return runtime


@pytest.mark.parametrize("path", ["put_block", "put"])
def test_the_runtime_rewinds_the_partition_a_failed_background_commit_names(
    tmp_path: Path, path: str
) -> None:
    """The error surfaces on a put of partition 0; partition 1's files are the ones not stored."""
    runtime = _runtime(tmp_path)
    rewound: list[set[TopicPartition]] = []
    runtime._storage_failure = lambda exc, tps: rewound.append(set(tps))  # type: ignore[method-assign]
    msgs = messages([row(i) for i in range(3)])
    blocked: set[TopicPartition] = set()
    if path == "put_block":
        assert runtime._put_block(TP, msgs, blocked) == 0
    else:
        converter = runtime.converter
        assert converter is not None
        runtime._put([(m, converter.convert(m)) for m in msgs], blocked)
    both = {TP, TopicPartition("t", 1)}
    assert rewound == [both]
    assert blocked == both


def test_partitions_commit_in_parallel_and_each_partition_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0's first upload hangs: partition 1's file is committed meanwhile, partition 0's
    second file is not (it waits for the first, or the index would run ahead of the data)."""
    task = background_task(tmp_path, count=100)
    other = TopicPartition("t", 1)
    task.open([other])
    current = threading.local()
    run = task._run_background_commit

    def tagged(job, previous):  # type: ignore[no-untyped-def]
        current.tp = job.state.tp
        return run(job, previous)

    monkeypatch.setattr(task, "_run_background_commit", tagged)
    release = threading.Event()
    hung = threading.Event()

    def hang_partition_0(step: str) -> None:
        if step == "after-upload" and current.tp == TP and not hung.is_set():
            hung.set()
            assert release.wait(10)

    task.fault_hook = hang_partition_0
    p0 = messages([row(i) for i in range(200)])
    p1 = messages([row(1000 + i) for i in range(100)], partition=1)
    try:
        assert task.put_block(block_of(p0[:100])) == 100
        assert hung.wait(10)
        assert task.put_block(block_of(p0[100:])) == 100
        assert task.put_block(block_of(p1)) == 100
        for _ in range(200):
            if ids_in(tmp_path):
                break
            threading.Event().wait(0.05)
        threading.Event().wait(0.3)  # room for partition 0's second file, were it not waiting
        assert ids_in(tmp_path) == list(range(1000, 1100)), "partition 1 waited, or partition 0 ran ahead"
        release.set()
        task.close([TP, other])
        assert ids_in(tmp_path) == [*range(200), *range(1000, 1100)]
    finally:
        release.set()
        task.stop()
