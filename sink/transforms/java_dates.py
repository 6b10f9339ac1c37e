"""Java's ``SimpleDateFormat``, in UTC, as TimestampConverter and TimestampRouter use it.

Kafka builds ``new SimpleDateFormat(pattern)`` with the UTC zone and formats/parses
``java.util.Date`` (epoch milliseconds). The letters handled here are the ones such patterns use:
``y`` year, ``M`` month (``MMM`` short name, ``MMMM`` full), ``d`` day, ``D`` day of year, ``H``
hour 0-23, ``k`` 1-24, ``h`` 1-12, ``K`` 0-11, ``m``, ``s``, ``S`` milliseconds, ``a`` AM/PM, ``E``
day name, ``z``/``Z``/``X`` zone (always UTC when formatting; any offset when parsing), quoted
text and every non-letter. Another letter is an error, as Java's constructor throws for an
illegal letter (``G``, ``w``, ``W``, ``F``, ``u``, ``L``... are not supported here and say so).
Parsing is strict: the whole text must match, numbers of a run of two or more letters have that
many digits (``yyyyMMdd`` parses), as Java does for abutting fields.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable

__all__ = ["JavaDateFormat", "JavaDatePatternError"]

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_DAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_LETTERS = frozenset("yMdDHkhKmsSaEzZX")


class JavaDatePatternError(ValueError):
    """A pattern with a letter this formatter does not handle (the message names it)."""


def _tokens(pattern: str) -> list[tuple[str, int] | str]:
    out: list[tuple[str, int] | str] = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if c == "'":
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise JavaDatePatternError(f"Unterminated quote in {pattern!r}")
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            out.append("'" if end == i + 1 else "".join(text))
            i = end + 1
        elif c.isascii() and c.isalpha():
            if c not in _LETTERS:
                raise JavaDatePatternError(f"Illegal pattern character '{c}' in {pattern!r}")
            j = i
            while j < n and pattern[j] == c:
                j += 1
            out.append((c, j - i))
            i = j
        else:
            out.append(c)
            i += 1
    return out


def _pad(value: int, width: int) -> str:
    return f"{value:0{width}d}"


class JavaDateFormat:
    """A compiled pattern: :meth:`format` epoch milliseconds, :meth:`parse` text back to them."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._tokens = _tokens(pattern)
        self._regex, self._fields = self._parser()

    def format(self, millis: int) -> str:
        when = _EPOCH + dt.timedelta(milliseconds=millis)
        return "".join(t if isinstance(t, str) else self._field(when, *t) for t in self._tokens)

    @staticmethod
    def _field(when: dt.datetime, letter: str, count: int) -> str:
        if letter == "y":
            return _pad(when.year % 100, 2) if count == 2 else _pad(when.year, count)
        if letter == "M":
            if count >= 4:
                return _MONTHS[when.month - 1]
            if count == 3:
                return _MONTHS[when.month - 1][:3]
            return _pad(when.month, count)
        simple: dict[str, Callable[[dt.datetime], int]] = {
            "d": lambda w: w.day,
            "D": lambda w: w.timetuple().tm_yday,
            "H": lambda w: w.hour,
            "k": lambda w: w.hour or 24,
            "h": lambda w: (w.hour % 12) or 12,
            "K": lambda w: w.hour % 12,
            "m": lambda w: w.minute,
            "s": lambda w: w.second,
            "S": lambda w: w.microsecond // 1000,
        }
        if letter in simple:
            return _pad(simple[letter](when), count)
        if letter == "a":
            return "AM" if when.hour < 12 else "PM"
        if letter == "E":
            name = _DAYS[when.weekday()]
            return name if count >= 4 else name[:3]
        if letter == "z":
            return "UTC" if count < 4 else "Coordinated Universal Time"
        if letter == "Z":
            return "+0000"
        return "Z"  # X: ISO 8601 zone, UTC

    def _parser(self) -> tuple[re.Pattern[str], list[tuple[str, int]]]:
        parts: list[str] = []
        fields: list[tuple[str, int]] = []
        for token in self._tokens:
            if isinstance(token, str):
                parts.append(re.escape(token))
                continue
            letter, count = token
            fields.append(token)
            if letter == "M" and count >= 3:
                names = _MONTHS if count >= 4 else tuple(m[:3] for m in _MONTHS)
                parts.append("(" + "|".join(names) + ")")
            elif letter == "E":
                names = _DAYS if count >= 4 else tuple(d[:3] for d in _DAYS)
                parts.append("(" + "|".join(names) + ")")
            elif letter == "a":
                parts.append("(AM|PM|am|pm)")
            elif letter in "zZX":
                parts.append(r"(Z|UTC|GMT|[+-]\d{2}(?::?\d{2})?|GMT[+-]\d{2}:?\d{2})")
            elif count >= 2:
                parts.append(rf"(\d{{{count}}})")
            else:
                parts.append(r"(\d+)")
        return re.compile("".join(parts)), fields

    def parse(self, text: str) -> int:
        """Epoch milliseconds of ``text``.

        Raises:
            ValueError: the text does not match the pattern (Java's ``ParseException``).
        """
        match = self._regex.fullmatch(text)
        if match is None:
            raise ValueError(f"Unparseable date: {text!r} (format {self.pattern!r})")
        year, month, day, hour, minute, second, millis = 1970, 1, 1, 0, 0, 0, 0
        pm: bool | None = None
        twelve = False
        offset = dt.timedelta(0)
        yday: int | None = None
        for (letter, count), raw in zip(self._fields, match.groups(), strict=True):
            if letter == "y":
                year = int(raw)
                if count == 2:
                    year += 2000 if year < 80 else 1900  # SimpleDateFormat's 80-20 rule, roughly
            elif letter == "M":
                month = int(raw) if count < 3 else [m[: len(raw)] for m in _MONTHS].index(raw) + 1
            elif letter == "d":
                day = int(raw)
            elif letter == "D":
                yday = int(raw)
            elif letter in "Hk":
                hour = int(raw) % 24
            elif letter in "hK":
                hour, twelve = int(raw) % 12, True
            elif letter == "m":
                minute = int(raw)
            elif letter == "s":
                second = int(raw)
            elif letter == "S":
                millis = int(raw)
            elif letter == "a":
                pm = raw.upper() == "PM"
            elif letter in "zZX":
                offset = _offset(raw)
        if twelve and pm:
            hour += 12
        try:
            base = dt.datetime(year, month, day, hour, minute, second, tzinfo=_UTC)
        except ValueError as exc:
            raise ValueError(f"Unparseable date: {text!r} (format {self.pattern!r}): {exc}") from None
        if yday is not None:
            base = base.replace(month=1, day=1) + dt.timedelta(days=yday - 1)
        moment = base + dt.timedelta(milliseconds=millis) - offset
        return (moment - _EPOCH) // dt.timedelta(milliseconds=1)


def _offset(raw: str) -> dt.timedelta:
    text = raw.removeprefix("GMT")
    if text in ("Z", "UTC", ""):
        return dt.timedelta(0)
    sign = -1 if text[0] == "-" else 1
    digits = text[1:].replace(":", "")
    hours, minutes = int(digits[:2]), int(digits[2:4] or 0)
    return sign * dt.timedelta(hours=hours, minutes=minutes)
