"""Python values -> JSON text, the way Kafka's JsonConverter (schemas.enable=false) writes them.

Lenses writes JSON with ``decimal.format=NUMERIC``: decimals are JSON numbers, never strings, and
logical types become plain numbers (timestamps as epoch milliseconds, dates as epoch days, times as
milliseconds of the day). Byte arrays are base64 text, as Jackson writes them.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

__all__ = ["dumps", "to_json_compatible"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
_MS = timedelta(milliseconds=1)

# json cannot emit a Decimal as a number through ``default`` (it only accepts JSON-able return
# values), so decimals are emitted as a marked string and the marks are stripped afterwards. The
# mark starts with NUL, which json escapes as \u0000, so only a user string that is exactly
# "\x00kcqldec:<number>\x00" could be mistaken for one.
_DEC_MARK = "\x00kcqldec:"
_DEC_MARK_ESCAPED = "\\u0000kcqldec:"
_DEC_PATTERN = re.compile(r'"\\u0000kcqldec:([-+0-9.eEinfaINFA]+)\\u0000"')


def _default(obj: Any) -> Any:
    """Encode the non-JSON types the converters produce."""
    if isinstance(obj, Decimal):
        if obj.is_finite():
            return f"{_DEC_MARK}{obj}\x00"
        return float(obj)
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(obj).decode("ascii")
    if isinstance(obj, datetime):
        if obj.tzinfo is None:  # naive datetimes from converters are UTC by contract
            obj = obj.replace(tzinfo=UTC)
        return (obj - _EPOCH) // _MS
    if isinstance(obj, date):
        return (obj - _EPOCH_DATE).days
    if isinstance(obj, time):
        return ((obj.hour * 60 + obj.minute) * 60 + obj.second) * 1000 + obj.microsecond // 1000
    if isinstance(obj, uuid.UUID):
        return str(obj)
    if isinstance(obj, set | frozenset):
        return list(obj)
    raise TypeError(f"a value of type {type(obj).__name__} cannot be written as JSON")


_encoder = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), default=_default)


def dumps(value: Any) -> str:
    """One compact JSON document for ``value`` (no newline inside: json escapes them in strings).

    Raises:
        TypeError: ``value`` holds something with no JSON representation.
        ValueError: ``value`` is circular.
    """
    text = _encoder.encode(value)
    if _DEC_MARK_ESCAPED in text:
        text = _DEC_PATTERN.sub(r"\1", text)
    return text


def to_json_compatible(value: Any) -> Any:
    """``value`` with every non-JSON leaf converted as :func:`dumps` would (for tests and CSV cells)."""
    return json.loads(dumps(value))
