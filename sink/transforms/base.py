"""What every transform and predicate is, and how one is named in a Connect config.

Kafka Connect applies ``transforms=a,b`` in order to each record between the converter and the
sink task; ``transforms.a.type`` names the class, the other ``transforms.a.*`` keys configure it,
and ``transforms.a.predicate`` (+ ``negate``) limits it to the records a predicate matches. A
transform returns the new record, or ``None`` to drop it (Connect's contract); a record the
transform cannot handle is a :class:`~kcql.errors.RecordError` with stage ``TRANSFORMATION``,
which the error policy handles like any other bad record.

Records are :class:`~sink.records.record.SinkRecord`: a struct is a ``dict`` and its schema,
when the converter knows one, is an Avro record schema (``value_schema``/``key_schema``). A
transform that changes a value's shape changes its schema to match, so AVRO and PARQUET files get
the transformed columns.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import ClassVar

from kcql.errors import ConfigError, RecordError
from sink.records.record import SinkRecord

__all__ = ["Predicate", "Transform", "TransformSettings", "record_error"]


class TransformSettings:
    """A transform's (or predicate's) own settings: ``transforms.<name>.<key>`` without the prefix.

    Reading a setting marks it used, so :meth:`check_all_used` can name a setting no one reads
    (Connect rejects unknown settings of the stock SMTs the same way, by its ConfigDef).
    """

    def __init__(self, prefix: str, values: Mapping[str, str]) -> None:
        self.prefix = prefix
        """``transforms.<name>.`` or ``predicates.<name>.``: how errors name a key."""
        self.values = dict(values)
        self._used: set[str] = set()

    def get(self, key: str, default: str | None = None) -> str | None:
        self._used.add(key)
        value = self.values.get(key)
        return default if value is None else value

    def require(self, key: str) -> str:
        value = self.get(key)
        if value is None or value == "":
            raise self.error(key, "", "is required")
        return value

    def get_list(self, key: str) -> list[str]:
        """A Connect list setting: comma-separated, blanks dropped."""
        raw = self.get(key) or ""
        return [item.strip() for item in raw.split(",") if item.strip()]

    def error(self, key: str, value: str, why: str) -> ConfigError:
        return ConfigError([(self.prefix + key, value, why)])

    def check_all_used(self) -> None:
        unknown = sorted(set(self.values) - self._used)
        if unknown:
            raise ConfigError(
                [
                    (self.prefix + key, self.values[key], "is not a setting of this transform")
                    for key in unknown
                ]
            )


class Transform(ABC):
    """One configured transform (Connect's ``Transformation``).

    Subclasses read their settings in ``__init__`` (raising :class:`ConfigError` naming the key)
    and implement :meth:`apply`.
    """

    keeps_topic: ClassVar[bool] = True
    """``False`` for transforms that may change a record's topic (RegexRouter, Python callables):
    topic predicates after them must look at each record (see ``TransformChain.for_topic``)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        self.name = name

    @abstractmethod
    def apply(self, record: SinkRecord) -> SinkRecord | None:
        """The transformed record, or ``None`` to drop it.

        Raises:
            RecordError: (stage ``TRANSFORMATION``) the record cannot be transformed.
        """


class Predicate(ABC):
    """One configured predicate (Connect's ``Predicate``)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        self.name = name

    @abstractmethod
    def test(self, record: SinkRecord) -> bool:
        """Whether ``record`` matches."""

    def test_topic(self, topic: str) -> bool | None:
        """The answer for every record of ``topic`` when the topic alone decides it, else ``None``."""
        return None


def record_error(record: SinkRecord, transform: str, why: str) -> RecordError:
    """The error a transform raises for a record it cannot handle (names the transform and record)."""
    return RecordError(
        f"transform {transform!r} failed on the record at {record.where}: {why}",
        offset=record.offset,
        stage="TRANSFORMATION",
    )
