"""The task's Kafka consumer: its librdkafka settings, as Kafka Connect would set them up.

One consumer per task, in group ``connect-<name>`` (the group Kafka Connect would use), with
auto-commit off: offsets are committed only after the task says the records are in storage.
``consumer.override.*`` keys pass through, as in Connect.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException

from kcql.errors import ConfigProblem
from sink.config.files import ConnectorConfig, mask

__all__ = ["consumer_config", "consumer_override_problems"]


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


def consumer_override_problems(props: Mapping[str, str]) -> list[ConfigProblem]:
    """Check ``consumer.override.*`` values with librdkafka itself, before any task starts.

    librdkafka validates every property when a client is created, so a throwaway consumer (never
    subscribed, pointed at a closed loopback port) turns a bad override into a config problem
    naming the key, instead of a KafkaException when the task starts.
    """
    overrides = {k: v for k, v in props.items() if k.startswith("consumer.override.")}
    if not overrides:
        return []
    conf = {k[len("consumer.override.") :]: v for k, v in overrides.items()}
    conf.update({"bootstrap.servers": "127.0.0.1:9", "group.id": "kcql-sink-validation", "log_level": "0"})
    try:
        Consumer(conf).close()
    except (KafkaException, TypeError, ValueError) as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if isinstance(err, KafkaError) else str(err)
        named = re.search(r'property:? "?([\w.]+)"?', text)
        key = f"consumer.override.{named[1]}" if named else next(iter(overrides))
        return [ConfigProblem(key, mask(key, props.get(key, "")), f"librdkafka rejects it: {text}")]
    return []
