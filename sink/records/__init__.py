"""What flows from the consumer to the files: records, batches of them, and the converters that make them.

Kafka messages become :class:`~sink.records.record.SinkRecord` values through the Connect
converters (:mod:`sink.records.converters`).
"""

from __future__ import annotations

from sink.records.record import Headers, Schema, SinkRecord, TopicPartition

__all__ = ["Headers", "Schema", "SinkRecord", "TopicPartition"]
