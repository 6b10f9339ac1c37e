"""The task's Kafka consumer: its librdkafka settings, as Kafka Connect would set them up.

One consumer per task, in group ``connect-<name>`` (the group Kafka Connect would use), with
auto-commit off: offsets are committed only after the task says the records are in storage.
``consumer.override.*`` keys pass through, as in Connect.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sink.config.files import ConnectorConfig

__all__ = ["AssignmentLog", "consumer_config"]

log = logging.getLogger(__name__)

SLOW_JOIN_SECONDS = 10.0


def consumer_config(cfg: ConnectorConfig, bootstrap: str) -> dict[str, Any]:
    """librdkafka settings for the task's consumer; ``consumer.override.*`` keys pass through."""
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"connect-{cfg.name}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 100,
        # librdkafka (2.x) postpones a partition's next fetch by this much whenever its local
        # queue is over queued.min.messages; at the default 1000 ms a sink that writes slower
        # than Kafka delivers stalls for up to a second at a time with nothing to do
        "fetch.queue.backoff.ms": 10,
        "topic.metadata.refresh.interval.ms": 5000,
        "client.id": f"kcql-sink-{cfg.name}",
    }
    for key, value in cfg.props.items():
        if key.startswith("consumer.override."):
            conf[key[len("consumer.override.") :]] = value
    return conf


class AssignmentLog:
    """One INFO line per partition assignment; the first also says how long the group join took.

    Nothing is consumed before the first assignment, so a slow join is the start-up latency a
    person sees after POSTing a connector: Tansu, for one, holds a new group's first join for about
    half of ``session.timeout.ms`` (23 s at librdkafka's 45 s default). A slow first join names
    the setting that shortens it.
    """

    def __init__(self, conf: dict[str, Any]) -> None:
        self.group = str(conf.get("group.id"))
        self.session_timeout_ms = conf.get("session.timeout.ms", 45000)
        self._subscribed = time.monotonic()
        self._first = True

    def assigned(self, partitions: list[str]) -> None:
        """Log ``partitions`` (``topic-partition@offset``) as this assignment."""
        waited = ""
        if self._first:
            seconds = time.monotonic() - self._subscribed
            waited = f" ({seconds:.1f} s after subscribing"
            if seconds > SLOW_JOIN_SECONDS:
                waited += (
                    f"; session.timeout.ms={self.session_timeout_ms}: some brokers hold a new group's first "
                    "join for about half of it, consumer.override.session.timeout.ms=6000 shortens it"
                )
            waited += ")"
            self._first = False
        log.info("group %s: assigned %s%s", self.group, ", ".join(partitions) or "nothing", waited)
