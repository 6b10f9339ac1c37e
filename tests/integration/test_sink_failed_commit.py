"""A commit that *fails* midway (a storage error, not a crash) must not be forgotten.

Writer A's copy (or conditional PUT) to its final key succeeds, then the next step fails: A's file
is visible, and the index's pending operation is the only record of it. Or (conditional protocol)
A's commit fails after it was announced: it becomes owed, and the successor must re-produce it.
If another writer of the same Kafka partition then commits, it must not overwrite that pending
operation without finishing it first: after a crash the replay would write A's records again
under another name (the recovering task cuts files differently), a duplicate.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_crash_driver import PARTITION, TOPIC, make_records
from tests.integration._sink_support import Backend, make_backend, read_json_records

TP = TopicPartition(TOPIC, PARTITION)
PREFIX = "out"


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _config(backend: Backend, tmp_path: Path, count: int, protocol: str) -> dict[str, str]:
    kcql = (
        f"INSERT INTO {backend.bucket}:{PREFIX} SELECT * FROM {TOPIC} PARTITIONBY kind STOREAS JSON "  # noqa: S608
        f"PROPERTIES('flush.count'={count}, 'flush.interval'=3600)"
    )
    return backend.config | {
        "name": "failed-commit",
        "connect.s3.kcql": kcql,
        "connect.s3.local.tmp.directory": str(tmp_path / "stage"),
        "connect.s3.commit.protocol": protocol,
    }


@pytest.mark.parametrize(
    ("protocol", "step"),
    [
        ("copy", "after-copy"),
        ("copy", "after-delete-temp"),
        ("conditional", "after-upload"),  # visible, index not advanced
        ("conditional", "after-pending-recorded"),  # announced, not uploaded: owed, re-produced
    ],
)
def test_a_failed_commit_is_finished_before_another_writer_commits(
    backend: Backend, tmp_path: Path, protocol: str, step: str
) -> None:
    task = SinkTask()
    task.start(_config(backend, tmp_path, count=3, protocol=protocol))
    failed: list[str] = []

    def fail_once(reached: str) -> None:
        if reached == step and not failed:
            failed.append(reached)
            raise OSError(f"injected: storage error {step}")

    try:
        task.open([TP])
        task.fault_hook = fail_once
        # offsets 1, 2, 4 are kind "a": the "a" file is due at offset 4 and its commit fails
        # after the copy; 0 and 3 are kind "b" and stay open.
        with pytest.raises(OSError, match="injected"):
            put_records(task, make_records(0, 5))
        put_records(task, make_records(6, 7))  # kind "b" (0, 3, 6): the "b" file commits now
        assert failed
    finally:
        task.stop()  # crash: the failed "a" file is never retried by this task

    successor = SinkTask()
    successor.start(_config(backend, tmp_path, count=2, protocol=protocol))  # cuts files differently
    try:
        resume = successor.open([TP]).get(TP, 0)
        for start in range(resume, 12, 3):
            put_records(successor, make_records(start, min(start + 3, 12)))
        successor.close([TP])
    finally:
        successor.stop()
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    assert counts == Counter(range(12)), {i: n for i, n in counts.items() if n != 1}
