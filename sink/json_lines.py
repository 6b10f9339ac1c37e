"""The batch fast path for schemaless JSON: consumed messages kept as one joined block of lines.

Most topics a sink reads carry one-line JSON objects, and most statements need nothing from a
record but its value bytes, its offset and its timestamp (no envelope, no PARTITIONBY on fields).
Building a :class:`~sink.record.SinkRecord` per message for them costs more than consuming the
message. A :class:`JsonLines` instead holds a run of consecutive messages of one partition and
their values joined by newlines, built with C-level ``map``/``join``/``count`` calls and no
per-record Python code. The JSON format appends the block as it is; the Parquet format parses it
with Arrow's JSON reader in one call.

Nothing here decides whether a record is valid. :func:`json_lines` only accepts a run whose
every value is a non-empty one-line ``{...}`` text (no tombstone, no line break, no carriage
return) and, when the key converter must be checked, whose every key decodes; anything else
returns ``None`` and the caller converts the messages one by one, with the usual per-record
error policy. A format that cannot take a block whole (the file's schema is not fixed yet, a line
does not fit it) refuses it, and the caller falls back the same way, so the fast path never
changes what is written, only how fast.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from confluent_kafka import Message

__all__ = ["JsonLines", "json_lines"]

_value = Message.value
_key = Message.key
_timestamp = Message.timestamp


class JsonLines:
    """Consecutive messages of one topic partition whose values are one-line JSON objects.

    Attributes:
        topic, partition: where the messages come from.
        messages: the confluent-kafka messages, in offset order.
        data: their values joined by ``\\n`` (no trailing newline).
    """

    __slots__ = ("data", "messages", "partition", "topic")

    def __init__(self, topic: str, partition: int, messages: Sequence[Message], data: bytes) -> None:
        self.topic = topic
        self.partition = partition
        self.messages = messages
        self.data = data

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
        stamps = list(map(_timestamp, self.messages))
        low, high = min(stamps), max(stamps)
        if low[0] and low[0] == high[0]:  # one timestamp type for all: tuples order by value
            return low[1], high[1]
        values = [ts for kind, ts in stamps if kind]
        return (min(values), max(values)) if values else (None, None)

    def head(self, count: int) -> JsonLines:
        """The first ``count`` messages as their own block."""
        if count >= len(self.messages):
            return self
        messages = self.messages[:count]
        return JsonLines(self.topic, self.partition, messages, b"\n".join(map(_value, messages)))

    def tail(self, count: int) -> JsonLines:
        """The messages after the first ``count`` as their own block."""
        if count <= 0:
            return self
        messages = self.messages[count:]
        return JsonLines(self.topic, self.partition, messages, b"\n".join(map(_value, messages)))


def json_lines(topic: str, partition: int, messages: Sequence[Message], check_keys: bool) -> JsonLines | None:
    """A :class:`JsonLines` of ``messages``, or ``None`` when one of them needs the per-record path.

    Args:
        topic, partition: where every message in ``messages`` comes from.
        messages: consecutive, error-free messages of that partition.
        check_keys: the key converter is UTF-8 text: every non-null key must decode, so that a key
            the StringConverter rejects still reaches the error policy.
    """
    count = len(messages)
    values: list[Any] = list(map(_value, messages))
    try:
        data = b"\n".join(values)  # a tombstone (None) raises TypeError
    except TypeError:
        return None
    # every value one line: exactly count-1 separators, each between a "}" and a "{"
    if (
        data[:1] != b"{"
        or data[-1:] != b"}"
        or data.count(b"\n") != count - 1
        or data.count(b"}\n{") != count - 1
        or b"\r" in data
    ):
        return None
    if check_keys:
        keys = [k for k in map(_key, messages) if k is not None]
        if keys:
            try:
                # an ASCII separator ends any multi-byte sequence, so this fails iff one key does
                b"\n".join(keys).decode("utf-8")
            except UnicodeDecodeError:
                return None
    return JsonLines(topic, partition, messages, data)
