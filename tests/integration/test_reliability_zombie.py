"""Two ``kcql-sink run`` processes fight over one partition: a frozen zombie and its successor.

Process A reads the partition and holds an open file; it is frozen with SIGSTOP (a long GC pause,
a stalled VM) past the session timeout, so the group hands the partition to process B, which
takes over the partition's index (a new epoch) and commits everything. A is then thawed with
SIGCONT and tries to commit the same records: its conditional index write must be fenced. The
independent reader then finds every offset exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid

import pytest

from chaos.crash import FAST_CONSUMER, produce, start_sink
from chaos.reader import compare, read_local


@pytest.mark.chaos  # ~40 s: `make chaos` runs it
def test_thawed_zombie_is_fenced_and_only_the_new_owner_commits(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory("zombie")
    expected = produce(kafka_bootstrap, topic, 3_000, 1)
    root = tmp_path / "out"
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO chaos:data SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.count'=100000000, 'flush.interval'=6)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(root),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
    }
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": f"zombie-{uuid.uuid4().hex[:6]}", "config": props}))
    log_a, log_b = tmp_path / "a.log", tmp_path / "b.log"
    a = start_sink(config, kafka_bootstrap, log_a)
    b = None
    try:
        deadline = time.monotonic() + 60
        while "assigned" not in log_a.read_text() and time.monotonic() < deadline and a.poll() is None:
            time.sleep(0.1)
        assert "assigned" in log_a.read_text(), log_a.read_text()
        time.sleep(1.5)  # A has read the records into an open file; the 6 s interval has not passed
        assert read_local(root, "chaos", "data")[1] == 0, "A committed before it was frozen"
        os.killpg(a.pid, signal.SIGSTOP)
        time.sleep(8)  # > session.timeout.ms: the group evicts A
        b = start_sink(config, kafka_bootstrap, log_b)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if not compare(expected, read_local(root, "chaos", "data")[0])["lost"]:
                break
            time.sleep(0.5)
        os.killpg(a.pid, signal.SIGCONT)  # the zombie wakes with its open file and the old epoch
        time.sleep(10)  # its interval flush comes due and it polls the group again
    finally:
        for proc in (a, b):
            if proc is not None and proc.poll() is None:
                os.killpg(proc.pid, signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        rc_a = a.wait(60)
        rc_b = b.wait(60) if b is not None else None
    verdict = compare(expected, read_local(root, "chaos", "data")[0])
    text_a, text_b = log_a.read_text(), log_b.read_text()
    assert verdict == {"checked": 3_000, "lost": 0, "duplicated": 0, "unexpected": 0}, (
        verdict,
        text_a[-2000:],
    )
    assert "took over" in text_b, text_b[-2000:]
    assert "was fenced" in text_a or "partitions lost" in text_a, text_a[-2000:]  # A learnt it lost
    assert rc_a == 0 and rc_b == 0, (rc_a, rc_b, text_a[-2000:], text_b[-2000:])
    assert "Traceback" not in text_a + text_b
