"""What a running sink tells whoever watches it: records in, files out, offsets made durable, errors.

The runtime and the task call an observer passed to them (:class:`SinkObserver`); they never hand
out their internals to be read. The REST worker's metrics (:mod:`sink.rest.metering`) are one
observer; ``kcql-sink run`` uses :data:`NO_OBSERVER`. Calls come from the consuming thread, and
:meth:`SinkObserver.file_committed` also from the task's commit threads, so an observer keeps its
own lock. Every call must be cheap and must not raise: it sits on the write path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal, Protocol

from sink.records.record import TopicPartition

__all__ = ["NO_OBSERVER", "NullObserver", "Outcome", "SinkObserver"]

Outcome = Literal["stopped", "skipped", "dead_lettered"]
"""What the error policy did with a bad record: stopped the task, skipped it (logged), or
skipped it after the dead-letter topic took it."""


class SinkObserver(Protocol):
    """Events of one sink task, in the order they happen for a partition."""

    def records_consumed(self, tp: TopicPartition, records: int, nbytes: int) -> None:
        """``records`` messages of ``tp`` (``nbytes`` of keys and values) were handed to the task."""

    def file_committed(self, tp: TopicPartition, key: str, records: int, nbytes: int, seconds: float) -> None:
        """A file of ``tp`` became visible under ``key``; its commit took ``seconds``."""

    def offsets_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Kafka accepted these offsets for the connector's group: everything below is in storage."""

    def record_failed(
        self, tp: TopicPartition, offset: int, stage: str, message: str, outcome: Outcome
    ) -> None:
        """A record could not be written (``stage`` as in Connect's DLQ headers, e.g.
        ``VALUE_CONVERTER``), and what the error policy did about it."""


class NullObserver:
    """Watches nothing."""

    def records_consumed(self, tp: TopicPartition, records: int, nbytes: int) -> None:
        return None

    def file_committed(self, tp: TopicPartition, key: str, records: int, nbytes: int, seconds: float) -> None:
        return None

    def offsets_committed(self, offsets: Mapping[TopicPartition, int]) -> None:
        return None

    def record_failed(
        self, tp: TopicPartition, offset: int, stage: str, message: str, outcome: Outcome
    ) -> None:
        return None


NO_OBSERVER: SinkObserver = NullObserver()
