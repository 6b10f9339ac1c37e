"""Kafka Connect's stock predicates: ``TopicNameMatches``, ``HasHeaderKey``, ``RecordIsTombstone``.

After Apache Kafka's ``connect/transforms/.../predicates``: same settings, same answers.
"""

from __future__ import annotations

import re

from sink.records.record import SinkRecord
from sink.transforms.base import Predicate, TransformSettings

__all__ = ["PREDICATES"]

_PKG = "org.apache.kafka.connect.transforms.predicates."


class TopicNameMatches(Predicate):
    """True when ``pattern`` matches the whole topic name (Java's ``Matcher.matches``)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        pattern = settings.require("pattern")
        try:
            self.pattern = re.compile(pattern)
        except re.error as exc:
            raise settings.error("pattern", pattern, f"is not a valid regular expression: {exc}") from None
        settings.check_all_used()

    def test(self, record: SinkRecord) -> bool:
        return self.pattern.fullmatch(record.topic) is not None

    def test_topic(self, topic: str) -> bool | None:
        return self.pattern.fullmatch(topic) is not None


class HasHeaderKey(Predicate):
    """True when the record has at least one header named ``name``."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.header = settings.require("name")
        settings.check_all_used()

    def test(self, record: SinkRecord) -> bool:
        return any(key == self.header for key, _ in record.headers)


class RecordIsTombstone(Predicate):
    """True when the record's value is null."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        settings.check_all_used()

    def test(self, record: SinkRecord) -> bool:
        return record.value is None


PREDICATES: dict[str, type[Predicate]] = {
    _PKG + "TopicNameMatches": TopicNameMatches,
    _PKG + "HasHeaderKey": HasHeaderKey,
    _PKG + "RecordIsTombstone": RecordIsTombstone,
}
"""Connect class name → predicate class."""
