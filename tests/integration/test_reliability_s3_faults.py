"""S3 faults injected by a real HTTP proxy between ``kcql-sink run`` and SeaweedFS.

Throttling (503 SlowDown), 500s, connection resets, a 5 s stall and truncated responses must be
retried with backoff and change nothing in the result: every offset exactly once. When retries
run out the process stops with a clear error (exit 1, no traceback), and a restart once S3 is
healthy again still writes every offset exactly once.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from chaos.crash import S3Target, Scenario, drain, prepare, start_sink
from chaos.proxy import FaultProxy, Rule

UPLOADS = r"/(\.temp-upload|data)/"
"""A file's upload: to a temporary key (copy protocol) or straight to its final key (conditional)."""


PROTOCOLS = ("conditional", "copy")


@dataclass
class _FaultRun:
    """What one protocol's run left behind, checked once both runs are over."""

    drained: bool
    rc: int
    rules: list[Rule]
    injected: dict[str, int]
    log: str
    verdict: dict[str, int]


def _faulty_run(
    protocol: str, kafka_bootstrap: str, s3_endpoint: Any, s3_client: Any, work: Path
) -> _FaultRun:
    """One commit protocol through its own proxy, topic, bucket, work directory and sink process."""
    with FaultProxy(s3_endpoint.url) as proxy:
        cell = prepare(
            Scenario(flush="count", storage="s3", records=2_000, partitions=2, name="s3-faults"),
            kafka_bootstrap,
            work,
            S3Target(s3_endpoint.connect_config(), s3_client, proxy),
            **{"connect.s3.commit.protocol": protocol},
        )
        rules = [
            proxy.add(Rule("slowdown", method="PUT", path=UPLOADS, times=3)),
            proxy.add(Rule("error500", method="PUT", path=r"/\.indexes/", times=2, skip=1)),
            proxy.add(Rule("reset", method="PUT", path=r"/data/", times=2)),  # the PUT/copy to the final key
            proxy.add(Rule("latency", method="PUT", path=UPLOADS, times=1, skip=2, delay=5.0)),
            proxy.add(Rule("partial", method="GET", path=r"/\.indexes/", times=1)),
        ]
        if protocol == "copy":  # the conditional protocol deletes nothing
            rules.append(proxy.add(Rule("reset", method="DELETE", times=1)))
        drained, rc = drain(cell, kafka_bootstrap, work / "faults.log", timeout=180)
        injected = dict(proxy.injected)
    return _FaultRun(drained, rc, rules, injected, (work / "faults.log").read_text(), cell.verdict())


def test_transient_s3_faults_are_retried_without_loss_or_duplicates(
    kafka_bootstrap, s3_endpoint, s3_client, tmp_path
):
    """Both commit protocols, side by side: the two runs share only the broker and SeaweedFS (each
    has its own proxy, rules, topic, bucket and process), and each spends most of its time waiting
    (the 5 s stall, retry backoff, the drain's polling), so running them one after the other
    bought nothing but wall time."""
    with ThreadPoolExecutor(len(PROTOCOLS)) as pool:
        futures = {
            p: pool.submit(_faulty_run, p, kafka_bootstrap, s3_endpoint, s3_client, tmp_path / p)
            for p in PROTOCOLS
        }
        runs = {p: f.result() for p, f in futures.items()}
    for protocol, run in runs.items():
        assert run.drained and run.rc == 0, (protocol, run.log[-3000:])
        verdict = run.verdict
        lost, duplicated, unexpected = verdict["lost"], verdict["duplicated"], verdict["unexpected"]
        assert lost == 0 and duplicated == 0 and unexpected == 0, (protocol, verdict)
        assert "Traceback" not in run.log, protocol
        for rule in run.rules:  # every fault really hit
            assert rule.fired == rule.times, (protocol, rule.action, rule.path, run.injected)
        resets = 3 if protocol == "copy" else 2
        expected = {"slowdown": 3, "error500": 2, "reset": resets, "latency": 1, "partial": 1}
        assert run.injected == expected, (protocol, run.injected)


@pytest.mark.chaos
def test_retries_exhausted_stop_with_a_clear_error_and_a_restart_loses_nothing(
    kafka_bootstrap, s3_endpoint, s3_client, tmp_path
):
    with FaultProxy(s3_endpoint.url) as proxy:
        cell = prepare(
            Scenario(flush="count", storage="s3", records=1_000, partitions=1, name="s3-exhausted"),
            kafka_bootstrap,
            tmp_path,
            S3Target(s3_endpoint.connect_config(), s3_client, proxy),
            **{"connect.s3.http.max.retries": "2", "connect.s3.error.policy": "THROW"},
        )
        # healthy until the first upload, then every PUT is throttled forever
        proxy.add(Rule("slowdown", method="PUT", path=UPLOADS, times=-1))
        log_path = tmp_path / "exhausted.log"
        began = time.monotonic()
        proc = start_sink(cell.config, kafka_bootstrap, log_path)
        try:
            rc = proc.wait(120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        log = log_path.read_text()
        assert rc == 1, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        assert "SlowDown" in log or "503" in log, log[-3000:]  # the cause is named
        assert proxy.injected["slowdown"] >= 3  # 1 attempt + 2 retries, at least once
        assert time.monotonic() - began < 120
        assert cell.verdict()["checked"] == 1_000
        proxy.clear()
        drained, rc = drain(cell, kafka_bootstrap, tmp_path / "restart.log", timeout=120)
    verdict = cell.verdict()
    assert drained and rc == 0, (tmp_path / "restart.log").read_text()[-3000:]
    assert verdict["lost"] == 0 and verdict["duplicated"] == 0 and verdict["unexpected"] == 0, verdict
