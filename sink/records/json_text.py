"""The cheap form of schemaless JSON values: one joined text of one-line objects, checked in bulk.

Most topics a sink reads carry one-line JSON objects, and a JSON file without the envelope is
those same lines. Holding a run of values as one ``\\n``-joined text lets the JSON format write
it as it is and the PARQUET format parse it with Arrow in one call, with no Python work per
record. :func:`json_runs` finds the runs whose every value is framed as a one-line object
(``{`` ... ``}``, no line break or carriage return, not a tombstone) with C-level joins and numpy
scans, and leaves the others (tombstones, scalars, multi-line text, non-JSON payloads) to the
per-record path, one by one, so one odd record costs the batch nothing.

Framing is not validity. :func:`valid_lines` checks that every line is a JSON document the JSON
converter would accept, in one msgspec call over the whole run (a tenth of a microsecond per
record): the values are parsed as one JSON array into raw slices, and each slice must be exactly
one value's bytes (so no value can hide two documents, or half of one), and the text must be
UTF-8. Where msgspec is more lenient than ``json.loads`` (integers longer than Python converts,
nesting deeper than its recursion limit) the run is refused too; where it is stricter (NaN, lone
surrogates) likewise. A refused run only costs speed: its records are then converted one by one,
exactly as the converter decides, and the converter reports the bad record to the error policy.

Both steps were about a microsecond per record on the consuming thread together.
``sink/records/_json_text.c`` does each in one C pass when it was built (:data:`NATIVE`): the
join with its framing check, and a strict JSON check of the joined lines that refuses whatever
msgspec or ``json.loads`` would (see there) (:func:`valid_text`). The Python versions here
(``*_py``) run otherwise, and the tests hold the C ones to them. (Checking on the helper thread
instead, without the GIL, was measured slower: the hand-off and the held batches cost more.)
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from types import ModuleType

import msgspec
import numpy as np

__all__ = ["NATIVE", "JsonRun", "json_runs", "valid_lines", "valid_text"]


def _load() -> ModuleType | None:
    try:
        from sink.records import _json_text
    except ImportError:
        return None
    return _json_text


_native = _load()
NATIVE = _native is not None
"""Whether ``sink/records/_json_text.c`` was built and joins and checks the lines."""

_NL, _OPEN, _CLOSE = ord("\n"), ord("{"), ord("}")
_RAW_ARRAY = msgspec.json.Decoder(list[msgspec.Raw])
_INT_DIGITS = sys.get_int_max_str_digits() or 4300
_LONG_DIGITS = re.compile(rb"[0-9]{%d}" % (_INT_DIGITS + 1))
"""A run of digits longer than Python converts to an int (only values that long can hold one)."""

JsonRun = tuple[int, int, bytes | None]
"""``(start, stop, text)``: values ``start`` to ``stop`` of the list given to :func:`json_runs`,
and their joined text, or ``None`` when they go record by record."""


def _framed(value: bytes | None) -> bool:
    return (
        bool(value) and value[0] == _OPEN and value[-1] == _CLOSE  # type: ignore[index]
        and b"\n" not in value and b"\r" not in value  # type: ignore[operator]
    )


def _joined(values: Sequence[bytes | None]) -> bytes | None:
    """The values joined by newlines when every one is a framed one-line object, else ``None``."""
    if _native is not None and type(values) is list:
        joined: bytes | None = _native.join(values)
        return joined
    return _joined_py(values)


def _joined_py(values: Sequence[bytes | None]) -> bytes | None:
    try:
        data = b"\n".join(values)  # type: ignore[arg-type]  # a tombstone (None) raises TypeError
    except TypeError:
        return None
    if data[:1] != b"{" or data[-1:] != b"}" or b"\r" in data:
        return None
    # every value one line: exactly len-1 newlines (the separators), each between a "}" and a "{";
    # numpy finds them ~5x faster than bytes.count, which scans byte by byte
    text = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(text == _NL)
    if (
        len(newlines) != len(values) - 1
        or not (text[newlines - 1] == _CLOSE).all()
        or not (text[newlines + 1] == _OPEN).all()
    ):
        return None
    return data


def json_runs(values: Sequence[bytes | None]) -> list[JsonRun]:
    """Split ``values`` into maximal runs that have the joined form and runs that do not.

    The common case, every value framed, costs one join and two numpy scans. Otherwise each
    value is looked at once in Python to find the odd ones.
    """
    if not values:
        return []
    data = _joined(values)
    if data is not None:
        return [(0, len(values), data)]
    runs: list[JsonRun] = []
    start = 0
    framed = _framed(values[0])
    for index in range(1, len(values) + 1):
        now = index < len(values) and _framed(values[index])
        if index == len(values) or now != framed:
            part = values[start:index]
            runs.append((start, index, b"\n".join(part) if framed else None))  # type: ignore[arg-type]
            start, framed = index, now
    return runs


def valid_lines(values: Sequence[bytes], data: bytes) -> bool:
    """Whether every one of ``values`` (framed, joined as ``data``) is one valid JSON document."""
    if _native is not None:
        return valid_text(data, len(values))
    return valid_lines_py(values, data)


def valid_text(data: bytes, count: int) -> bool:
    """Whether ``data`` (framed values joined by newlines) is ``count`` lines, each one valid
    JSON document. Needs :data:`NATIVE`."""
    assert _native is not None  # noqa: S101 - callers check NATIVE
    ok: bool = _native.valid(data, count, _MAX_DIGITS)
    return ok


_MAX_DIGITS = sys.get_int_max_str_digits()
"""Longest integer ``json.loads`` converts (0: no limit), for the C check."""


def valid_lines_py(values: Sequence[bytes], data: bytes) -> bool:
    """:func:`valid_lines` with msgspec: the values parsed as one array (``[v0,v1,...]``) into
    raw slices; a value with two documents, or half of one, gives a slice count or a slice
    length that differs from the values'."""
    parts = list(values)
    parts[0] = b"[" + parts[0]
    parts[-1] = parts[-1] + b"]"
    try:
        raws = _RAW_ARRAY.decode(b",".join(parts))
    except (msgspec.DecodeError, RecursionError):  # nested too deep: json.loads decides
        return False
    lengths = list(map(len, values))
    if len(raws) != len(values) or list(map(len, raws)) != lengths:
        return False
    if max(lengths) > _INT_DIGITS and any(map(_LONG_DIGITS.search, values)):
        return False  # json.loads refuses integers this long (sys.get_int_max_str_digits)
    if data.isascii():
        return True
    try:
        data.decode("utf-8")  # json.loads refuses invalid UTF-8; msgspec's raw slices do not look
    except UnicodeDecodeError:
        return False
    return True
