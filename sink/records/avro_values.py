"""The cheap form of Confluent Avro values: the bodies of one schema id, decoded to Arrow when asked.

A run of values that all carry the same Confluent wire header (magic byte 0 and one schema id)
can be decoded column by column (:mod:`formats.avro_columns`) into one Arrow batch, which the
PARQUET format appends as it is when its file has that schema. :func:`avro_runs` splits a
partition's values into such runs (and runs of tombstones or foreign payloads, which go record
by record); the decoding itself is left until a format asks (:func:`decode_values`), so a
statement writing JSON or CSV never pays for it.

STOREAS AVRO writes such bodies as they came when its file has their schema; it only needs to
know that :func:`decode_values` would have decoded every one of them, which :func:`check_values`
answers without building the columns (no gathering of text bytes into Arrow buffers).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

import numpy as np
import pyarrow as pa

from formats.avro_columns import (
    _PAD,
    FlatField,
    _Malformed,
    _varints,
    decode_bodies,
    decode_columns,
    field_codes,
    native,
)
from formats.avro_wire import WIRE_HEADER
from sink.records import scan
from sink.records.scan import join

__all__ = ["AvroRun", "Joined", "avro_runs", "check_joined", "check_values", "decode_values", "join_values",
           "joined_runs"]

_wire_header = itemgetter(slice(0, 5))
_PADDING = bytes(_PAD)
_HIGH = {n: np.uint64(int("80" * n + "00" * (8 - n), 16)) for n in (4, 5, 8)}
"""The high bit of each of the first ``n`` bytes of a big-endian 8-byte window."""

AvroRun = tuple[int, int, int | None]
"""``(start, stop, schema id)``: values ``start`` to ``stop`` of the list given to
:func:`avro_runs` and their common schema id, or ``None`` when they go record by record."""


class Joined:
    """The values of one run (no tombstones), shared by every bulk step that reads them: the
    check, the decoding, the pass-through's blocks.

    The C module reads the values where they lie (``formats/_avro_flat.c``, ``formats/_wire.c``).
    The numpy versions need them concatenated: :attr:`data`, :attr:`starts` and :attr:`ends` are
    joined on first use, so a run the C module reads is never copied whole (for STOREAS AVRO
    that copy was a tenth of the consuming thread's own work, docs/benchmarks.md)."""

    __slots__ = ("_data", "_ends", "_starts", "values")

    def __init__(
        self, values: list[bytes], data: bytes | None = None, starts: np.ndarray | None = None,
        ends: np.ndarray | None = None,
    ) -> None:
        self.values = values
        self._data = data
        self._starts = starts
        self._ends = ends

    def __len__(self) -> int:
        return len(self.values)

    def _join(self) -> None:
        done = join(self.values, _PADDING)
        if done is None:
            raise TypeError("join_values: a value is not bytes (a tombstone?)")
        self._data, self._starts, self._ends = done

    @property
    def data(self) -> bytes:
        """The values joined, then ``_PAD`` zero bytes (a varint read or an 8-byte window
        starting in the last value never runs off the end)."""
        if self._data is None:
            self._join()
        return self._data  # type: ignore[return-value]

    @property
    def starts(self) -> np.ndarray:
        """int64: value ``i`` is ``data[starts[i]:ends[i]]``."""
        if self._starts is None:
            self._join()
        return self._starts  # type: ignore[return-value]

    @property
    def ends(self) -> np.ndarray:
        """int64: where each value ends in :attr:`data`."""
        if self._ends is None:
            self._join()
        return self._ends  # type: ignore[return-value]


def join_values(values: list[bytes]) -> Joined:
    """``values`` (no tombstones) joined, with where each starts and ends."""
    joined = Joined(values)
    joined._join()
    return joined


def _windows(data: bytes) -> np.ndarray:
    """Element ``i``: the 8 bytes ``data[i:i + 8]`` as a big-endian uint64 (a view, no copy), so
    that one gather reads several bytes at each of many positions."""
    return np.ndarray(shape=(len(data) - 7,), dtype=">u8", buffer=data, strides=(1,))


def _schema_id(header: bytes | None) -> int | None:
    if header is None or len(header) != 5 or header[0] != 0:
        return None
    return int.from_bytes(header[1:5], "big")


def _one_header(values: list[bytes | None]) -> tuple[Joined, int] | None:
    """The values as one run and their schema id when all carry the same wire header (the
    common case, checked in one pass without joining them: :func:`sink.records.scan.same_header`),
    else None."""
    if not values or not values[0]:
        return None
    head = _schema_id(values[0][:5])
    if head is None or not scan.same_header(values, WIRE_HEADER):  # a tombstone, a short or other header
        return None
    return Joined(values), head  # type: ignore[arg-type]


def joined_runs(values: list[bytes | None]) -> tuple[list[AvroRun], Joined | None]:
    """:func:`avro_runs` of ``values``, and the run's :class:`Joined` when they are a single
    run of one schema id (to be shared by what reads that run in bulk), else None."""
    if not values:
        return [], None
    one = _one_header(values)
    if one is not None:
        return [(0, len(values), one[1])], one[0]
    return avro_runs(values), None


def avro_runs(values: Sequence[bytes | None]) -> list[AvroRun]:
    """Split ``values`` into maximal runs of one schema id, and runs of anything else."""
    if not values:
        return []
    if None not in values:
        headers = set(map(_wire_header, values))  # type: ignore[arg-type]
        if len(headers) == 1:
            return [(0, len(values), _schema_id(headers.pop()))]
    runs: list[AvroRun] = []
    start = 0
    keys = (None if v is None else _schema_id(v[:5]) for v in values)
    for schema_id, group in groupby(keys):
        count = sum(1 for _ in group)
        runs.append((start, start + count, schema_id))
        start += count
    return runs


def decode_values(
    values: Sequence[bytes] | Joined, fields: tuple[FlatField, ...], arrow_schema: pa.Schema
) -> pa.RecordBatch | None:
    """The bodies (after the 5-byte wire header) decoded into one Arrow batch, or ``None`` when
    one does not decode cleanly (the per-record path then reports it). Values joined already
    (a run's :class:`Joined`, shared with the check and the pass-through) are decoded where
    they lie: no second list of the values, join, or copy to pad them."""
    if isinstance(values, Joined):
        if native() is not None and type(values.values) is list:
            batch: Any = decode_bodies(values.values, fields, arrow_schema, header=WIRE_HEADER)
            return batch
        batch = decode_columns(
            values.data, values.starts, values.ends, fields, arrow_schema, padded=True, header=WIRE_HEADER
        )
        return batch
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
    ends = np.cumsum(lengths)
    batch = decode_columns(b"".join(values), ends - lengths + 5, ends, fields, arrow_schema)
    return batch


def check_values(values: Sequence[bytes], fields: tuple[FlatField, ...]) -> bool:
    """Whether :func:`decode_values` would decode every body (after the 5-byte wire header)
    cleanly (see :func:`check_joined`)."""
    if not values:
        return True
    return check_joined(Joined(list(values)), fields, same_header=False)


def check_joined(joined: Joined, fields: tuple[FlatField, ...], *, same_header: bool = True) -> bool:
    """Whether :func:`decode_values` would decode every body of ``joined`` (values that are each
    a 5-byte wire header and a body; ``same_header``: all of one header, as a run of one schema
    id is) cleanly, without building the columns: the C module's first walk
    (``formats/_avro_flat.c``) when it was built, else :func:`check_joined_py`."""
    c = native()
    if c is None:
        return check_joined_py(joined, fields, same_header=same_header)
    kinds, nulls = field_codes(fields)
    if type(joined.values) is list:
        listed: bool = c.check_values(joined.values, WIRE_HEADER, kinds, nulls)  # where they lie
        return listed
    ok: bool = c.check(joined.data, joined.starts, joined.ends, WIRE_HEADER, kinds, nulls)
    return ok


def check_joined_py(joined: Joined, fields: tuple[FlatField, ...], *, same_header: bool = True) -> bool:
    """:func:`check_joined` with numpy, walked field by field as the numpy decoder does.

    The same checks: union branches 0/1, ints in range, booleans 0/1, varints of at most 10
    bytes, lengths that stay inside their record, no bytes left over, at most 2 GiB of text per
    field, and valid UTF-8 in strings. What makes it cheap:

    * a varint whose value is not needed (a long) is only measured, and the usual one-byte
      varints (union branches, lengths below 64) take one array operation and need no checks;
    * positions only move forward, so a field that runs past its record leaves its record's
      position past the record's end for good: one comparison of the final positions with the
      ends catches it, instead of one per field;
    * text of ASCII only, the common case, is settled by counting: the walk counts the bytes
      >= 0x80 outside the text (in headers, numbers; a varint's are all its bytes but the last),
      and when the whole batch holds no more than those, no string holds one. Otherwise the
      bytes >= 0x80 outside the text are cleared (intervals the walk knows) and only the
      strings still holding such a byte are decoded.
    """
    starts, ends, data = joined.starts, joined.ends, joined.data
    count = len(ends)
    if not count:
        return True
    buf = np.frombuffer(data, dtype=np.uint8)
    windows = _windows(data)
    plain_from = [starts]  # intervals [from, to) of every record that hold no text: header, numbers, lengths
    plain_to = [starts + WIRE_HEADER]
    # how many bytes >= 0x80 those intervals hold (a varint's: all its bytes but the last)
    if same_header:
        plain_high = count * sum(byte >= 0x80 for byte in data[:WIRE_HEADER])
    else:
        plain_high = _high_bytes(windows[starts] & _HIGH[WIRE_HEADER])
    texts: list[tuple[np.ndarray, np.ndarray]] = []  # (begin, end) of each string field, every row
    texts_only = True
    pos = starts + WIRE_HEADER
    try:
        for _name, kind, null_index in fields:
            field_start = pos
            if null_index >= 0:
                first = buf[pos]
                if ((first == 0) | (first == 2)).all():  # one-byte branch numbers 0 and 1
                    branch, pos = first >> 1, pos + 1
                else:
                    branch, after = _varints(buf, pos)
                    if ((branch != 0) & (branch != 1)).any():
                        return False
                    plain_high += int((after - pos).sum()) - count
                    pos = after
                present = branch != null_index
                rows: np.ndarray | None = None if present.all() else np.flatnonzero(present)
            else:
                rows = None
            at = pos if rows is None else pos[rows]
            if kind in ("int", "long"):
                first = buf[at]
                if not (first & 0x80).any():
                    after = at + 1
                elif kind == "long":
                    after = at + _varint_sizes(buf, at)
                    plain_high += int((after - at).sum()) - len(at)
                else:
                    number, after = _varints(buf, at)
                    if ((number < -(2**31)) | (number >= 2**31)).any():
                        return False
                    plain_high += int((after - at).sum()) - len(at)
                text_from = after
            elif kind in ("float", "double"):
                width = 4 if kind == "float" else 8
                plain_high += _high_bytes(windows[at] & _HIGH[width])
                after = text_from = at + width
            elif kind == "boolean":
                if (buf[at] > 1).any():
                    return False
                after = text_from = at + 1
            else:  # string / bytes: a long length, then the bytes
                first = buf[at]
                if not (first & 0x81).any():  # one byte, even: a length 0..63, nothing to check
                    begin = at + 1
                    after = begin + (first >> 1)
                else:
                    size, begin = _varints(buf, at)
                    plain_high += int((begin - at).sum()) - len(at)
                    room = ends if rows is None else ends[rows]
                    if (size < 0).any() or (size > room - begin).any() or int(size.sum()) >= 2**31:
                        return False
                    after = begin + size
                text_from = begin if kind == "string" else after
                if kind == "bytes":
                    texts_only = False  # bytes >= 0x80 in data, not text: the count cannot tell
            if rows is None:
                pos, text_to = after, text_from
            else:
                pos = pos.copy()
                text_to = pos.copy()
                pos[rows] = after
                text_to[rows] = text_from
            plain_from.append(field_start)
            plain_to.append(text_to)
            if kind == "string":
                texts.append((text_to, pos))
    except (_Malformed, IndexError, ValueError, OverflowError):
        return False
    if not np.array_equal(pos, ends):
        return False
    if not texts:
        return True
    body = buf[: int(ends[-1])]  # without the padding
    if texts_only and int(np.count_nonzero(body >= 0x80)) == plain_high:
        return True  # every byte >= 0x80 is in a header, a number or a length: the text is ASCII
    return _text_is_utf8(data, body, plain_from, plain_to, texts)


def _high_bytes(masked: np.ndarray) -> int:
    """How many bytes >= 0x80 there are in windows masked to their high bits (:data:`_HIGH`)."""
    return int(np.count_nonzero(masked.view(np.uint8)))


def _varint_sizes(buf: np.ndarray, at: np.ndarray) -> np.ndarray:
    """How many bytes each varint at ``at`` takes (the value is not needed), as ``_varints``
    would read it: at most 10 bytes, the tenth at most 1; raises _Malformed otherwise."""
    sizes = np.ones(len(at), dtype=np.int64)
    going = buf[at] >= 0x80
    for k in range(1, 10):
        if not going.any():
            return sizes
        sizes += going
        nxt = buf[at + k]
        if k == 9 and (nxt[going] > 1).any():
            raise _Malformed("varint beyond 64 bits")
        going &= nxt >= 0x80
    if going.any():
        raise _Malformed("varint longer than 10 bytes")
    return sizes


def _text_is_utf8(
    data: bytes, buf: np.ndarray, plain_from: list[np.ndarray], plain_to: list[np.ndarray],
    texts: list[tuple[np.ndarray, np.ndarray]],
) -> bool:
    """Whether every string ``data[begin:end]`` of ``texts`` is valid UTF-8, given that the
    intervals ``plain_from``..``plain_to`` and the strings tile every record."""
    high = buf >= 0x80
    if not high.any():
        return True
    starts = np.concatenate(plain_from)
    sizes = np.concatenate(plain_to) - starts
    total = int(sizes.sum())
    if total:
        offsets = np.cumsum(sizes) - sizes
        inside = np.repeat(starts - offsets, sizes) + np.arange(total, dtype=np.int64)
        high[inside] = False  # bytes >= 0x80 of numbers, lengths and headers are no text
    where = np.flatnonzero(high)
    if not len(where):
        return True
    # bytes >= 0x80 in text: decode the strings holding them, NUL-separated in one go (a NUL ends
    # any multi-byte sequence, so the whole decodes exactly when every string does)
    pieces = []
    for begin, end in texts:
        odd = np.flatnonzero(np.searchsorted(where, end) != np.searchsorted(where, begin))
        pieces += [data[b:e] for b, e in zip(begin[odd].tolist(), end[odd].tolist(), strict=True)]
    try:
        b"\0".join(pieces).decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True
