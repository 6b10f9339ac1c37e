"""The layout contract, as the reader uses it: thin adapter over ``partitioners.layout``.

``spark_reader`` never re-implements naming rules: keys are decoded by ``partitioners.parse_key``
so that the sink and the reader cannot drift. This module only normalises the parsed key into the
reader's shape (``-1`` timestamps become ``None``, the ``[missing]`` marker becomes ``None``).
"""

from __future__ import annotations

from dataclasses import dataclass

from kcql.model import FileNaming, SinkPlan
from partitioners import MISSING, escape
from partitioners import is_data_key as _is_data_key
from partitioners import parse_key as _parse_key
from partitioners.naming import base_prefix

__all__ = ["KeyInfo", "is_data_key", "listing_prefix", "parse_key"]


@dataclass(frozen=True, slots=True)
class KeyInfo:
    """What a committed data key says about its file."""

    topic: str
    partition: int
    values: tuple[str | None, ...] = ()
    """PARTITIONBY values in PARTITIONBY order, unescaped; ``None`` for Lenses' ``[missing]``."""
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None
    extension: str = ""


def is_data_key(plan: SinkPlan, key: str) -> bool:
    """Whether ``key`` can be a committed data file of ``plan`` (not staging, temp-upload or index
    objects); the plan's own prefix may start with ``_`` or ``.``, so only what follows it counts."""
    return _is_data_key(key, base_prefix(plan))


def _opt(value: int | None) -> int | None:
    return None if value is None or value < 0 else int(value)


def parse_key(plan: SinkPlan, key: str) -> KeyInfo | None:
    """Parse ``key`` (relative to the bucket) under ``plan``'s layout; None if it is not a data file."""
    parsed = _parse_key(plan, key)
    if parsed is None:
        return None
    items = parsed.partition_items or tuple(parsed.partition_values.items())
    return KeyInfo(
        topic=parsed.topic,
        partition=int(parsed.partition),
        values=tuple(None if v == MISSING else v for _, v in items),
        first_offset=_opt(parsed.first_offset),
        last_offset=_opt(parsed.last_offset),
        min_timestamp=_opt(parsed.min_timestamp),
        max_timestamp=_opt(parsed.max_timestamp),
        extension=parsed.extension,
    )


def listing_prefix(plan: SinkPlan, topic: str | None = None) -> str:
    """The narrowest key prefix holding ``plan``'s files (of ``topic``, when the layout puts it first)."""
    prefix = base_prefix(plan)
    if topic is None or plan.source not in ("*", topic):
        return prefix
    if plan.naming == FileNaming.CONFLUENT or plan.partition_by == ():
        if plan.naming == FileNaming.LENSES and plan.include_keys:
            return prefix + f"topic={escape(topic)}/"
        return prefix + escape(topic) + "/"
    return prefix
