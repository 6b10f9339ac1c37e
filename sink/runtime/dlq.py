"""The dead-letter queue: bad records go to a Kafka topic instead of stopping the connector.

The record is produced as it was consumed (original key, value and headers, byte for byte), so it
can be replayed once fixed. With ``errors.deadletterqueue.context.headers.enable=true`` Connect's
``__connect.errors.*`` headers say where it came from and why it failed.

Records are produced asynchronously and batched by the producer (a flush per record made a storm
of 10,000 poison pills crawl at the broker's round-trip time). :meth:`DeadLetterQueue.flush` waits
for every outstanding delivery and raises :class:`DeadLetterError` if any failed; the runtime calls
it before anything that moves past a dead-lettered record becomes durable: before the task
commits a file (whose index entry lets a restart resume after the record) and before the source
offsets are committed to Kafka, as Connect's ``WorkerSinkTask.commitOffsets`` awaits its errant
record reporter's futures before committing. A crash before that flush loses nothing: the records
are consumed and dead-lettered again (at-least-once, as in Connect; the idempotent producer keeps
retries within one run from duplicating).
"""

from __future__ import annotations

import logging
import threading
import traceback
from functools import partial
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kcql.errors import SinkError

__all__ = ["DeadLetterError", "DeadLetterQueue", "stacktrace"]

log = logging.getLogger(__name__)

_PREFIX = "__connect.errors."


_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def stacktrace(error: BaseException) -> str:
    """The ``exception.stacktrace`` header: the exception chain with file, line and function per frame.

    ``traceback.format_exception`` also reads each frame's source line and parses it for the
    ``^^^`` markers, which took three quarters of the time of a poison-pill storm; a header needs
    neither (Connect's holds Java's ``printStackTrace``, which has no source lines either).
    """
    chain: list[tuple[BaseException, str]] = []  # (exception, how it led to the next one)
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for index in range(len(chain) - 1, -1, -1):  # the root cause first, as Python prints it
        exc, _ = chain[index]
        parts.append("Traceback (most recent call last):\n")
        for frame, line in traceback.walk_tb(exc.__traceback__):
            code = frame.f_code
            parts.append(f'  File "{code.co_filename}", line {line}, in {code.co_name}\n')
        parts.extend(traceback.format_exception_only(exc))
        if index:
            parts.append(chain[index][1])
    return "".join(parts)


class DeadLetterError(SinkError):
    """A record could not be delivered to the dead-letter topic; it must not be skipped then."""


class DeadLetterQueue:
    """Produces failed records to ``topic``; :meth:`flush` makes them durable before their offsets pass."""

    FLUSH_TIMEOUT = 30.0
    """Seconds :meth:`flush` waits for outstanding deliveries before it fails."""

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
        """Records the broker acknowledged."""
        self.flushes = 0
        """Flushes that waited for at least one record (to show that sends are batched)."""
        self._pending = 0
        self._failures: list[str] = []
        self._lock = threading.Lock()
        """Guards the counters: flush may run on the task's timer or commit threads."""
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
        """Produce one failed message without waiting for it (see :meth:`flush`).

        Raises:
            DeadLetterError: the producer refused the record at once (too large, unknown topic...).
        """
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
                (_PREFIX + "exception.stacktrace", stacktrace(error).encode()),
            ]
        where = f"topic {msg.topic()!r} partition {msg.partition()} offset {msg.offset()}"
        while True:
            try:
                self._producer.produce(
                    self.topic, key=msg.key(), value=msg.value(), headers=headers,
                    on_delivery=partial(self._delivered, where),
                )
                break
            except BufferError:  # the producer's queue is full: let deliveries drain, then retry
                self._producer.poll(0.5)
            except KafkaException as exc:
                raise DeadLetterError(
                    f"could not send the record from {where} to the dead-letter topic {self.topic!r}: "
                    f"{exc.args[0].str() if exc.args and hasattr(exc.args[0], 'str') else exc}"
                ) from exc
        with self._lock:
            self._pending += 1
        self._producer.poll(0)  # serve delivery reports already in, without waiting

    def _delivered(self, where: str, err: KafkaError | None, _msg: Any) -> None:
        with self._lock:
            if err is None:
                self.sent += 1
            else:
                self._failures.append(f"the record from {where}: {err.str()}")

    @property
    def pending(self) -> int:
        """Records produced since the last :meth:`flush` (delivered or not yet)."""
        return self._pending

    def flush(self) -> None:
        """Wait until every record sent so far is acknowledged; raise DeadLetterError if any was not.

        Cheap when nothing was sent since the last flush, so it can run before every commit.
        """
        with self._lock:
            count = self._pending
            if not count and not self._failures:
                return
        remaining = self._producer.flush(self.FLUSH_TIMEOUT)
        with self._lock:
            self.flushes += 1
            self._pending -= count  # records sent meanwhile stay pending for the next flush
            failures, self._failures = self._failures, []
        if remaining or failures:
            late = f"{remaining} not acknowledged within {self.FLUSH_TIMEOUT:.0f} s"
            reason = failures[0] if failures else late
            raise DeadLetterError(
                f"could not deliver {len(failures) or remaining} of {count} record(s) to the dead-letter "
                f"topic {self.topic!r} (the first: {reason}); their source offsets are not committed, "
                "so they are consumed again after a restart"
            )

    def close(self) -> None:
        """Flush what is left (the runtime flushed before its last commit, so normally nothing)."""
        remaining = self._producer.flush(10)
        if remaining or self._failures:
            log.error(
                "the dead-letter topic %r did not take %d record(s) at shutdown; their source offsets "
                "were not committed, so they are consumed again", self.topic, remaining + len(self._failures),
            )

