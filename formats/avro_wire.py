"""Confluent Avro values as consumed, for STOREAS AVRO to write their bodies through.

A value in the Confluent wire format is a 5-byte header (magic byte 0, the 4-byte schema id) and
then the Avro body. The pass-through appends bodies to the file's open block, so what it needs
of a run of values is where fastavro would cut the blocks (from each body's size) and the bodies
of a range of records as one string of bytes (the block). :class:`WireValues` gives both from the
run's values without a Python step per record: one C loop finds the cuts and one copies a block's
bodies out of the values (``formats/_wire.c``; numpy and a slice per value where it was not
built).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from operator import itemgetter
from types import ModuleType
from typing import overload

import numpy as np

__all__ = ["WIRE_HEADER", "WireValues", "block_cuts", "bodies_of"]

WIRE_HEADER = 5
"""Confluent wire header before an Avro body: magic byte 0 and a 4-byte schema id."""

_body = itemgetter(slice(WIRE_HEADER, None))


class WireValues(Sequence[bytes]):
    """Values ``start`` to ``stop`` of a run (each header + body), as a sequence of the values.

    Args:
        values: every value of the run, each at least :data:`WIRE_HEADER` bytes long.
    """

    __slots__ = ("_start", "_stop", "_values")

    def __init__(self, values: list[bytes], start: int = 0, stop: int | None = None) -> None:
        self._values = values
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
            return WireValues(self._values, self._start + start, self._start + max(start, stop))
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError(i)
        return self._values[self._start + i]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._values[self._start : self._stop])

    def block_cuts(self, open_size: int, block_size: int) -> tuple[list[int], int]:
        """See :func:`block_cuts`."""
        start, stop = self._start, self._stop
        if _wire is not None and type(self._values) is list:
            cuts, left = _wire.block_cuts(self._values, start, stop, WIRE_HEADER, open_size, block_size)
            return [cut - start for cut in cuts] if start else cuts, left
        return _block_cuts_py(self._values[start:stop], open_size, block_size)

    def bodies(self, first: int = 0, last: int | None = None) -> bytes:
        """The bodies of values ``first`` to ``last`` (positions in this sequence), concatenated."""
        stop = self._stop if last is None else self._start + last
        return _joined_bodies(self._values, self._start + first, stop)


def block_cuts(values: Sequence[bytes], open_size: int, block_size: int) -> tuple[list[int], int]:
    """Where an Avro pass-through appending the bodies of ``values`` to an open block holding
    ``open_size`` bytes writes its blocks out: after each record that takes the open block to
    ``block_size`` bytes, as fastavro does at its ``sync_interval``. Returns the positions just
    after those records, and what the open block holds after the last one."""
    if isinstance(values, WireValues):
        return values.block_cuts(open_size, block_size)
    if _wire is not None and type(values) is list:
        return _wire.block_cuts(values, 0, len(values), WIRE_HEADER, open_size, block_size)
    return _block_cuts_py(values, open_size, block_size)


def _block_cuts_py(values: Sequence[bytes], open_size: int, block_size: int) -> tuple[list[int], int]:
    if not len(values):
        return [], open_size
    ends = np.cumsum(np.fromiter(map(len, values), np.int64, len(values)) - WIRE_HEADER) + open_size
    cuts: list[int] = []
    base = 0  # what was written out before the open block
    while True:
        cut = int(np.searchsorted(ends, base + block_size, side="left"))
        if cut >= len(values):
            break
        cuts.append(cut + 1)
        base = int(ends[cut])
    return cuts, (0 if cuts and cuts[-1] == len(values) else int(ends[-1]) - base)


def bodies_of(values: Sequence[bytes], first: int, last: int) -> bytes:
    """The bodies of ``values[first:last]`` concatenated (any sequence of wire values)."""
    if isinstance(values, WireValues):
        return values.bodies(first, last)
    return b"".join(map(_body, values[first:last]))


def _joined_bodies_py(values: list[bytes], first: int, last: int) -> bytes:
    return b"".join(map(_body, values[first:last]))


def _joined_bodies_c(values: list[bytes], first: int, last: int) -> bytes:
    if type(values) is not list or _wire is None:
        return _joined_bodies_py(values, first, last)
    return _wire.bodies(values, first, last, WIRE_HEADER)


_wire: ModuleType | None
try:  # one C loop and one copy per body (setup.py builds it when a compiler is at hand)
    from formats import _wire
except ImportError:  # pragma: no cover - a build without a C compiler
    _wire = None
    _joined_bodies = _joined_bodies_py
else:
    _joined_bodies = _joined_bodies_c
