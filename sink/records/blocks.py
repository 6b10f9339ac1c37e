"""Blocks: runs of consumed messages of one partition handed to the task whole, not record by record.

Building a :class:`~sink.records.record.SinkRecord` per message costs more than consuming it. For the two
commonest kinds of topic, a block skips that: :class:`sink.records.json_lines.JsonLines` (one-line JSON
objects, kept as one joined text) and :class:`sink.records.avro_block.AvroBlock` (Confluent Avro of one
flat record schema, decoded column by column into Arrow). A block carries what the file name and
the offsets need (first/last offset, min/max timestamp) and writes itself into a format writer
with :meth:`MessageBlock.write_into`, which the format may refuse; the caller then converts the
same messages one by one. So blocks change how fast records are written, never what is written.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from confluent_kafka import Message

if TYPE_CHECKING:
    from formats.base import FormatWriter

__all__ = ["MessageBlock", "keys_are_text"]

_timestamp = Message.timestamp
_key = Message.key


def keys_are_text(messages: Sequence[Message]) -> bool:
    """Whether every non-null key decodes as UTF-8 (what the StringConverter would require)."""
    try:
        # an ASCII separator ends any multi-byte sequence, so this fails iff one key does;
        # filter(None, ...) drops null (and empty) keys without a Python-level loop
        b"\n".join(filter(None, map(_key, messages))).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


class MessageBlock:
    """Consecutive messages of one topic partition, in offset order."""

    __slots__ = ("messages", "partition", "topic")

    def __init__(self, topic: str, partition: int, messages: Sequence[Message]) -> None:
        self.topic = topic
        self.partition = partition
        self.messages = messages

    def __len__(self) -> int:
        return len(self.messages)

    @property
    def first_offset(self) -> int:
        return self.messages[0].offset() or 0

    @property
    def last_offset(self) -> int:
        return self.messages[-1].offset() or 0

    def timestamps(self) -> tuple[int | None, int | None]:
        """Smallest and largest record timestamp (epoch ms); ``None`` when no record has one."""
        # sorted() on the (type, ms) tuples: one comparison per message when they are in order,
        # as they usually are, where min() and max() make two
        stamps = sorted(map(_timestamp, self.messages))
        low, high = stamps[0], stamps[-1]
        if low[0] and low[0] == high[0]:  # one timestamp type for all: tuples order by value
            return low[1], high[1]
        values = [ts for kind, ts in stamps if kind]
        return (min(values), max(values)) if values else (None, None)

    def head(self, count: int) -> MessageBlock:
        """The first ``count`` messages as their own block."""
        raise NotImplementedError

    def tail(self, count: int) -> MessageBlock:
        """The messages after the first ``count`` as their own block."""
        raise NotImplementedError

    def write_into(self, writer: FormatWriter) -> bool:
        """Append every record to ``writer`` and return True, or write nothing and return False."""
        raise NotImplementedError

    def prepare(self, writer: FormatWriter, submit: Callable[..., Future[Any]]) -> bool:
        """Start, with ``submit(fn, *args)``, what :meth:`write_into` ``writer`` can do ahead on
        another thread (parsing); whether anything was started. The default: nothing."""
        return False
