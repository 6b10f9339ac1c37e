"""Kafka Connect's stock SMTs for timestamps, topics and headers, and ``Filter``.

After Apache Kafka's ``connect/transforms``: ``TimestampConverter`` (``$Key``/``$Value``),
``RegexRouter``, ``TimestampRouter``, ``Filter``, ``DropHeaders``, ``InsertHeader``: same settings,
same results, same records refused (a record error at stage ``TRANSFORMATION`` where Kafka throws
``DataException``). Connect's ``Timestamp``/``Date``/``Time`` are the Avro logical types
``timestamp-millis``/``date``/``time-millis`` here, and their Python values are what fastavro
gives: a UTC ``datetime``, a ``date`` and a ``time``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Callable
from typing import Any, ClassVar

from sink.records.record import Schema, SinkRecord
from sink.transforms.base import Transform, TransformSettings, record_error
from sink.transforms.java_dates import JavaDateFormat, JavaDatePatternError
from sink.transforms.smt_support import (
    FieldTransform,
    bool_setting,
    field_value,
    optional_of,
    record_schema,
    split_optional,
)

__all__ = ["ROUTING_TRANSFORMS", "java_replacement"]

_PKG = "org.apache.kafka.connect.transforms."
_UTC = dt.UTC
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=_UTC)
_MS = dt.timedelta(milliseconds=1)

_TARGETS = ("string", "unix", "Date", "Time", "Timestamp")
_PRECISIONS = {"seconds": 1000, "milliseconds": 1, "microseconds": -1000, "nanoseconds": -1_000_000}
"""Milliseconds per unit (negative: units per millisecond), for Java's truncating TimeUnit conversions."""
_TARGET_SCHEMAS: dict[str, Schema] = {
    "string": "string",
    "unix": "long",
    "Date": {"type": "int", "logicalType": "date"},
    "Time": {"type": "int", "logicalType": "time-millis"},
    "Timestamp": {"type": "long", "logicalType": "timestamp-millis"},
}


def _toward_zero(value: int, divisor: int) -> int:
    """Java's long division (and TimeUnit's conversions): the quotient truncated toward zero,
    in integers (a float would lose the last digits of a nanosecond count)."""
    quotient = abs(value) // divisor
    return -quotient if value < 0 else quotient


class _Unsupported(Exception):
    """A value or schema TimestampConverter cannot read (Kafka's DataException/ConnectException)."""


class TimestampConverter(FieldTransform):
    """``TimestampConverter``: a timestamp (the whole key/value, or ``field`` of it) between
    ``string`` (``format``, SimpleDateFormat in UTC), ``unix`` (``unix.precision``), ``Date``,
    ``Time`` and ``Timestamp``; without a schema the source type is read off the value (text, a
    number, a date/time object); with one, off the schema."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.field = settings.get("field", "") or ""
        target = settings.get("target.type")
        if target is None:
            raise settings.error("target.type", "", "is required (string, unix, Date, Time or Timestamp)")
        if target not in _TARGETS:
            raise settings.error("target.type", target, f"must be one of {', '.join(_TARGETS)}")
        self.target = target
        pattern = settings.get("format", "") or ""
        self.format: JavaDateFormat | None = None
        if pattern.strip():
            try:
                self.format = JavaDateFormat(pattern)
            except JavaDatePatternError as exc:
                raise settings.error(
                    "format", pattern, f"must be a SimpleDateFormat-compatible pattern: {exc}"
                ) from None
        elif target == "string":
            raise settings.error("format", "", "is required when target.type is string")
        precision = settings.get("unix.precision", "milliseconds") or "milliseconds"
        if precision not in _PRECISIONS:
            raise settings.error("unix.precision", precision, f"must be one of {', '.join(_PRECISIONS)}")
        self.precision = _PRECISIONS[precision]
        self.replace_null = bool_setting(settings, "replace.null.with.default", True)
        settings.check_all_used()

    # -- value conversions (Kafka's TRANSLATORS) -----------------------------------------------

    def _to_millis(self, value: Any, kind: str) -> int:
        if kind == "string":
            if not isinstance(value, str):
                raise _Unsupported(
                    f"Expected string timestamp to be a String, but found {type(value).__name__}"
                )
            if self.format is None:
                raise _Unsupported(
                    "TimestampConverter requires format option to be specified when using string timestamps"
                )
            try:
                return self.format.parse(value)
            except ValueError as exc:
                pattern = self.format.pattern
                raise _Unsupported(
                    f"Could not parse timestamp: value ({value}) does not match pattern ({pattern}): {exc}"
                ) from None
        if kind == "unix":
            if isinstance(value, bool) or not isinstance(value, int):
                raise _Unsupported(f"Expected Unix timestamp to be a Long, but found {type(value).__name__}")
            unit = self.precision
            return value * unit if unit > 0 else _toward_zero(value, -unit)
        if isinstance(value, dt.datetime):
            moment = value if value.tzinfo is not None else value.replace(tzinfo=_UTC)
            return (moment - _EPOCH) // _MS
        if isinstance(value, dt.date):
            return (dt.datetime(value.year, value.month, value.day, tzinfo=_UTC) - _EPOCH) // _MS
        if isinstance(value, dt.time):
            return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
        raise _Unsupported(f"Expected {kind} to be a java.util.Date, but found {type(value).__name__}")

    def _from_millis(self, millis: int) -> Any:
        target = self.target
        if target == "string":
            assert self.format is not None  # noqa: S101 - required by __init__
            return self.format.format(millis)
        if target == "unix":
            unit = self.precision
            return _toward_zero(millis, unit) if unit > 0 else millis * -unit
        moment = _EPOCH + dt.timedelta(milliseconds=millis)
        if target == "Date":
            return moment.date()
        if target == "Time":
            return moment.time()
        return moment

    def _convert(self, record: SinkRecord, value: Any, kind: str | None) -> Any:
        if value is None:
            return None
        if kind is None:  # schemaless: Kafka's inferTimestampType
            if isinstance(value, (dt.datetime, dt.date, dt.time)):
                kind = "Timestamp"
            elif isinstance(value, int) and not isinstance(value, bool):
                kind = "unix"
            elif isinstance(value, str):
                kind = "string"
            else:
                raise record_error(
                    record,
                    self.name,
                    f"TimestampConverter does not support {type(value).__name__} objects as timestamps",
                )
        try:
            return self._from_millis(self._to_millis(value, kind))
        except _Unsupported as exc:
            raise record_error(record, self.name, str(exc)) from None
        except (OverflowError, ValueError) as exc:
            raise record_error(record, self.name, f"the timestamp is out of range: {exc}") from None

    # -- records --------------------------------------------------------------------------------

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        schema = self.operating_schema(record)
        value = self.operating_value(record)
        if schema is None:
            if value is None or not self.field:
                return self.new_record(record, None, self._convert(record, value, None))
            copied = dict(self.require_map(record, value, "converting timestamp formats"))
            copied[self.field] = self._convert(record, copied.get(self.field), None)
            return self.new_record(record, None, copied)
        if not self.field:
            _, optional = split_optional(schema)
            kind = self._kind(record, schema)
            target = _TARGET_SCHEMAS[self.target]
            return self.new_record(
                record, optional_of(target) if optional else target, self._convert(record, value, kind)
            )
        rec = record_schema(schema)
        if rec is None or (value is not None and not isinstance(value, dict)):
            found = "null" if value is None else type(value).__name__
            raise record_error(
                record,
                self.name,
                f"Only Struct objects supported for [converting timestamp formats], found: {found}",
            )
        fields = []
        updated: dict[str, Any] | None = None if value is None else {}
        for field in rec["fields"]:
            if field["name"] == self.field:
                _, optional = split_optional(field["type"])
                target = _TARGET_SCHEMAS[self.target]
                new_field = {"name": field["name"], "type": optional_of(target) if optional else target}
                if optional:
                    new_field["default"] = None
                fields.append(new_field)
                if updated is not None:
                    current = field_value(value, field, self.replace_null)  # type: ignore[arg-type]
                    updated[field["name"]] = self._convert(record, current, self._kind(record, field["type"]))
            else:
                fields.append(field)
                if updated is not None:
                    updated[field["name"]] = field_value(value, field, self.replace_null)  # type: ignore[arg-type]
        new_rec = {k: v for k, v in rec.items() if k != "fields"}
        new_rec["fields"] = fields
        _, optional = split_optional(schema)
        return self.new_record(record, optional_of(new_rec) if optional else new_rec, updated)

    def _kind(self, record: SinkRecord, schema: Schema) -> str:
        """Kafka's ``timestampTypeFromSchema``."""
        inner, _ = split_optional(schema)
        logical = inner.get("logicalType") if isinstance(inner, dict) else None
        base = inner.get("type") if isinstance(inner, dict) else inner
        if logical == "timestamp-millis":
            return "Timestamp"
        if logical == "date":
            return "Date"
        if logical == "time-millis":
            return "Time"
        if base == "string":
            return "string"
        if base == "long" and logical is None:
            return "unix"
        raise record_error(
            record, self.name, f"Schema {inner} does not correspond to a known timestamp type format"
        )


class TimestampConverterKey(TimestampConverter):
    on_key: ClassVar[bool] = True


class TimestampConverterValue(TimestampConverter):
    on_key: ClassVar[bool] = False


def java_replacement(replacement: str) -> Callable[[re.Match[str]], str]:
    """Java's ``Matcher.replaceFirst`` replacement string: ``$n`` and ``${name}`` are groups, ``\\x``
    is ``x``. Raises ``ValueError`` for a dangling ``$`` or ``\\`` (as Java does when it replaces)."""
    parts: list[str | int] = []
    i, n = 0, len(replacement)
    text: list[str] = []
    while i < n:
        c = replacement[i]
        if c == "\\":
            if i + 1 >= n:
                raise ValueError("character to be escaped is missing")
            text.append(replacement[i + 1])
            i += 2
        elif c == "$":
            if i + 1 >= n:
                raise ValueError("Illegal group reference: group index is missing")
            if replacement[i + 1] == "{":
                end = replacement.find("}", i + 2)
                if end < 0:
                    raise ValueError("named capturing group is missing trailing '}'")
                group: str | int = replacement[i + 2 : end]
                i = end + 1
            elif replacement[i + 1].isdigit():
                group, i = int(replacement[i + 1]), i + 2
            else:
                raise ValueError("Illegal group reference")
            parts.append("".join(text))
            text = []
            parts.append(group)  # type: ignore[arg-type]
        else:
            text.append(c)
            i += 1
    parts.append("".join(text))

    def expand(match: re.Match[str]) -> str:
        out = []
        for index, part in enumerate(parts):
            if index % 2:
                out.append(match.group(part) or "")
            else:
                out.append(str(part))
        return "".join(out)

    return expand


class RegexRouter(Transform):
    """``RegexRouter``: a topic that ``regex`` matches whole becomes ``replacement`` (Java's
    ``replaceFirst``: ``$1``, ``${name}``); other topics pass unchanged."""

    keeps_topic = False

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        pattern = settings.require("regex")
        try:
            self.regex = re.compile(pattern)
        except re.error as exc:
            raise settings.error("regex", pattern, f"is not a valid regular expression: {exc}") from None
        replacement = settings.get("replacement")
        if replacement is None:
            raise settings.error("replacement", "", "is required")
        try:
            self.expand = java_replacement(replacement)
        except ValueError as exc:
            raise settings.error("replacement", replacement, str(exc)) from None
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        match = self.regex.fullmatch(record.topic)
        if match is None:
            return record
        try:
            topic = self.expand(match)
        except (IndexError, re.error) as exc:
            raise record_error(record, self.name, f"replacement failed: {exc}") from None
        return dataclasses.replace(record, topic=topic)


class TimestampRouter(Transform):
    """``TimestampRouter``: the topic becomes ``topic.format`` with ``${topic}`` and ``${timestamp}``
    (the record timestamp in ``timestamp.format``, SimpleDateFormat in UTC) replaced."""

    keeps_topic = False

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.topic_format = settings.get("topic.format", "${topic}-${timestamp}") or ""
        pattern = settings.get("timestamp.format", "yyyyMMdd") or ""
        try:
            self.format = JavaDateFormat(pattern)
        except JavaDatePatternError as exc:
            raise settings.error("timestamp.format", pattern, str(exc)) from None
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        if record.timestamp is None:
            raise record_error(record, self.name, "Timestamp missing on record")
        stamp = self.format.format(record.timestamp)
        topic = self.topic_format.replace("${topic}", record.topic).replace("${timestamp}", stamp)
        return dataclasses.replace(record, topic=topic)


class Filter(Transform):
    """``Filter``: drops every record it is applied to (limit it with a predicate)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        return None


class DropHeaders(Transform):
    """``DropHeaders``: removes every header named in ``headers``."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.names = frozenset(settings.get_list("headers"))
        if not self.names:
            raise settings.error(
                "headers", settings.values.get("headers", ""), "must list at least one header"
            )
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        if not any(name in self.names for name, _ in record.headers):
            return record
        return dataclasses.replace(record, headers=tuple(h for h in record.headers if h[0] not in self.names))


_INTEGER = re.compile(r"[+-]?\d+")
_DECIMAL = re.compile(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_ISO_TIME = re.compile(r"\d{2}:\d{2}:\d{2}\.\d{3}Z")
_ISO_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z")


def parse_literal(text: str | None) -> Any:
    """Kafka's ``Values.parseString`` for the literals InsertHeader takes: ``true``/``false``
    (booleans), whole numbers (ints), decimals (floats), ``yyyy-MM-dd`` (a date),
    ``HH:mm:ss.SSS'Z'`` (a time) and ``yyyy-MM-dd'T'HH:mm:ss.SSS'Z'`` (a UTC timestamp), with
    ``\\:`` read as ``:``; anything else is the text itself. (Kafka also reads ``[..]`` arrays
    and ``{..}`` maps; here those stay text.)"""
    if text is None:
        return None
    stripped = text.strip()
    if stripped.lower() in ("true", "false"):
        return stripped.lower() == "true"
    if _INTEGER.fullmatch(stripped):
        return int(stripped)
    if _DECIMAL.fullmatch(stripped):
        return float(stripped)
    plain = stripped.replace("\\:", ":")
    if _ISO_DATE.fullmatch(plain):
        return dt.date.fromisoformat(plain)
    if _ISO_TIME.fullmatch(plain):
        return dt.time.fromisoformat(plain[:-1])
    if _ISO_TIMESTAMP.fullmatch(plain):
        return dt.datetime.fromisoformat(plain[:-1]).replace(tzinfo=_UTC)
    return text


class InsertHeader(Transform):
    """``InsertHeader``: adds header ``header`` with ``value.literal`` parsed as Kafka's
    ``Values.parseString`` reads it (see :func:`parse_literal`)."""

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        self.header = settings.require("header")
        self.value = parse_literal(settings.get("value.literal"))
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        return dataclasses.replace(record, headers=(*record.headers, (self.header, self.value)))


ROUTING_TRANSFORMS: dict[str, type[Transform]] = {
    _PKG + "TimestampConverter$Key": TimestampConverterKey,
    _PKG + "TimestampConverter$Value": TimestampConverterValue,
    _PKG + "RegexRouter": RegexRouter,
    _PKG + "TimestampRouter": TimestampRouter,
    _PKG + "Filter": Filter,
    _PKG + "DropHeaders": DropHeaders,
    _PKG + "InsertHeader": InsertHeader,
}
"""Connect class name → transform class."""
