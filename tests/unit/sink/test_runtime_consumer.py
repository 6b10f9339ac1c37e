"""The assignment log line: once per assignment, the first with the join time, a slow join explained."""

from __future__ import annotations

import logging

from sink.runtime import consumer
from sink.runtime.consumer import AssignmentLog


def test_first_assignment_says_how_long_the_join_took_later_ones_do_not(monkeypatch, caplog):
    now = [100.0]
    monkeypatch.setattr(consumer.time, "monotonic", lambda: now[0])
    log = AssignmentLog({"group.id": "connect-x", "session.timeout.ms": "6000"})
    now[0] = 103.04
    with caplog.at_level(logging.INFO, logger="sink.runtime.consumer"):
        log.assigned(["t-0@5", "t-1@0"])
        log.assigned([])
    assert [r.getMessage() for r in caplog.records] == [
        "group connect-x: assigned t-0@5, t-1@0 (3.0 s after subscribing)",
        "group connect-x: assigned nothing",
    ]
    assert all(r.levelno == logging.INFO for r in caplog.records)


def test_a_slow_first_join_names_the_session_timeout(monkeypatch, caplog):
    now = [0.0]
    monkeypatch.setattr(consumer.time, "monotonic", lambda: now[0])
    log = AssignmentLog({"group.id": "connect-y"})
    now[0] = 23.0
    with caplog.at_level(logging.INFO, logger="sink.runtime.consumer"):
        log.assigned(["t-0@0"])
    (message,) = [r.getMessage() for r in caplog.records]
    assert "23.0 s after subscribing; session.timeout.ms=45000" in message
    assert "consumer.override.session.timeout.ms=6000" in message
