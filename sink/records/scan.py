"""The consuming thread's loops over a consumed batch, in C when the package was built with it.

Before a format sees a consumed batch, the runtime and the batch builder ask every message a
question or two: is any an error, where does the partition change, what are the values, the
smallest and largest timestamps of a file's records, and (Confluent Avro) do all values carry
one wire header. (Joining the values, with where each starts and ends, is left to the numpy
versions of the Avro steps: the C ones read the values where they lie.) In Python each is a
pass over the messages with a C call per message per attribute; together they were most of
what STOREAS AVRO from Confluent Avro did beside ``consume()`` (docs/benchmarks.md, "One pass
in C"). ``sink/records/_scan.c`` does each in one C loop (the steps together in about a
quarter of the time: ``python -m bench.loops``), reading the timestamp where the message keeps
it instead of building a tuple for it.

The C module is optional (``setup.py`` builds it when a compiler is at hand); :data:`NATIVE`
says whether it is in use. Each function here has its Python version beside it (``*_py``), which
runs when the module is missing or the argument is not a list, and which the tests hold the C
version to.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from types import ModuleType

import numpy as np
from confluent_kafka import KafkaError, Message

__all__ = ["IN_PLACE", "NATIVE", "TIMESTAMPS_IN_PLACE", "first_error", "join", "partition_cuts",
           "same_header", "timestamp_range", "values"]

Joined = tuple[bytes, np.ndarray, np.ndarray]
"""``(data, starts, ends)``: the values joined (then the padding), and where value ``i`` lies
in ``data`` (``data[starts[i]:ends[i]]``, int64 arrays)."""

_error = Message.error
_partition = Message.partition
_timestamp = Message.timestamp
_value = Message.value


def _load() -> tuple[ModuleType | None, bool]:
    try:
        from sink.records import _scan
    except ImportError:
        return None, False
    # probe messages with distinct timestamps of each type, partitions, values and errors: where
    # all of them keep theirs is where the C loops read a message's (bind() checks each place is
    # unique; the values and errors are told apart by identity)
    try:
        probes = [
            Message(timestamp=(kind, ms), partition=partition, value=value, error=KafkaError(code))
            for kind, ms, partition, value, code in (
                (1, 0x0123_4567_89AB, 0x0135_7531, b"probe value one", KafkaError._PARTITION_EOF),
                (2, 0x07ED_CBA9_8765, 0x0246_8642, b"probe value two", KafkaError._TRANSPORT),
                (0, -0x0BAD_5EED_F00D, 0x0369_9630, b"probe value three", KafkaError._ALL_BROKERS_DOWN),
            )
        ]
    except (TypeError, ValueError):  # a client whose Message cannot be built: its methods are called
        probes = []
    return _scan, _scan.bind(Message, probes)


_native, TIMESTAMPS_IN_PLACE = _load()
"""TIMESTAMPS_IN_PLACE: whether the C loop reads a message's timestamp where the message keeps
it (found with the probe messages) rather than through ``Message.timestamp()``."""
IN_PLACE: frozenset[str] = _native.in_place() if _native is not None else frozenset()
"""The Message fields (of error, partition, timestamp, value) the C loops read where a message
keeps them, found with the probe messages; the others are read through their methods."""
NATIVE = _native is not None
"""Whether the C loops are in use (``sink/records/_scan.c`` was built)."""


def first_error_py(messages: Sequence[Message]) -> int:
    if not any(map(_error, messages)):  # the common case, without a Python step per message
        return -1
    return next(i for i, msg in enumerate(messages) if msg.error() is not None)


def partition_cuts_py(messages: Sequence[Message]) -> list[int]:
    cuts, at = [], 0
    for _, group in groupby(messages, key=_partition):
        at += len(list(group))
        cuts.append(at)
    return cuts


def timestamp_range_py(messages: Sequence[Message], start: int, stop: int) -> tuple[int | None, int | None]:
    if start >= stop:
        return None, None
    # sorted() on the (type, ms) pairs: one comparison per message when they are in order, as
    # they usually are, where min() and max() make two
    kinds = sorted(map(_timestamp, messages[start:stop]))
    low, high = kinds[0], kinds[-1]
    if low[0] and low[0] == high[0]:  # one timestamp type for all: the pairs order by value
        return low[1], high[1]
    stamps = [ms for kind, ms in kinds if kind]
    return (min(stamps), max(stamps)) if stamps else (None, None)


def join_py(values: Sequence[bytes | None], padding: bytes) -> Joined | None:
    if None in values:
        return None
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))  # type: ignore[arg-type]
    ends = np.cumsum(lengths)
    return b"".join([*values, padding]), ends - lengths, ends  # type: ignore[list-item]


def values_py(messages: Sequence[Message]) -> list[bytes | None]:
    return list(map(_value, messages))


def same_header_py(values: Sequence[bytes | None], header: int) -> bool:
    if not values or None in values or header < 0:
        return False
    head = values[0][:header]  # type: ignore[index]
    return len(head) == header and all(v[:header] == head for v in values)  # type: ignore[index]


def first_error(messages: Sequence[Message]) -> int:
    """Index of the first message whose ``error()`` is not None, or -1."""
    if _native is not None and type(messages) is list:
        return _native.first_error(messages)
    return first_error_py(messages)


def partition_cuts(messages: Sequence[Message]) -> list[int]:
    """Where each run of consecutive messages of one partition ends (the last is ``len``)."""
    if _native is not None and type(messages) is list:
        return _native.partition_cuts(messages)
    return partition_cuts_py(messages)


def timestamp_range(messages: Sequence[Message], start: int, stop: int) -> tuple[int | None, int | None]:
    """Smallest and largest timestamp (epoch ms) of ``messages[start:stop]`` that have one
    (type not ``TIMESTAMP_NOT_AVAILABLE``), or ``(None, None)``."""
    if _native is not None and type(messages) is list:
        return _native.timestamp_range(messages, start, stop)
    return timestamp_range_py(messages, start, stop)


def join(values: Sequence[bytes | None], padding: bytes) -> Joined | None:
    """``values`` joined (see :data:`Joined`), or None when one is a tombstone."""
    if _native is not None and type(values) is list:
        starts = np.empty(len(values), np.int64)
        ends = np.empty(len(values), np.int64)
        data = _native.join(values, padding, starts, ends)
        return None if data is None else (data, starts, ends)
    return join_py(values, padding)


def values(messages: Sequence[Message]) -> list[bytes | None]:
    """Every message's ``value()``, in order."""
    if _native is not None and type(messages) is list:
        return _native.values(messages)
    return values_py(messages)


def same_header(values: Sequence[bytes | None], header: int) -> bool:
    """Whether every value is at least ``header`` bytes long and starts with the first one's
    ``header`` bytes (``False`` for none, or when one is a tombstone), without joining them."""
    if _native is not None and type(values) is list:
        return _native.same_header(values, header)
    return same_header_py(values, header)
