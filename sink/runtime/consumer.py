"""The task's Kafka consumer: its librdkafka settings, as Kafka Connect would set them up.

One consumer per task, in group ``connect-<name>`` (the group Kafka Connect would use), with
auto-commit off: offsets are committed only after the task says the records are in storage.
``consumer.override.*`` keys pass through, as in Connect.
"""

from __future__ import annotations

from typing import Any

from sink.config.files import ConnectorConfig

__all__ = ["consumer_config"]


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
