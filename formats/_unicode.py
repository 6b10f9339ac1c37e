"""Text no file can hold: a lone UTF-16 surrogate, which UTF-8 has no encoding for.

``json.loads`` turns ``"\\ud800"`` into a Python string with a lone surrogate (and a StringConverter
with ``surrogatepass`` would too). No format can store it as text, so every format refuses such a
record when it is taken, as a record error of its own, rather than failing later when a whole
file, or the rows before it, are encoded.
"""

from __future__ import annotations

from typing import Any

import msgspec

from formats.base import Record, RecordFormatError

__all__ = ["lone_surrogate", "surrogate_error", "text_surrogate", "value_surrogate"]

_encode = msgspec.json.encode
_ESCAPED = b"\\u"
"""A ``\\uXXXX`` escape in JSON text, which may decode to a lone UTF-16 surrogate."""
_SURROGATE_LEAD = b"\xed"
"""The first byte of a UTF-8 encoded surrogate, which ``json.loads`` decodes with surrogatepass."""


def text_surrogate(text: str) -> str | None:
    """``text`` when it cannot be encoded as UTF-8, else None (ASCII is checked in C)."""
    if text.isascii():
        return None
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return text
    return None


def lone_surrogate(value: Any) -> str | None:
    """The first text in ``value`` (dict keys included, nested) that is not valid Unicode, or None.

    A container is first encoded by msgspec, in C, which refuses any lone surrogate anywhere in
    it (~0.15 us for a small record, against ~0.6 us for the walk); only when that fails, for
    that or any other reason (a type msgspec does not encode), is it walked to find the text.
    """
    if type(value) is str:
        return text_surrogate(value)
    if isinstance(value, (dict, list, tuple)):
        try:
            _encode(value)
        except Exception:  # noqa: BLE001 - a surrogate, or a type msgspec refuses: the walk decides
            return _walk(value)
        return None
    return None


def _walk(value: Any) -> str | None:
    if type(value) is str:
        return text_surrogate(value)
    if isinstance(value, dict):
        for key, item in value.items():
            bad = _walk(key) or _walk(item)
            if bad is not None:
                return bad
    elif isinstance(value, (list, tuple)):
        for item in value:
            bad = _walk(item)
            if bad is not None:
                return bad
    return None


def value_surrogate(record: Record) -> str | None:
    """:func:`lone_surrogate` of the record's value; a value that arrived as JSON text is walked
    only when its text could hold one (an escape or an encoded surrogate: a C-level search)."""
    raw = record.raw_value
    if raw is not None and _ESCAPED not in raw and _SURROGATE_LEAD not in raw:
        return None
    return lone_surrogate(record.value)


def surrogate_error(record: Record, index: int, part: str, text: str, format_name: str) -> RecordFormatError:
    """The record error for ``text`` found in the record's ``part`` (``value``, ``key``)."""
    return RecordFormatError(
        f"the record {part} holds text with a lone UTF-16 surrogate ({text!r}), which is not valid "
        f"Unicode and cannot be written as {format_name}",
        record,
        index,
    )
