"""``_date.<pattern>``: the record timestamp formatted with Java ``DateTimeFormatter`` letters.

Lenses formats with ``DateTimeFormatter.ofPattern(fmt)`` in the JVM default time zone; we always
use UTC so that the layout does not depend on the machine the worker runs on (a Lenses worker in
UTC, the usual container default, produces the same directories).

Supported (exactly; the set is defined in :mod:`kcql.dates`, whose :func:`validate_date_pattern`
the KCQL compiler uses and which this module re-exports):

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

from kcql.dates import DateField, DatePatternError, split_directories, tokenize, validate_date_pattern

__all__ = ["DatePattern", "DatePatternError", "split_directories", "validate_date_pattern"]

Part = Callable[[dt.datetime], str] | str


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


def _part(token: DateField | str) -> Part:
    if isinstance(token, str):
        return token
    if token.letter in "uy":
        return _year(token.length)
    if token.letter == "S":
        return _fraction(token.length)
    return _two(_FIELD_ATTR[token.letter], token.length)


def _compile(pattern: str) -> list[Part]:
    # kcql.dates owns which patterns exist (the compiler rejects the rest); this module only formats
    return [_part(token) for token in tokenize(pattern)]


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

    def format_moment(self, moment: dt.datetime) -> str:
        """Format a datetime as it stands (its own zone): for ``timezone`` and field instants."""
        return "".join(p if isinstance(p, str) else p(moment) for p in self._parts)
