"""The flush timer: commits files whose flush.interval has passed, also on partitions gone idle.

Lenses and Confluent only look at the interval when the next record (or an empty poll) arrives,
so a partition that stops receiving records keeps its last file open indefinitely. Here a thread
calls the task's ``flush_due`` every tick, under the task's lock. An error there cannot be raised
on the timer thread; it is kept and raised by the task's next call on its caller's thread, the
way Kafka Connect reports a task failure.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

__all__ = ["FlushTimer", "tick_seconds"]


def tick_seconds(shortest_interval: float) -> float:
    """A tenth of the shortest flush.interval, between 50 ms and 1 s."""
    return min(max(shortest_interval / 10, 0.05), 1.0)


class FlushTimer:
    """Calls ``tick`` under ``lock`` every :func:`tick_seconds` until :meth:`stop`."""

    def __init__(self, tick: Callable[[], None], lock: Any, shortest_interval: float, name: str) -> None:
        self._tick = tick
        self._lock = lock
        self._every = tick_seconds(shortest_interval)
        self._stopping = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            with self._lock:
                if self._stopping.is_set():
                    return
                self._tick()

    def keep_error(self, error: BaseException) -> None:
        """Remember the first error of a tick, for :meth:`raise_error`."""
        if self._error is None:
            self._error = error

    def raise_error(self) -> None:
        """Raise (once) the error a tick kept."""
        error, self._error = self._error, None
        if error is not None:
            raise error

    def stop(self) -> None:
        """Stop ticking and wait for the thread (unless called from it)."""
        self._stopping.set()
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=30)
