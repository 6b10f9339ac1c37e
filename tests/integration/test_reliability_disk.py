"""Full staging disk: the staging directory runs out of space in the middle of a file.

The staging directory (``connect.s3.local.tmp.directory``) is a real, small tmpfs mounted for the
test (we run as root in the test container), filled up with a ballast file so that the next
staging file hits ENOSPC part way. The sink must say clearly that the staging directory is full
(naming it), keep nothing half-written, and once the ballast is removed write every record
exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.crash import FAST_CONSUMER, start_sink
from chaos.reader import read_local

RECORDS = 3000
PARTITIONS = 2


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs; skipped (a failure of the session, see conftest) when mounting is not allowed."""
    mount = tmp_path / "staging-fs"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount)], capture_output=True, text=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs for the staging directory: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _fill(mount: Path, leave: int) -> Path:
    """Fill ``mount`` until ``leave`` bytes are free; the ballast file to delete later."""
    ballast = mount / "ballast"
    st = os.statvfs(mount)
    free = st.f_bavail * st.f_frsize
    with ballast.open("wb") as f:
        f.write(b"\0" * max(0, free - leave))
    return ballast


def _props(topic: str, tmp_path: Path, staging: Path, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.count'=100000, 'flush.interval'=3)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "out"),
        "connect.s3.local.tmp.directory": str(staging),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
        **extra,
    }


def _start(tmp_path: Path, bootstrap: str, props: dict[str, str], name: str, run: str) -> tuple:
    config = tmp_path / f"{run}.json"
    config.write_text(json.dumps({"name": name, "config": props}))
    log = tmp_path / f"{run}.log"
    return start_sink(config, bootstrap, log), log


def _wait(check, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} not reached within {timeout}s")


# mounting needs CAP_SYS_ADMIN: `make chaos` on a machine that has it; unit tests inject ENOSPC
@pytest.mark.chaos
def test_full_staging_disk_is_named_and_nothing_is_lost_after_space_returns(
    kafka_bootstrap, topic_factory, small_disk, tmp_path
):
    topic = topic_factory("disk-full", partitions=PARTITIONS)
    prod = Producer({"bootstrap.servers": kafka_bootstrap})
    for i in range(RECORDS):
        prod.produce(topic, value=json.dumps({"id": i, "pad": "x" * 500}).encode(), partition=i % PARTITIONS)
    assert prod.flush(20) == 0
    staging = small_disk / "staging"
    ballast = _fill(small_disk, 256 * 1024)  # each partition's file needs ~900 KB
    name = f"disk-{uuid.uuid4().hex[:8]}"

    # 1. connect.s3.error.policy=THROW (the default): a clear exit naming the staging directory
    proc, log = _start(tmp_path, kafka_bootstrap, _props(topic, tmp_path, staging), name, "throw")
    try:
        rc = proc.wait(90)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert rc == 1, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert "the staging directory is full" in text and str(staging) in text, text[-3000:]
    assert "No space left on device" in text, text[-3000:]

    # 2. RETRY: the sink keeps retrying while the disk is full, and finishes once space returns
    props = _props(
        topic, tmp_path, staging,
        **{
            "connect.s3.error.policy": "RETRY",
            "connect.s3.retry.interval": "500",
            "connect.s3.max.retries": "1000",
        },
    )
    proc, log = _start(tmp_path, kafka_bootstrap, props, name, "retry")
    try:
        _wait(
            lambda: log.read_text(errors="replace").count("the staging directory is full") >= 2
            or proc.poll() is not None,
            60, "two staging-full retries",
        )
        assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
        ballast.unlink()  # space returns
        _wait(
            lambda: sum(read_local(tmp_path / "out", "bkt", "p")[0].values()) >= RECORDS
            or proc.poll() is not None,
            90, f"{RECORDS} records in files",
        )
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(60)
    text = log.read_text(errors="replace")
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    seen, _files = read_local(tmp_path / "out", "bkt", "p")
    offsets = Counter((p, o) for (_t, p, o) in seen.elements())
    expected = {(p, o) for p in range(PARTITIONS) for o in range(RECORDS // PARTITIONS)}
    assert set(offsets) == expected, "lost: " + str(sorted(expected - set(offsets))[:10])
    assert set(offsets.values()) == {1}, "duplicated: " + str([k for k, n in offsets.items() if n > 1][:10])
    assert not any(staging.rglob("*.json")), "staging files left behind"
