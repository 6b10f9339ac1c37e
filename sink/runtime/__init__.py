"""The Kafka side of a sink task: the consumer loop, the error policy, the dead-letter queue."""

from __future__ import annotations

from sink.runtime.loop import RuntimeOptions, SinkRuntime, TaskFailedError

__all__ = ["RuntimeOptions", "SinkRuntime", "TaskFailedError"]
