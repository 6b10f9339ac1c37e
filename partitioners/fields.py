"""One PARTITIONBY entry → a function from a record to its (escaped) directory segment.

Each :class:`~kcql.model.PartitionField` is compiled once per plan into a closure, so the per-record
work is a few attribute reads, one ``dict`` walk, one text rendering and one escape. Errors carry the
exact Lenses wording (reference §1.4) plus the record position, and are raised as
:class:`~partitioners.base.PartitionError` for the task's error policy to handle.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from partitioners.base import PartitionError, Record
from partitioners.dates import DatePattern, split_directories
from partitioners.escaping import MISSING, escape
from partitioners.render import to_text

if TYPE_CHECKING:
    import datetime as dt

    from kcql.model import Padding, PartitionField

__all__ = [
    "ABSENT",
    "KEY_NOT_PRIMITIVE",
    "KEY_NULL",
    "KEY_NULL_WHOLE",
    "NO_TIMESTAMP",
    "VALUE_NULL",
    "SegmentFn",
    "compile_field",
    "header_missing",
    "lookup_path",
]

SegmentFn = Callable[[Record], str]
DateTime = tuple[Callable[[Record], "dt.datetime"], "dt.tzinfo"]
"""A ``_date`` entry's instant (record → aware datetime) and the zone it is formatted in."""

KEY_NULL_WHOLE = "Key is null, but requested to partition by whole key"
KEY_NOT_PRIMITIVE = "Non primitive struct provided, PARTITIONBY _key requested in KCQL"
KEY_NULL = "Key is null."
VALUE_NULL = "Value is null."
NO_TIMESTAMP = "Timestamp not found in message"


def header_missing(name: str) -> str:
    """Lenses' text for an absent header."""
    return f"Header '{name}' not found in message"


_ABSENT = object()
ABSENT = _ABSENT
"""What :func:`lookup_path` returns for a path that does not exist."""


def lookup_path(value: Any, path: tuple[str, ...]) -> Any:
    """Walk ``path`` through dicts (structs, maps, JSON objects, Avro records) and lists.

    Returns ``_ABSENT`` when a step does not exist, so the caller can tell "missing" from ``None``
    (both render as ``[missing]``, like Lenses' ``Option``).
    """
    current = value
    for step in path:
        if isinstance(current, dict):
            current = current.get(step, _ABSENT)
        elif isinstance(current, list | tuple) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            return _ABSENT
        if current is _ABSENT:
            return _ABSENT
    return current


def _render(value: Any) -> str:
    if value is None or value is _ABSENT:
        return MISSING
    return escape(to_text(value))


def _whole_key(record: Record) -> str:
    key = record.key
    if key is None:
        raise PartitionError(KEY_NULL_WHOLE, record.where, record)
    if isinstance(key, dict | list | tuple):
        raise PartitionError(KEY_NOT_PRIMITIVE, record.where, record)
    return escape(to_text(key))


def _key_path(path: tuple[str, ...]) -> SegmentFn:
    def segment(record: Record) -> str:
        if record.key is None:
            raise PartitionError(KEY_NULL, record.where, record)
        return _render(lookup_path(record.key, path))

    return segment


def _value_path(path: tuple[str, ...]) -> SegmentFn:
    def segment(record: Record) -> str:
        if record.value is None:
            raise PartitionError(VALUE_NULL, record.where, record)
        return _render(lookup_path(record.value, path))

    return segment


def _header(name: str, path: tuple[str, ...]) -> SegmentFn:
    missing = header_missing(name)

    def segment(record: Record) -> str:
        found: Any = _ABSENT
        for header_name, header_value in record.headers:  # last one wins, as Connect's lastWithName
            if header_name == name:
                found = header_value
        if found is _ABSENT:
            raise PartitionError(missing, record.where, record)
        return _render(lookup_path(found, path) if path else found)

    return segment


def _topic(record: Record) -> str:
    return escape(record.topic)


def _partition(padding: Padding) -> SegmentFn:
    return lambda record: escape(padding.pad_partition(record.partition))


def _date(pattern: str, when: DateTime) -> SegmentFn:
    pieces = [DatePattern(piece) for piece in split_directories(pattern)]
    instant, zone = when

    def segment(record: Record) -> str:
        moment = instant(record)  # raises the record's PartitionError
        try:
            local = moment.astimezone(zone)
            return "/".join([escape(piece.format_moment(local), keep_equals=True) for piece in pieces])
        except (OverflowError, ValueError, OSError) as exc:
            raise PartitionError(
                f"Time {moment.isoformat()} cannot be formatted with _date pattern {pattern!r}: {exc}",
                record.where,
                record,
            ) from exc

    return segment


def compile_field(field: PartitionField, padding: Padding, when: DateTime | None = None) -> SegmentFn:
    """Compile one PARTITIONBY entry into ``record -> escaped value segment`` (no ``name=``).

    ``when`` is, for ``_date`` entries, the record's instant and the zone to format it in
    (``partitioners.instants``: the Kafka timestamp in UTC unless ``timestamp.field``/``timezone``).
    """
    kind, path = field.kind, tuple(field.path)
    if kind == "key":
        return _key_path(path) if path else _whole_key
    if kind == "value":
        return _value_path(path)
    if kind == "header":
        if not path:
            raise ValueError(f"PARTITIONBY {field.spec!r}: a header name is required")
        return _header(path[0], path[1:])
    if kind == "topic":
        return _topic
    if kind == "partition":
        return _partition(padding)
    if kind == "date":
        if len(path) != 1:
            raise ValueError(f"PARTITIONBY {field.spec!r}: exactly one _date pattern is required")
        if when is None:
            raise ValueError(f"PARTITIONBY {field.spec!r}: a _date entry needs its instant and zone")
        return _date(path[0], when)
    raise ValueError(f"PARTITIONBY {field.spec!r}: unknown partition kind {kind!r}")
