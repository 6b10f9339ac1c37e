"""``_date.<pattern>``: the record timestamp formatted with Java ``DateTimeFormatter`` letters.

Lenses formats with ``DateTimeFormatter.ofPattern(fmt)`` in the JVM default time zone; we always
use UTC so that the layout does not depend on the machine the worker runs on (a Lenses worker in
UTC, the usual container default, produces the same directories).

Supported (exactly; :func:`validate_date_pattern` rejects the rest, and the KCQL compiler uses it):

* ``u``/``y`` runs: year (``uuuu``/``yyyy`` zero-padded to 4, ``uu``/``yy`` two-digit, ``u``/``y``
  unpadded, other counts zero-padded to the count);
* ``M``/``L`` (month), ``d`` (day), ``H`` (hour 0-23), ``m`` (minute), ``s`` (second): one letter
  unpadded, two letters zero-padded;
* ``S`` runs: fraction of the second truncated to that many digits;
* text in single quotes is literal (``''`` is a quote); the separators ``- _ / . :`` and space.

An unquoted ``/`` separates directories, as it does in Lenses (``uuuu/MM/dd`` → ``2010/04/02``,
three directories). The directory structure comes from the pattern, never from record data, and
each piece is escaped on its own (:func:`split_directories`).

A pattern is compiled once per plan into a list of small functions; formatting a record then costs
one ``datetime`` conversion plus one call per pattern element.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

__all__ = ["DatePattern", "DatePatternError", "split_directories", "validate_date_pattern"]

_SEPARATORS = frozenset("-_/.: ")
_LETTERS = frozenset("uyMLdHmsS")
_MAX_RUN = {"M": 2, "L": 2, "d": 2, "H": 2, "m": 2, "s": 2, "S": 9, "u": 9, "y": 9}

Part = Callable[[dt.datetime], str] | str


class DatePatternError(ValueError):
    """An unsupported ``_date`` pattern; the message says which character and where."""


def _year(count: int) -> Callable[[dt.datetime], str]:
    if count == 2:
        return lambda t: f"{t.year % 100:02d}"

    def fmt(t: dt.datetime) -> str:
        text = str(t.year).zfill(count)
        # Java SignStyle.EXCEEDS_PAD: a year wider than a pad of 4+ gets a "+".
        return "+" + text if count >= 4 and t.year >= 10**count else text

    return fmt


def _two(attr: str, count: int) -> Callable[[dt.datetime], str]:
    if count == 1:
        return lambda t: str(getattr(t, attr))
    return lambda t: f"{getattr(t, attr):02d}"


def _fraction(count: int) -> Callable[[dt.datetime], str]:
    return lambda t: f"{t.microsecond:06d}000"[:count]


_FIELD_ATTR = {"M": "month", "L": "month", "d": "day", "H": "hour", "m": "minute", "s": "second"}


def _compile(pattern: str) -> list[Part]:
    if not pattern:
        raise DatePatternError("empty _date pattern")
    parts: list[Part] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise DatePatternError(
                        f"unterminated quote at position {i + 1} in _date pattern {pattern!r}"
                    )
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            parts.append("".join(text) if end > i + 1 else "'")
            i = end + 1
            continue
        if ch in _SEPARATORS:
            parts.append(ch)
            i += 1
            continue
        if ch not in _LETTERS:
            raise DatePatternError(
                f"unsupported character {ch!r} at position {i + 1} in _date pattern {pattern!r}; "
                "supported: u y M L d H m s S, quoted 'text' and - _ / . : space"
            )
        run = i
        while run < n and pattern[run] == ch:
            run += 1
        count = run - i
        if count > _MAX_RUN[ch]:
            raise DatePatternError(
                f"too many {ch!r} ({count}) at position {i + 1} in _date pattern {pattern!r}"
            )
        if ch in "uy":
            parts.append(_year(count))
        elif ch == "S":
            parts.append(_fraction(count))
        else:
            parts.append(_two(_FIELD_ATTR[ch], count))
        i = run
    return parts


def split_directories(pattern: str) -> list[str]:
    """Split ``pattern`` at unquoted ``/`` (a ``/`` inside quotes is literal text of one piece)."""
    pieces: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in pattern:
        if ch == "'":
            quoted = not quoted
        if ch == "/" and not quoted:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return pieces


def validate_date_pattern(pattern: str) -> None:
    """Raise :class:`DatePatternError` when ``pattern`` uses anything outside the supported set."""
    _compile(pattern)
    for piece in split_directories(pattern):
        if not piece:
            raise DatePatternError(f"empty directory between '/' in _date pattern {pattern!r}")


class DatePattern:
    """A compiled ``_date`` pattern. Build once per plan, call :meth:`format` per record."""

    __slots__ = ("_parts", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._parts = _compile(pattern)

    def format(self, timestamp_ms: int) -> str:
        """Format epoch milliseconds in UTC. Raises ``OverflowError``/``ValueError`` out of range."""
        seconds, millis = divmod(timestamp_ms, 1000)
        moment = dt.datetime.fromtimestamp(seconds, dt.UTC).replace(microsecond=millis * 1000)
        return "".join(p if isinstance(p, str) else p(moment) for p in self._parts)
