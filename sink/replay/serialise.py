"""Converters on the way out: archived values → the bytes produced to Kafka.

The mirror of the sink's converters (``sink.records.converters``), named with Connect's classes
as in ``key.converter`` / ``value.converter`` of the replay config:

* ``ByteArrayConverter`` (the default for keys, as in the sink): bytes as they are; text is
  UTF-8 encoded; a structured value is written as compact JSON;
* ``StringConverter``: text as UTF-8; bytes as they are; structured values as JSON text;
* ``JsonConverter`` (the default for values, ``schemas.enable=false``): compact JSON, as Kafka's
  JsonConverter writes it (no spaces; bytes as base64 text, as Connect does);
* ``AvroConverter``: Confluent wire format; each value's Avro schema (the writer schema of the
  archived AVRO file) is registered under ``<topic>-value`` / ``<topic>-key`` in the target's
  Schema Registry (``*.converter.schema.registry.url``). Only AVRO files carry a schema.

Headers go back as bytes: text headers UTF-8, byte headers as they are, others as JSON text.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, Protocol

from kcql.errors import ConfigError, SinkError

__all__ = ["ReplaySerialiseError", "Serialiser", "build_serialiser", "header_bytes"]

BYTEARRAY = "org.apache.kafka.connect.converters.ByteArrayConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
AVRO = "io.confluent.connect.avro.AvroConverter"


class ReplaySerialiseError(SinkError):
    """An archived value cannot be written with the configured converter."""


class Serialiser(Protocol):
    """Turns one decoded value into the bytes of a Kafka key or value."""

    def serialise(self, topic: str, value: Any, schema: Any = None) -> bytes | None: ...


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(value).decode("ascii")
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return str(value)


def dumps(value: Any) -> str:
    """Compact JSON, key order kept (what Kafka's JsonConverter writes)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)


class ByteArraySerialiser:
    def serialise(self, topic: str, value: Any, schema: Any = None) -> bytes | None:
        if value is None:
            return None
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        if isinstance(value, str):
            return value.encode("utf-8")
        return dumps(value).encode("utf-8")


class StringSerialiser(ByteArraySerialiser):
    """Like ByteArray for the value kinds an archive holds (text stays text)."""


class JsonSerialiser:
    def serialise(self, topic: str, value: Any, schema: Any = None) -> bytes | None:
        if value is None:
            return None
        return dumps(value).encode("utf-8")


class AvroSerialiser:
    """Confluent Avro via confluent-kafka's ``AvroSerializer`` (registers the schema per subject)."""

    def __init__(self, url: str, is_key: bool) -> None:
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self._client = SchemaRegistryClient({"url": url})
        self._is_key = is_key
        self._serialisers: dict[tuple[str, str], Any] = {}

    def serialise(self, topic: str, value: Any, schema: Any = None) -> bytes | None:
        from confluent_kafka.schema_registry.avro import AvroSerializer
        from confluent_kafka.serialization import MessageField, SerializationContext

        if value is None:
            return None
        which = "key" if self._is_key else "value"
        if schema is None:
            raise ReplaySerialiseError(
                f"{which}.converter is AvroConverter, but the archive keeps no Avro schema for the "
                f"{which}: only STOREAS AVRO files carry one (use JsonConverter or ByteArrayConverter)"
            )
        text = json.dumps(schema, sort_keys=True)
        ser = self._serialisers.get((topic, text))
        if ser is None:
            ser = AvroSerializer(self._client, text, conf={"auto.register.schemas": True})
            self._serialisers[(topic, text)] = ser
        field = MessageField.KEY if self._is_key else MessageField.VALUE
        out: bytes = ser(value, SerializationContext(topic, field))
        return out


def build_serialiser(props: Mapping[str, Any], which: str) -> Serialiser:
    """The serialiser for ``key`` or ``value`` from ``<which>.converter`` (Connect names).

    Raises:
        ConfigError: an unknown converter class, or Avro without a registry URL.
    """
    default = BYTEARRAY if which == "key" else JSON
    cls = str(props.get(f"{which}.converter") or default).strip()
    if cls == BYTEARRAY or cls.endswith(".ByteArrayConverter"):
        return ByteArraySerialiser()
    if cls == STRING or cls.endswith(".StringConverter"):
        return StringSerialiser()
    if cls == JSON:
        if str(props.get(f"{which}.converter.schemas.enable", "false")).strip().lower() == "true":
            raise ConfigError(
                [
                    (
                        f"{which}.converter.schemas.enable",
                        "true",
                        "replay writes schemaless JSON only; set it to false",
                    )
                ]
            )
        return JsonSerialiser()
    if cls == AVRO:
        url = props.get(f"{which}.converter.schema.registry.url")
        if not url:
            raise ConfigError([(f"{which}.converter.schema.registry.url", "", "required with AvroConverter")])
        return AvroSerialiser(str(url), is_key=which == "key")
    raise ConfigError(
        [
            (
                f"{which}.converter",
                cls,
                f"unknown converter; one of {BYTEARRAY}, {STRING}, {JSON}, {AVRO}",
            )
        ]
    )


def header_bytes(value: Any) -> bytes | None:
    """A header value as Kafka bytes: text UTF-8, bytes as they are, others JSON text."""
    if value is None:
        return None
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8")
    return dumps(value).encode("utf-8")
