"""Exactly-once under SIGKILL: a child process dies at every step of the commit sequence.

For each commit step of both protocols (:data:`sink.commit.committer.COMMIT_STEPS`), each flush
mode (count, size, interval) and each backend (a local directory, a real SeaweedFS), the driver in
``_sink_crash_driver.py`` runs a task in a separate process and kills it with ``SIGKILL`` the
second time it reaches that step (so committed files already exist next to the interrupted one).
A new task in this process then does what a Connect worker does after a crash: ``open`` (which
recovers the interrupted commit), replay from the offset ``open`` returns, or from the consumer
group offset the dead task had pre-committed, and ``close``. The committed files are then listed
raw, filtered with ``partitioners.is_data_key``, read back with the standard ``json`` module, and
every record must be there exactly once; no temp upload may be left, and nothing but data and
the index may be in the bucket.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from pathlib import Path

import pytest

from sink.commit.committer import COMMIT_STEPS
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._forked_child import run_child
from tests.integration._sink_crash_driver import PARTITION, TOPIC, main, make_records
from tests.integration._sink_support import Backend, make_backend, raw_keys, read_json_records

RECORDS = 20
PREFIX = "out"

FLUSH = {
    # flush.count: files of 3 records per partition path.
    "count": "'flush.count'=3, 'flush.size'=100000000, 'flush.interval'=3600",
    # flush.size: each line is ~40 bytes, so a file rolls after 3 lines.
    "size": "'flush.count'=100000, 'flush.size'=100, 'flush.interval'=3600",
    # flush.interval: only the timer commits (the driver idles 1.4 s after each batch).
    "interval": "'flush.count'=100000, 'flush.size'=100000000, 'flush.interval'=1",
}

# The task after the crash cuts files differently (as after a config change or a different
# batching), so a replayed record lands in a file with another name: only the index can stop a
# duplicate, deterministic names alone cannot hide one.
RECOVERY_FLUSH = "'flush.count'=2, 'flush.size'=100000000, 'flush.interval'=3600"

# Copy-protocol steps after which the temporary upload must still be in the bucket when the
# process dies (the conditional protocol has no temporary upload).
TEMP_LEFT_BEHIND = {"after-upload", "after-pending-recorded", "after-copy"}


def _config(backend: Backend, flush: str, staging: Path, protocol: str = "auto") -> dict[str, str]:
    kcql = (
        f"INSERT INTO {backend.bucket}:{PREFIX} SELECT * FROM {TOPIC} PARTITIONBY kind "  # noqa: S608
        f"STOREAS JSON PROPERTIES({flush})"
    )
    return backend.config | {
        "name": "crash-test",
        "connect.s3.kcql": kcql,
        "connect.s3.local.tmp.directory": str(staging),
        "connect.s3.commit.protocol": protocol,
    }


def _run_child(
    tmp_path: Path,
    config: dict[str, str],
    mode: str,
    step: str,
    kill_at: int = 2,
    storage_kill: dict[str, object] | None = None,
) -> Path:
    group_file = tmp_path / "group-offset"
    spec = {
        "config": config,
        "records": RECORDS,
        "batch": 4,
        "mode": mode,
        "sleep_after_batch": 1.4,
        "kill_step": step,
        "kill_at": kill_at,
        "storage_kill": storage_kill,
        "group_offset_file": str(group_file),
    }
    spec_path = tmp_path / "spec.json"
    spec_path.write_text(json.dumps(spec))
    # forked from a server that imported the sink once: a fresh interpreter per child spent ~1 s
    # importing it (see _forked_child.py); the child is still its own process, SIGKILLed
    proc = run_child(main, [str(spec_path)], tmp_path / "child", timeout=120)
    assert proc.returncode == -signal.SIGKILL, (
        f"the driver was meant to die by SIGKILL at {step!r} but exited {proc.returncode}\n"
        f"stdout: {proc.stdout}\nstderr: {proc.stderr[-3000:]}"
    )
    return group_file


safe_after_replay: list[int] = []
"""The next offset the recovering task called safe to commit to Kafka, just before it closed."""


def _recover(config: dict[str, str], group_file: Path) -> int:
    """A fresh task after the crash: open, replay from where Connect would, close. Returns the start."""
    task = SinkTask()
    task.start(config)
    tp = TopicPartition(TOPIC, PARTITION)
    try:
        resume = task.open([tp]).get(tp)
        if resume is None:  # nothing in the index: the group offset (or the beginning) decides
            resume = int(group_file.read_text()) if group_file.exists() else 0
        for start in range(resume, RECORDS, 4):
            put_records(task, make_records(start, min(start + 4, RECORDS)))
        safe_after_replay[:] = [task.pre_commit({tp: RECORDS}).get(tp, 0)]
        task.close([tp])
    finally:
        task.stop()
    return resume


@pytest.mark.parametrize("mode", sorted(FLUSH))
@pytest.mark.parametrize(("protocol", "step"), COMMIT_STEPS)
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_at_every_commit_step_loses_and_duplicates_nothing(
    kind: str, protocol: str, step: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = make_backend(kind, tmp_path, request)
    config = _config(backend, FLUSH[mode], tmp_path / "staging", protocol)
    group_file = _run_child(tmp_path, config, mode, step)

    after_crash = raw_keys(backend)
    temps = [k for k in after_crash if k.startswith(".temp-upload/")]
    if protocol == "copy" and step in TEMP_LEFT_BEHIND:
        assert temps, f"killed {step}: the temporary upload should still exist, got {after_crash}"
    else:
        assert not temps, after_crash
    # Whatever a reader sees right after the crash is complete, parseable data, never a duplicate.
    visible = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    assert all(n == 1 for n in visible.values()), visible
    assert visible, "two commits were reached, so some data must be visible"

    resume = _recover(_config(backend, RECOVERY_FLUSH, tmp_path / "staging", protocol), group_file)
    assert 0 <= resume < RECORDS

    records = read_json_records(backend, PREFIX)
    counts = Counter(value["id"] for _, value in records)
    duplicates = {i: n for i, n in counts.items() if n > 1}
    missing = sorted(set(range(RECORDS)) - set(counts))
    assert not duplicates and not missing, f"duplicates {duplicates}, missing {missing}"
    for key, value in records:  # every record sits under its own PARTITIONBY value
        assert f"/kind={value['kind']}/" in f"/{key}"

    final = raw_keys(backend)
    stray = [k for k in final if not k.startswith(f"{PREFIX}/") and not k.startswith(".indexes/")]
    assert not stray, f"only data and the index may remain in the bucket: {stray}"
    indexes = [k for k in final if k.startswith(".indexes/")]
    assert indexes
    state = json.loads(backend.raw_read(indexes[0]))
    assert state["pending"] is None and not state.get("owed"), state


def _owed(backend: Backend) -> list[dict[str, object]]:
    (key,) = [k for k in raw_keys(backend) if k.startswith(".indexes/")]
    state = json.loads(backend.raw_read(key))
    return [*([state["pending"]] if state["pending"] else []), *state.get("owed", [])]


@pytest.mark.parametrize("mode", ["count", "interval"])
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_with_open_files_between_commits(
    kind: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Killed after its third batch with files open: exactly once again after recovery."""
    backend = make_backend(kind, tmp_path, request)
    config = _config(backend, FLUSH[mode], tmp_path / "staging")
    group_file = _run_child(tmp_path, config, mode, "after-batch", kill_at=3)
    _recover(_config(backend, RECOVERY_FLUSH, tmp_path / "staging"), group_file)
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    assert counts == Counter(range(RECORDS)), {i: n for i, n in counts.items() if n != 1}


@pytest.mark.parametrize("mode", ["count", "interval"])
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_without_exactly_once_loses_nothing(
    kind: str, mode: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """``connect.s3.exactly.once.enable=false`` is at-least-once: after a crash the task replays from
    the group offset, which ``pre_commit`` never moved past a record that was not yet uploaded. So
    nothing is lost (duplicates are allowed and documented), and no index or temp key exists."""
    backend = make_backend(kind, tmp_path, request)
    off = {"connect.s3.exactly.once.enable": "false"}
    config = _config(backend, FLUSH[mode], tmp_path / "staging") | off
    group_file = _run_child(tmp_path, config, mode, "after-batch", kill_at=3)
    assert group_file.exists(), "some files were committed, so the group offset moved"
    resume = _recover(_config(backend, RECOVERY_FLUSH, tmp_path / "staging") | off, group_file)
    assert resume == int(group_file.read_text())
    # close() discards open files when exactly-once is off (the next run replays them from the
    # group offset), so what must be in storage is everything before the recovering task's safe offset.
    safe = safe_after_replay[0]
    assert RECORDS - 6 <= safe <= RECORDS
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    missing = sorted(set(range(safe)) - set(counts))
    assert not missing, f"records lost without exactly-once: {missing}"
    assert all(key.startswith(f"{PREFIX}/") for key in raw_keys(backend)), raw_keys(backend)


@pytest.mark.parametrize(
    ("method", "nth", "what"),
    [
        ("put_bytes", 1, "after taking ownership, before the roll-forward"),
        ("copy", 1, "after the roll-forward's copy"),
        ("delete", 1, "after the roll-forward deleted the temp upload"),
        ("put_bytes", 2, "after the roll-forward's index update"),
    ],
)
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_during_recovery_of_an_interrupted_commit(
    kind: str, method: str, nth: int, what: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """A first process dies with a pending commit; the next one dies while rolling it forward
    (in ``open``); a third recovers. Recovery must itself be restartable at every storage call."""
    backend = make_backend(kind, tmp_path, request)
    config = _config(backend, FLUSH["count"], tmp_path / "staging", "copy")
    group_file = _run_child(tmp_path, config, "count", "after-pending-recorded")
    pending = [k for k in raw_keys(backend) if k.startswith(".temp-upload/")]
    assert pending, "the first crash must leave a pending commit"
    _run_child(tmp_path, config, "count", "never", storage_kill={"method": method, "nth": nth})
    _recover(_config(backend, RECOVERY_FLUSH, tmp_path / "staging", "copy"), group_file)
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    assert counts == Counter(range(RECORDS)), f"{what}: { ({i: n for i, n in counts.items() if n != 1}) }"
    assert not [k for k in raw_keys(backend) if k.startswith(".temp-upload/")]


@pytest.mark.parametrize(
    ("method", "nth", "what"),
    [
        ("put_bytes", 1, "after taking ownership, before recording the owed file"),
        ("put_bytes", 2, "after recording the owed file, before the replay"),
        ("put_file", 1, "after the replay's first upload (the owed file or another path's)"),
        ("put_bytes", 3, "after the replay's first index write"),
    ],
)
@pytest.mark.parametrize("kind", ["local", "s3"])
def test_sigkill_while_rolling_an_owed_file_forward(
    kind: str, method: str, nth: int, what: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Conditional protocol: a first process dies after announcing a file (its final key never
    written); the next one dies while owing and re-producing it; a third recovers, cutting files
    at another flush.count: the owed file is still cut exactly as announced, under its key."""
    backend = make_backend(kind, tmp_path, request)
    config = _config(backend, FLUSH["count"], tmp_path / "staging", "conditional")
    group_file = _run_child(tmp_path, config, "count", "after-pending-recorded")
    (announced,) = _owed(backend)
    assert str(announced["finalKey"]) not in raw_keys(backend), "the announced file must not exist yet"
    _run_child(tmp_path, config, "count", "never", storage_kill={"method": method, "nth": nth})
    _recover(_config(backend, RECOVERY_FLUSH, tmp_path / "staging", "conditional"), group_file)
    counts = Counter(value["id"] for _, value in read_json_records(backend, PREFIX))
    assert counts == Counter(range(RECORDS)), f"{what}: { ({i: n for i, n in counts.items() if n != 1}) }"
    assert str(announced["finalKey"]) in raw_keys(backend), "the owed file was committed under another key"
    assert _owed(backend) == []
