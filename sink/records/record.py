"""The record every stage after the converters works on.

Kept in a module with no imports from the rest of ``sink`` so that ``partitioners`` and
``formats`` can refer to it (for type checking only) without pulling in the task runtime.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["Headers", "Schema", "SinkRecord", "TopicPartition"]

Schema = dict[str, Any] | str | list[Any]
"""Schemas are carried as Avro schemas (parsed JSON: dict, primitive name or union list).

One schema language for every source: Avro records arrive with theirs, and the JSON converter with
``schemas.enable=true`` translates Connect schemas into the equivalent Avro schema, exactly as
Confluent's ``AvroData`` does. Formats then need a single mapping (Avro → Arrow for Parquet).
"""

Headers = tuple[tuple[str, Any], ...]
"""Headers in arrival order; names may repeat, as in Kafka. Values are converted (str/bytes/None/...)."""


@dataclass(slots=True)
class TopicPartition:
    """A Kafka topic partition (hashable, ordered)."""

    topic: str
    partition: int

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))

    def __lt__(self, other: TopicPartition) -> bool:
        return (self.topic, self.partition) < (other.topic, other.partition)

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True)
class SinkRecord:
    """One Kafka record after key and value conversion.

    Not frozen: construction sits on the per-record hot path and frozen dataclasses pay for
    ``object.__setattr__`` on every field. Treat instances as read-only all the same.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int | None = None
    """Record timestamp in epoch milliseconds, ``None`` when the record has none."""
    key: Any = None
    """Converted key: ``None``, ``str``, ``bytes``, a number, ``bool``, ``dict`` (struct/map) or ``list``."""
    value: Any = None
    """Converted value, same types as ``key``; ``None`` is a tombstone."""
    headers: Headers = ()
    key_schema: Schema | None = None
    """Avro schema of ``key`` when the converter knows one."""
    value_schema: Schema | None = None
    """Avro schema of ``value`` when the converter knows one (Avro, JSON with schemas.enable)."""
    raw_value: bytes | None = None
    """The value's serialized JSON text when the converter is schemaless JSON, so that the JSON
    format can write it through without re-encoding. ``None`` otherwise."""

    @property
    def where(self) -> str:
        """``topic/partition/offset`` for error messages, so the user can find the record."""
        return f"topic {self.topic!r} partition {self.partition} offset {self.offset}"
