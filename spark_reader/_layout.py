"""Adapter to the layout contract in ``partitioners.layout``.

``spark_reader`` reads only what ``partitioners`` writes. While ``partitioners.layout`` is not
importable (parallel development), a minimal parser of the Lenses layout (reference §4.1) stands in;
once the real module exists it is always preferred, so the sink and the reader cannot drift.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from kcql.model import FileNaming, SinkPlan

__all__ = ["KeyInfo", "is_data_key", "parse_key", "using_fallback"]

try:  # pragma: no cover - exercised whichever way the tree is
    from partitioners import layout as _real
except ImportError:  # pragma: no cover
    _real = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What a committed data key says about its file."""

    topic: str
    partition: int
    values: dict[str, str] = field(default_factory=dict)
    """Partition values by display name, unescaped."""
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    extension: str = ""


def using_fallback() -> bool:
    """True while ``partitioners.layout`` is missing and the stand-in parser is used."""
    return _real is None


def _hidden(key: str) -> bool:
    return any(seg.startswith((".", "_")) for seg in key.split("/")[:-1]) or key.rsplit("/", 1)[
        -1
    ].startswith((".", "_"))


def is_data_key(key: str) -> bool:
    """Whether ``key`` can be a committed data file (not staging, temp or index objects)."""
    if _real is not None:
        return bool(_real.is_data_key(key))
    return not _hidden(key)


def _opt_int(value: Any) -> int | None:
    if value is None:
        return None
    value = int(value)
    return None if value < 0 else value


def parse_key(plan: SinkPlan, key: str) -> KeyInfo | None:
    """Parse ``key`` (relative to the bucket) under ``plan``'s layout; None if it is not a data file."""
    if _real is not None:
        parsed = _real.parse_key(plan, key)
        if parsed is None:
            return None
        values = getattr(parsed, "partition_values", None)
        if values is None:
            values = getattr(parsed, "values", {})
        return KeyInfo(
            topic=parsed.topic,
            partition=int(parsed.partition),
            values=dict(values or {}),
            first_offset=_opt_int(getattr(parsed, "first_offset", None)),
            last_offset=_opt_int(getattr(parsed, "last_offset", None)),
            min_timestamp=_opt_int(getattr(parsed, "min_timestamp", None)),
            max_timestamp=_opt_int(getattr(parsed, "max_timestamp", None)),
            extension=str(getattr(parsed, "extension", "") or ""),
        )
    return _fallback_parse(plan, key)


_OFFSET_NAME = re.compile(r"^(?P<off>\d+)_(?P<min>-?\d+)_(?P<max>-?\d+)(?P<rest>.*)\.(?P<ext>[A-Za-z0-9]+)$")
_TPO_NAME = re.compile(r"^(?P<topic>.+)\((?P<part>\d+)_(?P<off>\d+)\)(?P<rest>.*)\.(?P<ext>[A-Za-z0-9]+)$")
_CONFLUENT_NAME = re.compile(
    r"^(?P<topic>.+)\+(?P<part>\d+)\+(?P<off>\d+)(?P<rest>.*)\.(?P<ext>[A-Za-z0-9.]+)$"
)


def _fallback_parse(plan: SinkPlan, key: str) -> KeyInfo | None:
    if _hidden(key):
        return None
    base = plan.prefix + "/" if plan.prefix else ""
    if not key.startswith(base):
        return None
    parts = key[len(base) :].split("/")
    dirs, name = parts[:-1], parts[-1]
    if plan.naming == FileNaming.CONFLUENT:
        m = _CONFLUENT_NAME.match(name)
        if not m:
            return None
        return KeyInfo(m["topic"], int(m["part"]), {}, first_offset=int(m["off"]), extension=m["ext"])
    if plan.partition_by == ():
        m = _OFFSET_NAME.match(name)
        if not m or len(dirs) != 2:
            return None
        topic, part = (d.split("=", 1)[1] if plan.include_keys and "=" in d else d for d in dirs)
        return KeyInfo(
            unquote(topic),
            int(part),
            {},
            last_offset=int(m["off"]),
            min_timestamp=_opt_int(m["min"]),
            max_timestamp=_opt_int(m["max"]),
            extension=m["ext"],
        )
    m = _TPO_NAME.match(name)
    if not m:
        return None
    fields = plan.partition_by or ()
    if len(dirs) != len(fields):
        return None
    values: dict[str, str] = {}
    for f, d in zip(fields, dirs, strict=True):
        if plan.include_keys:
            name_part, sep, value = d.partition("=")
            if not sep or unquote(name_part) != f.display_name:
                return None
        else:
            value = d
        values[f.display_name] = unquote(value)
    return KeyInfo(m["topic"], int(m["part"]), values, last_offset=int(m["off"]), extension=m["ext"])
