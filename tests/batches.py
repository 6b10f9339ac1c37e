"""Records given as one list, handed to a task the way the runtime hands them: one batch per run
of one topic partition (``SinkTask.put`` takes a :class:`~sink.records.batch.RecordBatch`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sink.records.batch import batches_of
from sink.records.record import SinkRecord

__all__ = ["put_records"]


def put_records(task: Any, records: Sequence[SinkRecord]) -> None:
    """``task.put`` of each batch of ``records``, in order (an error stops at its batch)."""
    for batch in batches_of(records):
        task.put(batch)
