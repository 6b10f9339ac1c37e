"""High watermarks for consumer lag, fetched from the broker by a worker-owned consumer.

The tasks' consumers are never called from request threads (confluent-kafka consumers are not
meant to be shared across threads; a concurrent call was seen to stall the task's poll). Instead
one non-member consumer per bootstrap list asks the broker (ListOffsets) when /metrics or /ui is
read, with a short cache so frequent scrapes cost at most one round trip per partition per period.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from sink.records.record import TopicPartition

__all__ = ["WatermarkProbe"]

log = logging.getLogger(__name__)

CACHE_SECONDS = 2.0
TIMEOUT_SECONDS = 2.0


class WatermarkProbe:
    """``high(bootstrap, tp)`` → the partition's high watermark, or ``None`` when unknown."""

    def __init__(self) -> None:
        self._consumers: dict[str, Any] = {}
        self._cache: dict[tuple[str, TopicPartition], tuple[float, int | None]] = {}
        self._lock = threading.Lock()

    def high(self, bootstrap: str, tp: TopicPartition) -> int | None:
        key = (bootstrap, tp)
        with self._lock:
            cached = self._cache.get(key)
            if cached is not None and time.monotonic() - cached[0] < CACHE_SECONDS:
                return cached[1]
            value = self._fetch(bootstrap, tp)
            self._cache[key] = (time.monotonic(), value)
            return value

    def _fetch(self, bootstrap: str, tp: TopicPartition) -> int | None:
        from confluent_kafka import Consumer, KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        consumer = self._consumers.get(bootstrap)
        if consumer is None:
            consumer = Consumer(
                {
                    "bootstrap.servers": bootstrap,
                    "group.id": "kcql-sink-worker-watermarks",
                    "enable.auto.commit": False,
                    "client.id": "kcql-sink-worker-watermarks",
                    "log_level": 3,
                }
            )
            self._consumers[bootstrap] = consumer
        try:
            _, high = consumer.get_watermark_offsets(
                KafkaTopicPartition(tp.topic, tp.partition), timeout=TIMEOUT_SECONDS
            )
        except KafkaException as exc:
            log.debug("no high watermark for %s: %s", tp, exc)
            return None
        return high if high is not None and high >= 0 else None

    def close(self) -> None:
        with self._lock:
            for consumer in self._consumers.values():
                consumer.close()
            self._consumers.clear()
