"""The dead-letter queue batches: ``send`` never waits for the broker, ``flush`` does and fails loudly."""

from __future__ import annotations

import threading
import traceback
from typing import Any

import pytest

from sink.runtime.dlq import DeadLetterError, DeadLetterQueue, stacktrace


class _Msg:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def topic(self) -> str:
        return "orders"

    def partition(self) -> int:
        return 3

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return b"\xff"

    def headers(self) -> list[tuple[str, bytes]]:
        return [("origin", b"x")]


class _Producer:
    """Records produce/flush calls; delivers on flush, failing the offsets in ``fail``."""

    def __init__(self, fail: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        self.queued: list[tuple[Any, dict[str, Any]]] = []
        self.flush_calls = 0
        self.fail = fail

    def produce(self, topic: str, **kw: Any) -> None:
        self.queued.append((topic, kw))

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        self.flush_calls += 1
        for _topic, kw in self.queued:
            offset = int(dict(kw["headers"])["__connect.errors.offset"])
            err = _Err() if offset in self.fail else None
            kw["on_delivery"](err, None)
        self.queued.clear()
        return 0


class _Err:
    def str(self) -> str:
        return "Broker: Message size too large"


def _dlq(producer: _Producer) -> DeadLetterQueue:
    dlq = DeadLetterQueue.__new__(DeadLetterQueue)
    dlq.topic, dlq.connector, dlq.task_id, dlq.context_headers = "dlq", "c", 0, True
    dlq.sent = dlq.flushes = dlq._pending = 0
    dlq._failures = []
    dlq._lock = threading.Lock()
    dlq._producer = producer  # type: ignore[assignment]
    return dlq


def _error() -> ValueError:
    try:
        int("x")
    except ValueError as exc:
        return exc
    raise AssertionError


def test_send_does_not_flush_and_flush_waits_once_for_all() -> None:
    producer = _Producer()
    dlq = _dlq(producer)
    for offset in range(1000):
        dlq.send(_Msg(offset), "VALUE_CONVERTER", _error())
    assert producer.flush_calls == 0 and dlq.pending == 1000
    dlq.flush()
    assert producer.flush_calls == 1 and dlq.sent == 1000 and dlq.pending == 0
    dlq.flush()  # nothing pending: no round trip
    assert producer.flush_calls == 1


def test_a_failed_delivery_fails_the_flush_naming_the_record() -> None:
    dlq = _dlq(_Producer(fail={7}))
    for offset in range(10):
        dlq.send(_Msg(offset), "VALUE_CONVERTER", _error())
    with pytest.raises(DeadLetterError) as caught:
        dlq.flush()
    message = str(caught.value)
    assert "1 of 10" in message and "'orders' partition 3 offset 7" in message and "too large" in message
    assert dlq.sent == 9


def test_stacktrace_is_pythons_without_source_lines() -> None:
    def fail() -> None:
        try:
            int("x")
        except ValueError as exc:
            raise KeyError("k") from exc

    try:
        fail()
    except KeyError as exc:
        ours = stacktrace(exc)
        python = "".join(traceback.format_exception(exc))
    frames = [line for line in python.splitlines() if not line.startswith("    ")]
    assert ours.splitlines() == frames
