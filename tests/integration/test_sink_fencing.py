"""Fencing: when two tasks hold the same partition, only the newest owner can commit.

A rebalance can leave the previous owner (a *zombie*) running for a while. These tests open the
same partition in two tasks, also in the middle of the zombie's commit sequence (the new owner
opens from inside the zombie's fault hook), and check that the zombie gets a clear
``FencedError`` at its next index write, that the new owner's recovery finishes or undoes the
zombie's half-done commit, and that after the new owner's replay every record is in storage
exactly once. Real local directory and real SeaweedFS.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from kcql.errors import SinkError
from sink.commit.committer import COMMIT_STEPS
from sink.commit.index import FencedError
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_crash_driver import PARTITION, TOPIC, make_records
from tests.integration._sink_support import Backend, make_backend, raw_keys, read_json_records

TP = TopicPartition(TOPIC, PARTITION)
PREFIX = "out"


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _config(
    backend: Backend, tmp_path: Path, count: int = 4, extra: dict[str, str] | None = None
) -> dict[str, str]:
    kcql = (
        f"INSERT INTO {backend.bucket}:{PREFIX} SELECT * FROM {TOPIC} PARTITIONBY kind STOREAS JSON "  # noqa: S608
        f"PROPERTIES('flush.count'={count}, 'flush.interval'=3600)"
    )
    return (
        backend.config
        | {
            "name": "fence-test",
            "connect.s3.kcql": kcql,
            "connect.s3.local.tmp.directory": str(tmp_path / "stage"),
        }
        | (extra or {})
    )


def _started(config: dict[str, str]) -> SinkTask:
    task = SinkTask()
    task.start(config)
    return task


def _replay_and_close(task: SinkTask, total: int) -> None:
    start = task.open([TP]).get(TP, 0)
    for first in range(start, total, 5):
        put_records(task, make_records(first, min(first + 5, total)))
    task.close([TP])


def _assert_exactly_once(backend: Backend, total: int) -> None:
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    duplicates = {i: n for i, n in counts.items() if n > 1}
    missing = sorted(set(range(total)) - set(counts))
    assert not duplicates and not missing, f"duplicates {duplicates}, missing {missing}"
    assert not [k for k in raw_keys(backend) if k.startswith(".temp-upload/")]


def test_only_the_newest_owner_can_commit(backend: Backend, tmp_path: Path) -> None:
    config = _config(backend, tmp_path)
    old, new = _started(config), _started(config)
    try:
        old.open([TP])
        # "b" (0, 3, 6, 9) and "a" (1, 2, 4, 5) files committed, 7, 8 open
        put_records(old, make_records(0, 10))
        new.open([TP])  # the rebalance hands the partition over: the old task is now a zombie
        with pytest.raises(FencedError) as err:
            put_records(old, make_records(10, 14))  # completes the "a" file -> its commit must be refused
        message = str(err.value)
        assert f"is now owned by task {new.task_id} (epoch 2)" in message
        assert f"partition {TP}" in message and old.task_id in message
        with pytest.raises(SinkError, match="not open on this task"):  # the zombie dropped it
            put_records(old, make_records(14, 15))
        _replay_and_close(new, 20)
    finally:
        old.stop()
        new.stop()
    _assert_exactly_once(backend, 20)


@pytest.mark.parametrize(
    ("protocol", "step"),
    [(p, s) for p, s in COMMIT_STEPS if s != "after-index-committed"],  # after it: nothing left to fence
)
def test_zombie_fenced_in_the_middle_of_its_commit(
    backend: Backend, tmp_path: Path, protocol: str, step: str
) -> None:
    """The new owner opens while the zombie is between two storage calls of one commit.

    Conditional protocol at ``after-pending-recorded``: the owner owes the zombie's announced file,
    and the zombie's PUT of it lands after the owner's recovery; the owner's own PUT of the same
    file then gets 412 and counts it as done.
    """
    protocol_key = {"connect.s3.commit.protocol": protocol}
    # the new owner cuts files at another flush.count: a zombie file it failed to owe (or to roll
    # forward) would then hold records the owner writes again under other names
    zombie = _started(_config(backend, tmp_path, extra=protocol_key))
    owner = _started(_config(backend, tmp_path, count=2, extra=protocol_key))
    took_over: list[dict[TopicPartition, int]] = []

    def take_over(reached: str) -> None:
        if reached == step and not took_over:
            took_over.append(owner.open([TP]))

    try:
        zombie.open([TP])
        zombie.fault_hook = take_over
        with pytest.raises(FencedError, match=f"now owned by task {owner.task_id}"):
            put_records(zombie, make_records(0, 12))
        assert took_over, f"the zombie never reached {step}"
        _replay_and_close(owner, 20)
    finally:
        zombie.stop()
        owner.stop()
    _assert_exactly_once(backend, 20)


def test_zombie_upload_after_the_owner_rolled_its_file_forward(backend: Backend, tmp_path: Path) -> None:
    """Conditional protocol, the other order: the zombie announced a file and stalls; the new owner
    owes it, replays, re-produces it exactly (at another flush.count) and commits it; then the
    zombie's PUT of the same key is refused (412, the same records) and its index write is fenced."""
    config = _config(backend, tmp_path, extra={"connect.s3.commit.protocol": "conditional"})
    zombie, owner = _started(config), _started(_config(backend, tmp_path, count=2, extra={
        "connect.s3.commit.protocol": "conditional", "connect.s3.local.tmp.directory": str(tmp_path / "s2"),
    }))
    announced: list[str] = []

    def stall(reached: str) -> None:
        if reached == "after-pending-recorded" and not announced:
            state = zombie._partitions[TP].index.state  # type: ignore[union-attr]
            assert state.pending is not None
            announced.append(state.pending.final_key)
            _replay_and_close(owner, 20)  # the whole take-over happens while the zombie stalls
            assert announced[0] in raw_keys(backend), "the owner did not commit the owed file"

    try:
        zombie.open([TP])
        zombie.fault_hook = stall
        with pytest.raises(FencedError, match=f"now owned by task {owner.task_id}"):
            put_records(zombie, make_records(0, 12))
        assert announced
    finally:
        zombie.stop()
        owner.stop()
    _assert_exactly_once(backend, 20)


def test_a_commit_after_close_and_reopen_elsewhere_is_refused_even_without_new_records(
    backend: Backend, tmp_path: Path
) -> None:
    """close() commits open files; for a zombie whose partition moved, that commit is refused and
    the records are left to the new owner (nothing lost, nothing twice)."""
    config = _config(backend, tmp_path, count=1000)
    zombie, owner = _started(config), _started(config)
    try:
        zombie.open([TP])
        put_records(zombie, make_records(0, 7))  # nothing reaches flush.count: all open
        owner.open([TP])
        zombie.close([TP])  # logs the fencing, discards its files
        assert read_json_records(backend, PREFIX) == []
        _replay_and_close(owner, 7)
    finally:
        zombie.stop()
        owner.stop()
    _assert_exactly_once(backend, 7)


def test_weak_mode_without_conditional_writes_still_fences_a_stale_task(
    request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """``connect.s3.conditional.writes=false``: no If-Match is sent; the owner is re-read instead."""
    backend = make_backend("s3", tmp_path, request)
    config = _config(backend, tmp_path, extra={"connect.s3.conditional.writes": "false"})
    old, new = _started(config), _started(config)
    try:
        old.open([TP])
        put_records(old, make_records(0, 6))
        new.open([TP])
        with pytest.raises(FencedError, match=f"now owned by task {new.task_id}"):
            put_records(old, make_records(6, 12))
        _replay_and_close(new, 12)
    finally:
        old.stop()
        new.stop()
    _assert_exactly_once(backend, 12)
