"""The Kafka side of a sink task: the consumer loop, the error policy, the dead-letter queue."""

from __future__ import annotations

from sink.runtime.loop import (
    RuntimeOptions,
    SinkRuntime,
    TaskFailedError,
    consumer_config,
    resolve_subscription,
)

__all__ = ["RuntimeOptions", "SinkRuntime", "TaskFailedError", "consumer_config", "resolve_subscription"]
