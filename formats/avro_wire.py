"""Confluent Avro values as consumed, for STOREAS AVRO to write their bodies through.

A value in the Confluent wire format is a 5-byte header (magic byte 0, the 4-byte schema id) and
then the Avro body. The pass-through appends bodies to the file's open block, so what it needs
of a run of values is each body's size (where fastavro would cut the block) and the bodies of a
range of records as one string of bytes (the block). :class:`WireValues` gives both from the run's
values and where each ends in their concatenation (computed once per consumed run, see
:mod:`sink.records.avro_values`), without a Python step per record: the bodies of a block are
copied out of the values in one C loop (``formats/_wire.c``; a slice per value where it was not
built).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from typing import overload

import numpy as np

__all__ = ["WIRE_HEADER", "WireValues"]

WIRE_HEADER = 5
"""Confluent wire header before an Avro body: magic byte 0 and a 4-byte schema id."""

_body = itemgetter(slice(WIRE_HEADER, None))


class WireValues(Sequence[bytes]):
    """Values ``start`` to ``stop`` of a run (each header + body), as a sequence of the values.

    Args:
        values: every value of the run, each at least :data:`WIRE_HEADER` bytes long.
        ends: int64 array, ``ends[i]`` = the summed lengths of ``values[: i + 1]``.
    """

    __slots__ = ("_ends", "_start", "_stop", "_values")

    def __init__(
        self, values: list[bytes], ends: np.ndarray, start: int = 0, stop: int | None = None
    ) -> None:
        self._values = values
        self._ends = ends
        self._start = start
        self._stop = len(values) if stop is None else stop

    def __len__(self) -> int:
        return self._stop - self._start

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> WireValues: ...
    def __getitem__(self, i: int | slice) -> bytes | WireValues:
        n = self._stop - self._start
        if isinstance(i, slice):
            start, stop, step = i.indices(n)
            if step != 1:
                raise ValueError("wire values slice with step 1 only")
            return WireValues(self._values, self._ends, self._start + start, self._start + max(start, stop))
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._values[self._start + i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._values[self._start : self._stop])

    def body_ends(self) -> np.ndarray:
        """int64 array: the summed body sizes (headers left out) of the first 1, 2, ... values."""
        start, stop = self._start, self._stop
        base = int(self._ends[start - 1]) if start else 0
        return self._ends[start:stop] - base - WIRE_HEADER * np.arange(1, stop - start + 1, dtype=np.int64)

    def bodies(self, first: int = 0, last: int | None = None) -> bytes:
        """The bodies of values ``first`` to ``last`` (positions in this sequence), concatenated."""
        stop = self._stop if last is None else self._start + last
        return _joined_bodies(self._values, self._start + first, stop)


def bodies_of(values: Sequence[bytes], first: int, last: int) -> bytes:
    """The bodies of ``values[first:last]`` concatenated (any sequence of wire values)."""
    if isinstance(values, WireValues):
        return values.bodies(first, last)
    return b"".join(map(_body, values[first:last]))


def _joined_bodies_py(values: list[bytes], first: int, last: int) -> bytes:
    return b"".join(map(_body, values[first:last]))


def _joined_bodies_c(values: list[bytes], first: int, last: int) -> bytes:
    if type(values) is not list:
        return _joined_bodies_py(values, first, last)
    return _wire.bodies(values, first, last, WIRE_HEADER)


try:  # one C loop and one copy per body (setup.py builds it when a compiler is at hand)
    from formats import _wire
except ImportError:  # pragma: no cover - a build without a C compiler
    _joined_bodies = _joined_bodies_py
else:
    _joined_bodies = _joined_bodies_c
