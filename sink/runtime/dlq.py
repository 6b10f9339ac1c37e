"""The dead-letter queue: bad records go to a Kafka topic instead of stopping the connector.

The record is produced as it was consumed (original key, value and headers, byte for byte), so it
can be replayed once fixed. With ``errors.deadletterqueue.context.headers.enable=true`` Connect's
``__connect.errors.*`` headers say where it came from and why it failed.
"""

from __future__ import annotations

import logging
import traceback
from typing import Any

from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcql.errors import SinkError

__all__ = ["DeadLetterError", "DeadLetterQueue"]

log = logging.getLogger(__name__)

_PREFIX = "__connect.errors."


class DeadLetterError(SinkError):
    """A record could not be delivered to the dead-letter topic; it must not be skipped then."""


class DeadLetterQueue:
    """Produces failed records to ``topic`` and waits for delivery before their offsets may pass."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        connector: str,
        task_id: int,
        context_headers: bool,
        replication_factor: int = -1,
        producer_conf: dict[str, Any] | None = None,
    ) -> None:
        self.topic = topic
        self.connector = connector
        self.task_id = task_id
        self.context_headers = context_headers
        self.sent = 0
        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                **(producer_conf or {}),
            }
        )
        self._ensure_topic(bootstrap, replication_factor)

    def _ensure_topic(self, bootstrap: str, replication_factor: int) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        futures = admin.create_topics(
            [NewTopic(self.topic, num_partitions=1, replication_factor=replication_factor)]
        )
        try:
            futures[self.topic].result(timeout=15)
        except KafkaException as exc:
            if "TOPIC_ALREADY_EXISTS" not in str(exc) and "already exists" not in str(exc):
                log.warning("could not create the dead-letter topic %s: %s", self.topic, exc)

    def send(self, msg: Any, stage: str, error: BaseException) -> None:
        """Produce one failed message; raises DeadLetterError if the broker does not take it."""
        headers = list(msg.headers() or [])
        if self.context_headers:
            headers += [
                (_PREFIX + "topic", msg.topic().encode()),
                (_PREFIX + "partition", str(msg.partition()).encode()),
                (_PREFIX + "offset", str(msg.offset()).encode()),
                (_PREFIX + "connector.name", self.connector.encode()),
                (_PREFIX + "task.id", str(self.task_id).encode()),
                (_PREFIX + "stage", stage.encode()),
                (_PREFIX + "class.name", b"sink.task.SinkTask"),
                (_PREFIX + "exception.class.name", type(error).__qualname__.encode()),
                (_PREFIX + "exception.message", str(error).encode()),
                (_PREFIX + "exception.stacktrace", "".join(traceback.format_exception(error)).encode()),
            ]
        failures: list[str] = []

        def delivered(err: Any, _msg: Any) -> None:
            if err is not None:
                failures.append(str(err))

        self._producer.produce(
            self.topic, key=msg.key(), value=msg.value(), headers=headers, on_delivery=delivered
        )
        remaining = self._producer.flush(30)
        if remaining or failures:
            raise DeadLetterError(
                f"could not deliver the record from topic {msg.topic()!r} partition {msg.partition()} "
                f"offset {msg.offset()} to the dead-letter topic {self.topic!r}: "
                f"{failures[0] if failures else 'timed out'}"
            )
        self.sent += 1

    def close(self) -> None:
        self._producer.flush(10)
