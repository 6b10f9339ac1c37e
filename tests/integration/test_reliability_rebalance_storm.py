"""Rebalance storm: ``kcql-sink run`` processes of one connector join and leave every few seconds.

Several processes run the same connector config (so the same consumer group) against one storage
root while a producer keeps writing at a steady rate. Every 2-5 s (seeded, reproducible), once
every member has finished its last rebalance, one process joins or one leaves: most leave with
SIGTERM (a graceful leave: the revoke commits), the second of every three leaves is a SIGKILL (no
goodbye: its partitions move after the session timeout, and a zombie's late commit must be
fenced). At the end one process drains the topic; every produced record (its
``(topic, partition, offset)`` from the delivery reports) must be in the files exactly once, and
no process may have logged a traceback or exited non-zero on SIGTERM.

Why wait for the group to settle: on Tansu, a member that left (SIGTERM or SIGKILL) while a
rebalance was in flight left the group with no partition assigned to anyone for over two
minutes, reproduced three times, also with ``max.poll.interval.ms=15000`` (Kafka's coordinator
completes a join at the rebalance timeout at the latest). That is the broker's; the storm tests
the sink's side of each rebalance.

The ``chaos`` test storms for ``KCQL_SINK_STORM_SECONDS`` (default 120); the short one for 8 s.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.crash import FAST_CONSUMER, start_sink
from chaos.reader import compare, read_local

PARTITIONS = 8
MAX_MEMBERS = 3
RATE = 200
ASSIGNED = "sink.runtime.consumer: group "
"""The start of the consumer's one line per assignment (``group <id>: assigned ...``)."""
"""Records per second the producer writes during the storm."""


class _Flow:
    """A producer thread writing ``RATE`` records/s until stopped; remembers every delivered triple."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.topic = topic
        self.delivered: set[tuple[str, int, int]] = set()
        self.failed: list[str] = []
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 10})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="storm-producer")
        self._thread.start()

    def _report(self, err, msg) -> None:
        if err is None:
            self.delivered.add((msg.topic(), msg.partition(), msg.offset()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        n = 0
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * RATE)
            while n < due:
                self._producer.produce(
                    self.topic, value=json.dumps({"id": n}).encode(), partition=n % PARTITIONS,
                    on_delivery=self._report,
                )
                n += 1
            self._producer.poll(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(30) == 0
        assert not self.failed, self.failed[:3]


class _Member:
    def __init__(self, config: Path, bootstrap: str, log: Path) -> None:
        self.log = log
        self.proc = start_sink(config, bootstrap, log)
        self.killed = False

    def wait_started(self, timeout: float = 60) -> None:
        """Until its task started: only then is the SIGTERM handler in place (a SIGTERM during the
        imports ends the process at once, which loses nothing but is not a graceful leave)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if " started: " in self.log.read_text(errors="replace"):
                return
            time.sleep(0.1)

    def settled(self) -> bool:
        """Whether its last rebalance finished: an assignment logged after its last revocation."""
        text = self.log.read_text(errors="replace")
        return text.rfind(ASSIGNED) > text.rfind("sink.runtime.loop: revoking")

    def leave(self, kill: bool) -> int:
        if kill:
            self.killed = True
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            return self.proc.wait(30)
        self.wait_started()
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            return -9


def _wait_settled(members: list[_Member], timeout: float = 90) -> None:
    """Until every member finished its last rebalance (see the module docstring: Tansu)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(m.settled() or m.proc.poll() is not None for m in members):
            return
        time.sleep(0.1)
    raise AssertionError(f"the group did not settle within {timeout} s: {[str(m.log) for m in members]}")


def _storm(bootstrap: str, topic_factory, tmp_path: Path, seconds: float, seed: int) -> None:
    topic = topic_factory("storm", partitions=PARTITIONS)
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.count'=50, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "out"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
    }
    config = tmp_path / "connector.json"
    config.write_text(json.dumps({"name": f"storm-{uuid.uuid4().hex[:8]}", "config": props}))
    rng = random.Random(seed)
    members: list[_Member] = []
    finished: list[tuple[_Member, int]] = []
    joins = leaves = kills = 0

    def join() -> None:
        nonlocal joins
        joins += 1
        members.append(_Member(config, bootstrap, tmp_path / f"member-{joins}.log"))

    flow = _Flow(bootstrap, topic)
    join()
    try:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            time.sleep(rng.uniform(2, 5))  # the storm's pace (not waiting for a condition)
            _wait_settled(members)
            if len(members) < 2 or (len(members) < MAX_MEMBERS and rng.random() < 0.5):
                join()
            else:
                leaves += 1
                kill = leaves % 3 == 2
                kills += kill
                member = members.pop(rng.randrange(len(members)))
                finished.append((member, member.leave(kill)))
        flow.stop()
        while len(members) > 1:  # one member drains what is left
            member = members.pop()
            finished.append((member, member.leave(False)))
        deadline = time.monotonic() + 120
        seen, _ = read_local(tmp_path / "out", "bkt", "p")
        while time.monotonic() < deadline and not flow.delivered <= set(seen):
            assert members[0].proc.poll() is None, members[0].log.read_text(errors="replace")[-3000:]
            time.sleep(0.5)
            seen, _ = read_local(tmp_path / "out", "bkt", "p")
    finally:
        finished.extend((member, member.leave(False)) for member in members)
    result = compare(flow.delivered, seen)
    print(
        f"\nrebalance storm: {seconds:.0f} s, {joins} joins, {leaves} leaves ({kills} SIGKILL), "
        f"{len(flow.delivered)} records: {result}"
    )
    for member, rc in finished:
        text = member.log.read_text(errors="replace")
        assert "Traceback" not in text, f"{member.log}: {text[-3000:]}"
        assert member.killed or rc == 0, f"{member.log} exited {rc}: {text[-3000:]}"
    assert result["lost"] == 0 and result["duplicated"] == 0 and result["unexpected"] == 0, result


@pytest.mark.chaos  # make test's suite budget; test_run_rebalance.py covers a join and a leave there
def test_rebalance_storm_short(kafka_bootstrap, topic_factory, tmp_path):
    _storm(kafka_bootstrap, topic_factory, tmp_path, seconds=8, seed=1)


@pytest.mark.chaos
def test_rebalance_storm(kafka_bootstrap, topic_factory, tmp_path):
    seconds = float(os.environ.get("KCQL_SINK_STORM_SECONDS", "120"))
    _storm(kafka_bootstrap, topic_factory, tmp_path, seconds=seconds, seed=2025)
