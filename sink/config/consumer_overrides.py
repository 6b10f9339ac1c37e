"""``consumer.override.*``: checked by librdkafka's own property parser, without creating a client.

The task's consumer gets every ``consumer.override.<key>`` as librdkafka property ``<key>``. Only
librdkafka knows which properties and values it accepts (names, ranges, enums, booleans, the
``sasl.jaas.config`` it refuses), so validation asks it rather than keeping a copy of its rules.

It does so without a client: ``confluent_kafka.Consumer(conf)`` applies the properties one by one
in dict order (``rd_kafka_conf_set``) and raises ``KafkaException(_INVALID_ARG)`` at the first one
it rejects, *before* ``rd_kafka_new`` creates the client (no thread, no socket, no broker). The
properties are therefore followed by one property librdkafka cannot know (:data:`SENTINEL`): when
the error names it, every override before it was accepted, and no client was ever created.

``plugin.library.paths`` is never passed: librdkafka would ``dlopen`` the libraries while parsing,
and validation must not load code. Because a plugin may add properties of its own, unknown
properties are not reported when that key is set; the task start reports them.
"""

from __future__ import annotations

from collections.abc import Mapping

from confluent_kafka import Consumer, KafkaError, KafkaException

from kcql.errors import ConfigProblem
from sink.config.secrets import HIDDEN, is_secret_key, mask

__all__ = ["OVERRIDE_PREFIX", "SENTINEL", "consumer_override_problems"]

OVERRIDE_PREFIX = "consumer.override."
SENTINEL = "kcql.sink.validation.sentinel"
"""A property librdkafka does not have; its rejection proves every property before it was accepted."""

_PLUGINS = "plugin.library.paths"
_UNKNOWN = "No such configuration property"
_GROUP = {"group.id": "kcql-sink-validation"}
"""The Python client refuses a consumer config without ``group.id`` before parsing anything else;
the runtime sets ``connect-<name>``, so an override of it is checked like any other property."""


def consumer_override_problems(props: Mapping[str, str]) -> list[ConfigProblem]:
    """One problem per ``consumer.override.*`` value librdkafka rejects, naming the full key.

    Builds no Kafka client: see the module docstring.
    """
    overrides = {
        key[len(OVERRIDE_PREFIX) :]: (key, value)
        for key, value in props.items()
        if key.startswith(OVERRIDE_PREFIX) and key[len(OVERRIDE_PREFIX) :] != _PLUGINS
    }
    if not overrides:
        return []
    plugins = OVERRIDE_PREFIX + _PLUGINS in props
    together = _rejection({name: value for name, (_key, value) in overrides.items()})
    if together is None:
        return []
    # one probe per override, so every bad one is reported (not only the first) under its own key
    problems = []
    for name, (key, value) in overrides.items():
        why = _rejection({name: value})
        if why is not None and not (plugins and _UNKNOWN in why):
            problems.append(_problem(key, value, why))
    if not problems and not (plugins and _UNKNOWN in together):
        # accepted one by one, refused together: name the first override the message mentions
        key, value = next(
            ((k, v) for name, (k, v) in overrides.items() if f'"{name}"' in together),
            next(iter(overrides.values())),
        )
        problems.append(_problem(key, value, together))
    return problems


def _problem(key: str, value: str, why: str) -> ConfigProblem:
    if value and is_secret_key(key):
        why = why.replace(value, HIDDEN)
    return ConfigProblem(key, mask(key, value), why)


def _rejection(conf: Mapping[str, str]) -> str | None:
    """Why the Kafka client refuses ``conf``, or ``None`` when it accepts every property."""
    try:
        consumer = Consumer({**_GROUP, **conf, SENTINEL: "1"})
    except KafkaException as exc:
        error = exc.args[0] if exc.args else None
        text = (error.str() if isinstance(error, KafkaError) else str(exc)).strip()
        return None if f'"{SENTINEL}"' in text else f"librdkafka rejects it: {text}"
    except (TypeError, ValueError, AttributeError) as exc:
        # the Python client's own keys (error_cb, stats_cb, default.topic.config, ...) want objects
        return f"the Kafka client rejects it: {exc}"
    # unreachable: librdkafka has no property named like the sentinel, so rd_kafka_new never runs;
    # should that change, close what was built rather than leave a client behind
    consumer.close()
    return None
