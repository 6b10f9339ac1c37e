"""``kcql-sink replay`` as a process on real Tansu: SIGKILLed mid-run, and ``--follow`` behind a live sink."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from tests.integration._replay_support import produce, read_topic, sink_props, source_records
from tests.integration._run_support import RunningSink, make_config, wait_for

REPO = Path(__file__).parent.parent.parent
KILL_N = 6000
PARTS = 2


class LiveSink:
    def __init__(self, root: Path, kill_topic: str, follow_topic: str) -> None:
        self.root = root
        self.kill_topic = kill_topic
        self.follow_topic = follow_topic


@pytest.fixture(scope="module")
def live(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveSink]:
    root = tmp_path_factory.mktemp("replay-live")
    kill_topic = f"rk-{uuid.uuid4().hex[:6]}"
    follow_topic = f"rf-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": kafka_bootstrap})
    for fut in admin.create_topics(
        [NewTopic(t, num_partitions=PARTS) for t in (kill_topic, follow_topic)]
    ).values():
        fut.result(10)
    produce(kafka_bootstrap, kill_topic, source_records(KILL_N, PARTS))
    kcql = (
        f"INSERT INTO arch:kill SELECT * FROM `{kill_topic}` STOREAS JSON "  # noqa: S608
        "PROPERTIES('store.envelope'=true, 'flush.count'=50, 'flush.interval'=1);\n"
        f"INSERT INTO arch:follow SELECT * FROM `{follow_topic}` STOREAS AVRO "
        "PROPERTIES('store.envelope'=true, 'flush.count'=1000, 'flush.interval'=1)"
    )
    sink = RunningSink(make_config(sink_props(str(root), [kill_topic, follow_topic], kcql)), kafka_bootstrap)
    try:
        yield LiveSink(root, kill_topic, follow_topic)
    finally:
        sink.join()
    assert sink.error is None, sink.error


def _config(tmp_path: Path, live: LiveSink, target: str, prefix: str, fmt: str) -> Path:
    path = tmp_path / f"replay-{uuid.uuid4().hex[:6]}.json"
    props: dict[str, Any] = {
        "connect.s3.kcql": f"INSERT INTO {target} SELECT * FROM arch:{prefix} STOREAS {fmt} "  # noqa: S608
        "PROPERTIES('store.envelope'=true)",
        "connect.storage": "local",
        "connect.local.root": str(live.root),
    }
    path.write_text(json.dumps({"name": f"replay-{uuid.uuid4().hex[:8]}", "config": props}))
    return path


def _start(config: Path, bootstrap: str, *extra: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "sink.cli", "replay", str(config), "--bootstrap-servers", bootstrap, *extra],
        stdout=subprocess.DEVNULL,
        stderr=config.with_suffix(".log").open("ab"),
        cwd=REPO,
        env={**os.environ, "KCQL_SINK_LOG_LEVEL": "INFO"},
    )


def _archived(live: LiveSink, prefix: str) -> int:
    base = live.root / "arch" / prefix
    if not base.is_dir():
        return 0
    total = 0
    for dirpath, _dirs, files in os.walk(base):
        for name in files:
            if name.endswith(".json") and not name.startswith("."):
                total += sum(1 for line in Path(dirpath, name).read_bytes().splitlines() if line.strip())
    return total


# both chaos (make test's suite budget); test_replay_roundtrip.py runs the replay itself in make test
@pytest.mark.chaos
@pytest.mark.parametrize("kills", [2, 5])
def test_sigkills_mid_run_leave_every_record_exactly_once(
    kafka_bootstrap, topic_factory, live, tmp_path, kills
):
    """SIGKILL the replay ``kills`` times, each after it made progress of its own, then let it finish.

    Five kills (the issue's figure) run with ``make chaos``; two in the default run.
    """
    wait_for(lambda: _archived(live, "kill") == KILL_N, 60, "the archive written")
    source = read_topic(kafka_bootstrap, live.kill_topic)
    target = topic_factory("rk-b", partitions=PARTS)
    config = _config(tmp_path, live, target, "kill", "JSON")
    done = 0
    seen = 0
    while done < kills:
        proc = _start(config, kafka_bootstrap, "--batch", "2")
        try:
            # kill only once this run has made progress of its own: B grew since the last kill
            wait_for(
                lambda p=proc, n=seen: p.poll() is not None or len(read_topic(kafka_bootstrap, target)) > n,
                60,
                "replay progress",
            )
            assert proc.poll() is None, f"replay finished before kill {done + 1}; the archive is too small"
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
            done += 1
            seen = len(read_topic(kafka_bootstrap, target))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert 0 < seen < KILL_N + kills * 2
    final = _start(config, kafka_bootstrap, "--batch", "2")
    assert final.wait(120) == 0, config.with_suffix(".log").read_text()
    got = read_topic(kafka_bootstrap, target)
    assert Counter(got) == Counter(source)  # every record exactly once, key/value/headers/timestamp/partition
    for p in range(PARTS):  # and in offset order per partition
        assert [r for r in got if r[0] == p] == [r for r in source if r[0] == p]


def _avro_files(live: LiveSink) -> int:
    base = live.root / "arch" / "follow"
    return len(list(base.rglob("*.avro"))) if base.is_dir() else 0


def test_follow_replays_within_seconds_of_commit(kafka_bootstrap, topic_factory, live, tmp_path):
    target = topic_factory("rf-b", partitions=PARTS)
    config = _config(tmp_path, live, target, "follow", "AVRO")
    proc = _start(config, kafka_bootstrap, "--follow", "--poll-interval", "0.2")
    log = config.with_suffix(".log")
    try:
        # the lag of following, not of starting: start-up reads the whole position topic, which
        # Tansu never compacts (4.3 s at the end of a make chaos run, after the kill tests' 6,000
        # transactions; the replay logs it), so round 0 waits for the replay to say it is ready
        def ready() -> bool:
            return proc.poll() is not None or " ready in " in log.read_text(errors="replace")

        wait_for(ready, 60, "the replay ready")
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        for round_no in range(2):
            records = source_records(20, PARTS)
            records = [
                (p, k + f"-{round_no}".encode(), v, h, ts + 1000 * round_no) for p, k, v, h, ts in records
            ]
            produce(kafka_bootstrap, live.follow_topic, records)
            # first the sink's commit (both partitions' files are visible), then the replay
            wait_for(lambda n=round_no: _avro_files(live) >= 2 * (n + 1), 60, "the sink's commit")
            committed_at = time.monotonic()
            reads: list[float] = []  # how long each read of the target took (part of the lag)

            def replayed(n: int = round_no, reads: list[float] = reads) -> bool:
                began = time.monotonic()
                got = len(read_topic(kafka_bootstrap, target))
                reads.append(time.monotonic() - began)
                return got == 20 * (n + 1)

            wait_for(replayed, 30, "replayed")
            lag = time.monotonic() - committed_at
            assert lag < 5, (
                f"round {round_no}: replayed {lag:.1f}s after the sink's commit; {len(reads)} reads of the "
                f"target, the longest {max(reads):.2f}s; replay log:\n"
                + log.read_text(errors="replace")[-4000:]
            )
        assert proc.poll() is None, "--follow exited"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
