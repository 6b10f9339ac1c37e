"""Record → object key: the layout contract between the sink and every reader.

The sink asks a :class:`Partitioner` for each record's partition path (the directories between
the prefix and the file name) and, when a file is committed, :func:`object_key` for the file's
final key. Both are pure functions of the plan and the record/file, which is what makes replays
produce the same keys. Readers decode keys with :mod:`partitioners.layout` (``parse_key``,
``is_data_key``); values are escaped reversibly by :func:`escape`/:func:`unescape`.
The rules, with examples, are in ``docs/layout.md``.
"""

from __future__ import annotations

from partitioners.base import FileMeta, PartitionError
from partitioners.dates import DatePattern, DatePatternError, validate_date_pattern
from partitioners.escaping import EMPTY, MISSING, escape, unescape
from partitioners.layout import ParsedKey, is_data_key, parse_key
from partitioners.naming import example_key, object_key
from partitioners.partitioner import Partitioner

__all__ = [
    "EMPTY",
    "MISSING",
    "DatePattern",
    "DatePatternError",
    "FileMeta",
    "ParsedKey",
    "PartitionError",
    "Partitioner",
    "escape",
    "example_key",
    "is_data_key",
    "object_key",
    "parse_key",
    "unescape",
    "validate_date_pattern",
]
