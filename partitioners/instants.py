"""The instant a ``_date`` entry formats: the Kafka timestamp, or a field of the record.

``PROPERTIES('timestamp.field'='_value.created')`` (see :class:`kcql.model.DateSource`) takes it
from a key, value or header field instead, which may hold epoch time (a number counted in
``timestamp.unit``), text (ISO-8601, or ``timestamp.format``), or a date/time value (what Avro's
``timestamp-millis``/``date`` logical types decode to). Text and values without an offset are
local times in ``timezone``. A record whose field is missing, null or unreadable cannot be placed:
a :class:`~partitioners.base.PartitionError` naming the record, the field and why.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Callable
from typing import Any

from kcql.dates import DateField, tokenize
from kcql.model import DateSource
from partitioners.base import PartitionError, Record
from partitioners.fields import ABSENT, NO_TIMESTAMP, lookup_path

__all__ = ["InstantFn", "instant_of", "zone_of"]

InstantFn = Callable[[Record], dt.datetime]
"""Record → the aware datetime its ``_date`` entries format."""

_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_PER_SECOND = {"seconds": 1, "milliseconds": 1000, "microseconds": 10**6, "nanoseconds": 10**9}


def zone_of(source: DateSource) -> dt.tzinfo:
    """The zone ``_date`` formats in."""
    return _UTC if source.zone == "UTC" else zoneinfo.ZoneInfo(source.zone)


def instant_of(source: DateSource) -> InstantFn:
    """The function giving a record's instant (for the Kafka timestamp: epoch ms, read in UTC)."""
    field = source.field
    if field is None:

        def record_time(record: Record) -> dt.datetime:
            if record.timestamp is None:
                raise PartitionError(NO_TIMESTAMP, record.where, record)
            try:
                return _EPOCH + dt.timedelta(milliseconds=record.timestamp)
            except OverflowError as exc:
                why = f"Timestamp {record.timestamp} cannot be formatted as a _date: {exc}"
                raise PartitionError(why, record.where, record) from None

        return record_time
    zone = zone_of(source)
    per_second = _PER_SECOND[source.unit]
    parse_text = _pattern_parser(source.format, zone) if source.format else _iso_parser(zone)
    kind, path, spec = field.kind, tuple(field.path), field.spec

    def field_time(record: Record) -> dt.datetime:
        if kind == "header":
            found: Any = ABSENT
            for name, value in record.headers:  # the last one wins, as Connect's lastWithName
                if name == path[0]:
                    found = value
            value = found if found is ABSENT or len(path) == 1 else lookup_path(found, path[1:])
        else:
            root = record.key if kind == "key" else record.value
            value = root if not path else (ABSENT if root is None else lookup_path(root, path))
        try:
            return _instant(value, per_second, zone, parse_text)
        except (ValueError, OverflowError, OSError) as exc:
            raise PartitionError(
                f"_date cannot take its time from {spec}: {exc}", record.where, record
            ) from None

    return field_time


def _instant(
    value: Any, per_second: int, zone: dt.tzinfo, parse_text: Callable[[str], dt.datetime]
) -> dt.datetime:
    if value is None or value is ABSENT:
        raise ValueError("the field is missing or null")
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is a boolean, not a time")  # noqa: TRY004 - one error type for the caller
    if isinstance(value, int):
        seconds, rest = divmod(value, per_second)
        return _EPOCH + dt.timedelta(seconds=seconds, microseconds=rest * 10**6 // per_second)
    if isinstance(value, float):
        return _EPOCH + dt.timedelta(seconds=value / per_second)
    if isinstance(value, str):
        return parse_text(value)
    if isinstance(value, dt.datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=zone)
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day, tzinfo=zone)
    raise ValueError(f"a {type(value).__name__} is not a time")


def _iso_parser(zone: dt.tzinfo) -> Callable[[str], dt.datetime]:
    def parse(text: str) -> dt.datetime:
        try:
            moment = dt.datetime.fromisoformat(text.strip())
        except ValueError:
            raise ValueError(f"{text!r} is not ISO-8601 date-time text (or set timestamp.format)") from None
        return moment if moment.tzinfo is not None else moment.replace(tzinfo=zone)

    return parse


_ATTRS = {
    "u": "year",
    "y": "year",
    "M": "month",
    "L": "month",
    "d": "day",
    "H": "hour",
    "m": "minute",
    "s": "second",
}


def _pattern_parser(pattern: str, zone: dt.tzinfo) -> Callable[[str], dt.datetime]:
    """Text in ``pattern`` (the ``_date`` letters), read as a local time in ``zone``."""
    parts: list[str] = []
    letters: list[DateField] = []
    for token in tokenize(pattern):
        if isinstance(token, str):
            parts.append(re.escape(token))
            continue
        letters.append(token)
        if token.letter == "S" or (
            token.length >= 2 and not (token.letter in "uy" and token.length != 2 and token.length != 4)
        ):
            parts.append(rf"(\d{{{token.length}}})")
        else:
            parts.append(r"(\d+)")
    regex = re.compile("".join(parts))

    def parse(text: str) -> dt.datetime:
        match = regex.fullmatch(text.strip())
        if match is None:
            raise ValueError(f"{text!r} does not match timestamp.format {pattern!r}")
        values = {"year": 1970, "month": 1, "day": 1, "hour": 0, "minute": 0, "second": 0, "microsecond": 0}
        for token, raw in zip(letters, match.groups(), strict=True):
            if token.letter == "S":
                values["microsecond"] = int(raw.ljust(6, "0")[:6])
            elif token.letter in "uy" and token.length == 2:
                values["year"] = 2000 + int(raw)  # Java's reduced year: 2000-2099
            else:
                values[_ATTRS[token.letter]] = int(raw)
        return dt.datetime(**values, tzinfo=zone)

    return parse
