"""What happens to a record that cannot be written, and to a storage error: the error policy, in one place.

Record errors (:class:`~kcql.errors.RecordError`, from the converters, the partitioner, a
transform or the format) reach :meth:`RecordPolicy.tolerate` with the record's message: with
``errors.tolerance=none`` (and ``connect.s3.error.policy`` THROW or RETRY) the task stops with a
message naming topic, partition, offset and stage; otherwise the record is logged and/or sent to
the dead-letter topic, counted, and the batch goes on after it.

Storage errors are retried under ``connect.s3.error.policy`` RETRY (or NOOP),
``connect.s3.retry.interval`` apart, until ``connect.s3.max.retries`` failures in a row
(:class:`RetryBudget`), counted as the Lenses connector's ``ErrorHandler``/``RetryErrorPolicy``
count them: the N-th failure in a row stops the task (N attempts: the first and N-1 retries), and
a success gives the budget back.
"""

from __future__ import annotations

import logging
from typing import Protocol

from kcql.errors import RecordError, SinkError
from sink.config.errors import ErrorSettings
from sink.events import SinkObserver
from sink.records.batch import RecordBatch
from sink.records.intake import NullValueSkipped
from sink.records.record import TopicPartition
from sink.runtime.dlq import DeadLetterQueue

__all__ = ["RecordPolicy", "RetryBudget", "TaskFailedError", "put_tolerating"]

log = logging.getLogger(__name__)


class TaskFailedError(SinkError):
    """The task stopped on an error it must not tolerate; the message says which record and why."""


class RecordPolicy:
    """Applies ``errors.tolerance``, the error log and the dead-letter queue to one bad record."""

    def __init__(self, errors: ErrorSettings, observer: SinkObserver) -> None:
        self.errors = errors
        self.observer = observer
        self.dlq: DeadLetterQueue | None = None
        self.tolerated = 0

    def tolerate(self, batch: RecordBatch, index: int, error: RecordError) -> None:
        """Skip record ``index`` of ``batch`` (logged and/or dead-lettered), or stop the task.

        Raises:
            TaskFailedError: the policy does not tolerate bad records.
            DeadLetterError: the dead-letter topic did not take the record (it must not be skipped).
        """
        tp = TopicPartition(batch.topic, batch.partition)
        offset = batch.offset_at(index)
        where = f"topic {batch.topic!r} partition {batch.partition} offset {offset}"
        text = str(error)
        message = text if where in text else f"{text} ({where})"
        if not self.errors.tolerate_records:
            self.observer.record_failed(tp, offset, error.stage, message, "stopped")
            raise TaskFailedError(
                f"stopping on a record that cannot be written: {message}. "
                "Set errors.tolerance=all (optionally with errors.deadletterqueue.topic.name) "
                "to skip such records."
            ) from error
        self.tolerated += 1
        if self.errors.log_enable or self.dlq is None:
            log.error("skipping a record at %s (%s): %s", where, error.stage, error)
        consumed = batch.message(index)
        if self.dlq is not None and consumed is not None:
            self.dlq.send(consumed, error.stage, error)
            self.observer.record_failed(tp, offset, error.stage, message, "dead_lettered")
        else:
            self.observer.record_failed(tp, offset, error.stage, message, "skipped")


class _Puts(Protocol):
    def put(self, batch: RecordBatch) -> None: ...


def put_tolerating(task: _Puts, batch: RecordBatch, policy: RecordPolicy) -> int:
    """``task.put(batch)`` with the error policy applied to each bad record; how many records
    were written (the others were skipped as the policy says).

    A record error skips that one record, and every record a transform made of the same message
    (or stops the task: :meth:`RecordPolicy.tolerate` raises), and the rest of the batch is put
    again; the task wrote the records before it. A
    value that converts to null under ``behavior.on.null.values=ignore`` is skipped silently.
    Storage errors, and record errors that are ``transient`` (the record may be fine: its Schema
    Registry did not answer), are raised as they are: what to do with them is the caller's.
    """
    written = 0
    while True:
        try:
            task.put(batch)
        except RecordError as exc:
            if exc.transient:
                raise
            try:
                index = batch.index_of(exc.offset)
            except ValueError:
                raise TaskFailedError(f"a record error names an offset outside its batch: {exc}") from exc
            if not isinstance(exc, NullValueSkipped):
                policy.tolerate(batch, index, exc)
            written += index
            after = batch.count_through(exc.offset)  # records a transform made of the same message too
            if after == len(batch):
                return written
            batch = batch.slice(after)
        else:
            return written + len(batch)


class RetryBudget:
    """The N-th storage failure in a row (N = ``connect.s3.max.retries``) stops the task; a success
    gives the budget back. 0 allows no retry at all (Lenses would then retry forever: its
    counter steps past 0 and never equals it)."""

    def __init__(self, max_retries: int) -> None:
        self.max_retries = max_retries
        self.left = max_retries

    def spend(self) -> bool:
        """Count one failure; whether another attempt is allowed."""
        self.left -= 1
        return self.left > 0

    def reset(self) -> None:
        if self.left != self.max_retries:  # the outage report said so at INFO (sink.runtime.outage)
            log.debug("storage recovered after %d failed attempt(s)", self.max_retries - self.left)
        self.left = self.max_retries
