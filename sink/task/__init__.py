"""The sink task: Kafka Connect's SinkTask lifecycle, its open files and their flush policy."""

from __future__ import annotations

from sink.task.task import COMMIT_STEPS, SinkTask

__all__ = ["COMMIT_STEPS", "SinkTask"]
