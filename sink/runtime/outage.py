"""Saying that a dependency is down once, reminding now and then, and saying when it is back.

An outage of the broker or of the object store lasts minutes, and everything the sink does in
that time fails the same way: every poll, every commit round, every retry of a paused partition.
Logging each failure buries the one line a person needs ("S3 at http://... is unreachable; 2
partitions paused, retrying every 5 s") under hundreds of copies, so each dependency gets an
:class:`OutageReport`: the first failure is logged at WARNING with what the sink is doing about
it, later ones are counted (DEBUG) with a reminder at most every ``remind`` seconds, and the first
success after them is logged at INFO with how long it lasted and how many failures were folded.

:class:`KafkaClientLog` does the same for librdkafka's own log lines and error callbacks, which
otherwise print a ``Connect to ... failed: Connection refused`` line per broker per reconnect
attempt while the broker is away.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError

__all__ = ["KAFKA_DOWN_CODES", "KafkaClientLog", "OutageReport"]

REMIND_SECONDS = 30.0
"""At most one "still waiting" line per dependency in this many seconds."""

KAFKA_DOWN_CODES = frozenset({
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._RESOLVE,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.NOT_COORDINATOR,
    KafkaError.REQUEST_TIMED_OUT,
})
"""Error codes that mean "the broker (or its group coordinator) cannot be reached right now"."""


class OutageReport:
    """The log lines of one dependency's outages: one when it starts, few while it lasts, one at its end.

    Args:
        what: the dependency as a person knows it, e.g. ``"Kafka at 127.0.0.1:9092"``.
        logger: where the lines go.
        remind: seconds between "still waiting" reminders.
        clock: monotonic seconds (tests pass a fake).
    """

    def __init__(
        self, what: str, logger: logging.Logger, remind: float = REMIND_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.what = what
        self.log = logger
        self.remind = remind
        self.clock = clock
        self.since: float | None = None
        self.failures = 0
        self.outages = 0
        self._reminded = 0.0

    @property
    def down(self) -> bool:
        return self.since is not None

    def failed(self, error: object, doing: str, state: str = "is unreachable") -> None:
        """Count one failure; log it if it starts an outage, or a reminder if one is due.

        ``doing``: what the sink does meanwhile ("partitions X paused, retrying every 5 s");
        ``state``: what is wrong, e.g. "refuses the sink's requests" for a 403.
        """
        now = self.clock()
        self.failures += 1
        if self.since is None:
            self.since = self._reminded = now
            self.outages += 1
            self.log.warning("%s %s: %s; %s", self.what, state, error, doing)
        elif now - self._reminded >= self.remind:
            self._reminded = now
            self.log.warning(
                "still waiting for %s after %.0f s (%d failed attempts); %s; last error: %s",
                self.what, now - self.since, self.failures, doing, error,
            )
        else:
            self.log.debug("%s still unreachable: %s", self.what, error)

    def recovered(self, doing: str = "") -> bool:
        """The dependency answered: log the end of the outage, if there was one; whether there was."""
        if self.since is None:
            return False
        took = self.clock() - self.since
        self.log.info(
            "%s is back after %.0f s (%d failed attempts)%s", self.what, took, self.failures,
            f"; {doing}" if doing else "",
        )
        self.since = None
        self.failures = 0
        return True


class KafkaClientLog(logging.Filter):
    """librdkafka's log lines and error callbacks, folded into one :class:`OutageReport`.

    Pass :meth:`settings` into the client's configuration. While the broker is unreachable the
    client's own lines (``FAIL``: connection refused, per broker and reconnect) are dropped and
    counted; otherwise a line that repeats (same facility and text) is logged at most once per
    ``remind`` seconds.
    """

    def __init__(self, report: OutageReport, logger_name: str) -> None:
        super().__init__()
        self.report = report
        self.client_log = logging.getLogger(logger_name)
        self.client_log.addFilter(self)
        self.dropped = 0
        self.fatal: KafkaError | None = None
        self._last: dict[str, float] = {}

    def settings(self) -> dict[str, Any]:
        """``error_cb`` and ``logger`` entries for a confluent-kafka client config."""
        return {"error_cb": self.on_error, "logger": self.client_log}

    def on_error(self, error: KafkaError) -> None:
        """librdkafka's error callback (runs inside poll/consume, on the caller's thread)."""
        if error.fatal():
            self.fatal = error
            logging.getLogger(__name__).error("Kafka client failed: %s", error.str())
        elif error.code() in KAFKA_DOWN_CODES:
            self.report.failed(error.str(), "the consumer keeps polling and reconnects by itself")
        else:
            self._once(f"error:{error.code()}", logging.WARNING, "Kafka client error: %s", error.str())

    def up(self) -> None:
        """The broker answered (a commit, an assignment). Records are no proof: they may have
        been fetched into the client's queue before the broker went away."""
        if self.report.recovered():
            if self.dropped:
                self.report.log.debug("%d Kafka client log lines were folded into the outage", self.dropped)
            self.dropped = 0
            self._last.clear()

    def filter(self, record: logging.LogRecord) -> bool:
        if self.report.down:
            self.dropped += 1
            return False
        args = record.args if isinstance(record.args, tuple) else ()
        facility = str(args[0]) if args else ""
        text = str(args[2]) if len(args) > 2 else record.getMessage()
        if facility == "FAIL" and record.levelno >= logging.ERROR:  # "Connect to ... failed": an outage
            self.report.failed(text, "the consumer keeps polling and reconnects by itself")
            self.dropped += 1
            return False
        return self._due(f"{facility}:{_without_timing(text)}")

    def _once(self, key: str, level: int, msg: str, *args: object) -> None:
        if self._due(key):
            logging.getLogger(__name__).log(level, msg, *args)

    def _due(self, key: str) -> bool:
        now = self.report.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.report.remind:
            self.dropped += 1
            return False
        self._last[key] = now
        return True


def _without_timing(text: str) -> str:
    """librdkafka appends "(after 12ms in state CONNECT)": the same failure, a different text."""
    cut = text.find(" (after ")
    return text if cut < 0 else text[:cut]
