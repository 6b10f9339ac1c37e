"""Exactly-once under crashes: the task dies at every step of the commit sequence, a new task
takes over, replays from the offset ``open`` returns, and every record is in the committed files
exactly once. Crashes are (a) an exception injected by the fault hook, the task then abandoned
without any clean-up, and (b) a child process SIGKILLed at that step. For count, size and interval
flushes (and a PARTITIONBY layout, where writers flush ahead of the partition's safe offset), on
the local filesystem and on SeaweedFS. Read-back uses json/gzip and a raw listing only.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from sink.commit.committer import COMMIT_STEPS
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.integration._forked_child import run_child
from tests.integration._sink_support import (
    TOPIC,
    Backend,
    InjectedCrash,
    _child_main,
    data_keys,
    drive,
    make_backend,
    make_plan,
    raw_keys,
    read_json_records,
)

N = 14

FLUSHES: dict[str, dict[str, Any]] = {
    # flush.count: files of 4 records
    "count": {"count": 4, "size": 10**9, "interval": 3600, "batch": 3, "pause": 0.0},
    # flush.size: a JSON line here is ~70 bytes, so files of 3 records
    "size": {"count": 10**6, "size": 150, "interval": 3600, "batch": 2, "pause": 0.0},
    # flush.interval: only the timer flushes (1 s); batches arrive every 0.7 s
    "interval": {"count": 10**6, "size": 10**9, "interval": 1, "batch": 3, "pause": 0.7},
    # PARTITIONBY g (3 paths): writers of one Kafka partition commit ahead of each other
    "count-partitionby": {"count": 2, "size": 10**9, "interval": 3600, "batch": 4, "pause": 0.0,
                          "partition_by": True},
}


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _spec(backend: Backend, flush: str, protocol: str, step: str, tmp_path: Path) -> dict[str, Any]:
    f = FLUSHES[flush]
    name = f"conn-{uuid.uuid4().hex[:6]}"
    config = backend.config | {
        "name": name,
        "connect.s3.kcql": "unused: plans are given directly",
        "connect.s3.local.tmp.directory": str(tmp_path / "staging"),
        "connect.s3.commit.protocol": protocol,
    }
    plan = {"bucket": backend.bucket, "prefix": f"eos/{name}", "count": f["count"], "size": f["size"],
            "interval": f["interval"], "partition_by": f.get("partition_by", False)}
    return {"config": config, "plan": plan, "n": N, "batch": f["batch"], "pause": f["pause"],
            "crash_step": step, "crash_occurrence": 2}


def _recover_and_check(backend: Backend, spec: dict[str, Any]) -> None:
    """A fresh task takes over, replays, closes; then every record must be there exactly once.

    The replay uses other batches and no pauses, so interval flushes cut files elsewhere than the
    crashed run did: a commit wrongly rolled back (or done twice) then shows up as a duplicate
    instead of being hidden by an identical re-upload under the same key.
    """
    task = SinkTask()
    task.start(spec["config"], plans=[make_plan(spec["plan"])])
    try:
        resume = drive(task, spec | {"batch": 5, "pause": 0.0})
        assert 0 <= resume <= N
        task.close([TopicPartition(TOPIC, 0)])  # exactly-once mode commits open files on close
    finally:
        task.stop()
    prefix = spec["plan"]["prefix"]
    ids = Counter(value["id"] for _, value in read_json_records(backend, prefix))
    assert sorted(ids) == list(range(N)), f"missing: {sorted(set(range(N)) - set(ids))}"
    assert all(count == 1 for count in ids.values()), f"duplicates: {[i for i, c in ids.items() if c > 1]}"
    keys = raw_keys(backend)
    assert not [k for k in keys if k.startswith(".temp-upload/")], keys
    for key in data_keys(backend, prefix):
        assert ".indexes" not in key
        assert ".temp-upload" not in key
        assert ".kcql-tmp" not in key
    index = [k for k in keys if k.startswith(".indexes/")]
    assert index == [f".indexes/{spec['config']['name']}/{TOPIC}/0.json"]
    # the raw bucket holds this statement's data and the index, nothing else (no temp or staging file)
    other = [k for k in keys if not k.startswith("eos/") and k not in index]
    assert other == [], other
    assert [k for k in keys if k.startswith(prefix + "/")] == sorted(data_keys(backend, prefix))
    state = json.loads(backend.raw_read(index[0]))
    assert state["pending"] is None
    assert not state.get("owed"), state["owed"]
    assert state["committedOffset"] == N - 1


@pytest.mark.parametrize("flush", list(FLUSHES))
@pytest.mark.parametrize(("protocol", "step"), COMMIT_STEPS)
def test_exception_at_every_step(
    backend: Backend, flush: str, protocol: str, step: str, tmp_path: Path
) -> None:
    spec = _spec(backend, flush, protocol, step, tmp_path)
    crashed = threading.Event()
    seen = Counter[str]()

    def hook(name: str) -> None:
        if crashed.is_set():
            raise InjectedCrash("already dead")  # a dead task does nothing more
        if name == step:
            seen[name] += 1
            if seen[name] == spec["crash_occurrence"]:
                crashed.set()
                raise InjectedCrash(name)

    task = SinkTask()
    task.start(spec["config"], plans=[make_plan(spec["plan"])])
    task.fault_hook = hook
    try:
        with contextlib.suppress(InjectedCrash):
            drive(task, spec, dead=crashed)
        deadline = time.monotonic() + 10
        while not crashed.is_set() and time.monotonic() < deadline:
            time.sleep(0.05)  # interval flushes crash on the timer thread
        assert crashed.is_set(), f"the task never reached {step} twice"
    finally:
        task.stop()  # abandon: discards staging files, commits nothing
    _recover_and_check(backend, spec)


@pytest.mark.parametrize("flush", ["count", "size", "interval"])
@pytest.mark.parametrize(("protocol", "step"), COMMIT_STEPS)
def test_sigkill_at_every_step(
    backend: Backend, flush: str, protocol: str, step: str, tmp_path: Path
) -> None:
    spec = _spec(backend, flush, protocol, step, tmp_path)
    # forked from a server that imported the sink once (see _forked_child.py): still its own
    # process, SIGKILLed at the step, without a fresh interpreter's ~1 s of imports per case
    child = run_child(_child_main, [[json.dumps(spec)]], tmp_path / "child", timeout=120)
    stderr = child.stderr
    assert child.returncode == -9, f"child was not killed at {step}: rc={child.returncode}\n{stderr}"
    _recover_and_check(backend, spec)
