"""Confluent Avro values of one flat record schema, decoded for a whole run at once.

See :mod:`sink.records.blocks`.

A run of messages whose values all carry the same schema id, of a record of primitive fields, is
decoded column by column (:mod:`formats.avro_columns`) into one Arrow batch, which the Parquet
format appends as it is when its file has that schema. Anything else (a tombstone, another wire
header, a schema with nested or logical types, a body that does not decode cleanly, a key the
StringConverter would reject) returns ``None`` and goes through the converters record by record.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
from confluent_kafka import Message

from formats.avro_columns import decode_columns
from sink.records.blocks import MessageBlock, keys_are_text

if TYPE_CHECKING:
    from formats.base import FormatWriter
    from sink.records.converters import AvroConverter

__all__ = ["AvroBlock", "avro_block"]

_value = Message.value
_wire_header = itemgetter(slice(0, 5))


class AvroBlock(MessageBlock):
    """Messages of one partition decoded into ``batch`` (Arrow), all written with ``schema`` (Avro)."""

    __slots__ = ("batch", "schema")

    def __init__(
        self, topic: str, partition: int, messages: Sequence[Message], batch: pa.RecordBatch, schema: Any
    ) -> None:
        super().__init__(topic, partition, messages)
        self.batch = batch
        self.schema = schema

    def head(self, count: int) -> AvroBlock:
        if count >= len(self.messages):
            return self
        messages, batch = self.messages[:count], self.batch.slice(0, count)
        return AvroBlock(self.topic, self.partition, messages, batch, self.schema)

    def tail(self, count: int) -> AvroBlock:
        if count <= 0:
            return self
        messages, batch = self.messages[count:], self.batch.slice(count)
        return AvroBlock(self.topic, self.partition, messages, batch, self.schema)

    def write_into(self, writer: FormatWriter) -> bool:
        return writer.write_batch(self.batch, self.schema)


def avro_block(
    topic: str, partition: int, messages: Sequence[Message], check_keys: bool, converter: AvroConverter
) -> AvroBlock | None:
    """An :class:`AvroBlock` of ``messages``, or ``None`` when they need the per-record path."""
    values: list[Any] = list(map(_value, messages))
    if None in values:
        return None
    headers = set(map(_wire_header, values))
    if len(headers) != 1:
        return None
    header = headers.pop()
    if len(header) != 5 or header[0] != 0:
        return None
    try:
        columns = converter.columns(int.from_bytes(header[1:5], "big"))
    except Exception:  # noqa: BLE001 - the per-record path reports registry problems per record
        return None
    if columns is None:
        return None
    if check_keys and not keys_are_text(messages):
        return None
    writer_schema, fields, arrow_schema = columns
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    batch = decode_columns(b"".join(values), ends - lengths + 5, ends, fields, arrow_schema)
    if batch is None:
        return None
    return AvroBlock(topic, partition, messages, batch, writer_schema)
