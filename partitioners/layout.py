"""The layout contract for readers: which keys are data files, and what a key says.

``spark_reader`` (and any other reader) decodes committed object keys with :func:`parse_key` rather
than re-implementing the naming rules, so the writer and the readers cannot drift. This module
depends only on the plan (``kcql.model``) and the rest of ``partitioners``, never on ``sink``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kcql.model import FileNaming
from partitioners.dates import split_directories
from partitioners.escaping import escape, is_hidden_segment, unescape
from partitioners.naming import base_prefix

if TYPE_CHECKING:
    from kcql.model import SinkPlan

__all__ = ["ParsedKey", "is_data_key", "parse_key"]


@dataclass(frozen=True, slots=True)
class ParsedKey:
    """What a committed data key says about its file (inverse of :func:`partitioners.object_key`)."""

    topic: str
    partition: int
    partition_values: dict[str, str] = field(default_factory=dict)
    """PARTITIONBY values by display name, unescaped, in PARTITIONBY order (``{}`` for the default
    layout and NOPARTITION). An absent field reads back as ``[missing]``."""
    partition_items: tuple[tuple[str, str], ...] = ()
    """The same as ``(display name, value)`` pairs in PARTITIONBY order, keeping repeated display
    names (``_date.uuuu, _date.MM`` are both ``date``) that the dict collapses."""
    first_offset: int | None = None
    """Offset of the file's first record (Confluent naming only)."""
    last_offset: int | None = None
    """Offset of the file's last record (Lenses naming only)."""
    min_timestamp: int | None = None
    """Smallest record timestamp, epoch ms, ``-1`` for none (Lenses default layout only)."""
    max_timestamp: int | None = None
    """Largest record timestamp, epoch ms, ``-1`` for none (Lenses default layout only)."""
    extension: str = ""
    """Everything after the name's dot (``json``, ``parquet``, ``json.gz`` ...), without the dot."""

    @property
    def values(self) -> dict[str, str]:
        """Alias of :attr:`partition_values`."""
        return self.partition_values


def is_data_key(key: str, prefix: str = "") -> bool:
    """False for keys that can never be committed data: any segment empty, or starting with ``.``
    or ``_`` (``.indexes/``, ``.temp-upload/``, staging, ``_SUCCESS``). Escaping guarantees that no
    data segment starts with either, so this never hides a data file.

    Args:
        key: the object key inside the bucket.
        prefix: the plan's prefix; its own segments are the user's choice (``_archive`` is a valid
            prefix), so only what follows it is checked. A key outside the prefix is not data.
    """
    prefix = prefix.strip("/")
    if prefix:
        if not key.startswith(prefix + "/"):
            return False
        key = key[len(prefix) + 1 :]
    if not key or key.endswith("/"):
        return False
    return not any(not segment or is_hidden_segment(segment) for segment in key.split("/"))


_ASCII_DIGITS = re.compile(r"[0-9]+")


def _unpad(text: str, pad: Callable[[int], str], char: str, kind: str) -> int | None:
    """Read a padded number back; ``None`` unless padding it again gives ``text`` exactly."""
    core = text
    if kind == "LeftPad":
        core = text.lstrip(char) or char
    elif kind == "RightPad":
        core = text.rstrip(char) or char
    if not _ASCII_DIGITS.fullmatch(core):
        core = text  # no padding applied (NoOp, or no length configured for this field)
        if not _ASCII_DIGITS.fullmatch(core):
            return None
    number = int(core)
    return number if pad(number) == text else None


class _Decoder:
    """Regexes and helpers for one plan, built once (plans are hashable, so cached per plan)."""

    def __init__(self, plan: SinkPlan) -> None:
        self.plan = plan
        self.base = base_prefix(plan)
        suffix = re.escape(plan.key_suffix)
        ext = r"\.(?P<ext>[^/]+)"
        self.lenses_default = re.compile(rf"(?P<off>.+)_(?P<min>-?[0-9]+)_(?P<max>-?[0-9]+){suffix}{ext}")
        self.lenses_custom = re.compile(rf"(?P<topic>.+)\((?P<inner>[^()]*)\){suffix}{ext}")
        self.confluent = re.compile(rf"(?P<topic>.+)\+(?P<part>[0-9]+)\+(?P<off>[0-9]{{10,}}){suffix}{ext}")
        padding = plan.padding
        self.offset = lambda text: _unpad(text, padding.pad_offset, padding.char, padding.type)
        self.partition = lambda text: _unpad(text, padding.pad_partition, padding.char, padding.type)
        fields = plan.partition_by or ()
        self.display = tuple(f.display_name for f in fields)
        self.names = tuple(escape(name) for name in self.display)
        # a _date pattern with unquoted "/" spans several directories (name= on the first only)
        self.widths = tuple(len(split_directories(f.path[0])) if f.kind == "date" else 1 for f in fields)

    def values(self, dirs: list[str]) -> tuple[tuple[str, str], ...] | None:
        if len(dirs) != sum(self.widths):
            return None
        out: list[tuple[str, str]] = []
        at = 0
        for display, name, width in zip(self.display, self.names, self.widths, strict=True):
            pieces = dirs[at : at + width]
            at += width
            if self.plan.include_keys:
                seg_name, sep, first = pieces[0].partition("=")
                if not sep or seg_name != name:
                    return None
                pieces = [first, *pieces[1:]]
            out.append((display, "/".join(unescape(piece) for piece in pieces)))
        return tuple(out)

    def parse(self, key: str) -> ParsedKey | None:
        if not key.startswith(self.base):
            return None
        rest = key[len(self.base) :]
        if not is_data_key(rest):
            return None
        *dirs, name = rest.split("/")
        if self.plan.naming == FileNaming.CONFLUENT:
            parsed = self._confluent(dirs, name)
        elif self.plan.partition_by == ():
            parsed = self._lenses_default(dirs, name)
        else:
            parsed = self._lenses_named(dirs, name)
        if parsed is None or not self.plan.matches_topic(parsed.topic):
            return None
        return parsed

    def _lenses_default(self, dirs: list[str], name: str) -> ParsedKey | None:
        match = self.lenses_default.fullmatch(name)
        if match is None or len(dirs) != 2:
            return None
        topic_seg, part_seg = dirs
        if self.plan.include_keys:
            if not (topic_seg.startswith("topic=") and part_seg.startswith("partition=")):
                return None
            topic_seg, part_seg = topic_seg[6:], part_seg[10:]
        partition = self.partition(unescape(part_seg))
        last = self.offset(unescape(match["off"]))
        if partition is None or last is None:
            return None
        return ParsedKey(
            topic=unescape(topic_seg),
            partition=partition,
            last_offset=last,
            min_timestamp=int(match["min"]),
            max_timestamp=int(match["max"]),
            extension=match["ext"],
        )

    def _lenses_named(self, dirs: list[str], name: str) -> ParsedKey | None:
        match = self.lenses_custom.fullmatch(name)
        if match is None:
            return None
        values = self.values(dirs) if self.plan.partition_by else (() if not dirs else None)
        if values is None:
            return None
        inner = match["inner"]
        for at in (i for i, ch in enumerate(inner) if ch == "_"):
            partition = self.partition(unescape(inner[:at]))
            last = self.offset(unescape(inner[at + 1 :]))
            if partition is not None and last is not None:
                return ParsedKey(
                    topic=unescape(match["topic"]),
                    partition=partition,
                    partition_values=dict(values),
                    partition_items=values,
                    last_offset=last,
                    extension=match["ext"],
                )
        return None

    def _confluent(self, dirs: list[str], name: str) -> ParsedKey | None:
        match = self.confluent.fullmatch(name)
        if match is None:
            return None
        topic_seg, partition = match["topic"], int(match["part"])
        if self.plan.partition_by is None:
            if dirs:
                return None
            values: tuple[tuple[str, str], ...] | None = ()
        else:
            if not dirs or dirs[0] != topic_seg:
                return None
            if self.plan.partition_by == ():
                values = () if dirs[1:] == [f"partition={partition}"] else None
            else:
                values = self.values(dirs[1:])
        if values is None:
            return None
        return ParsedKey(
            topic=unescape(topic_seg),
            partition=partition,
            partition_values=dict(values),
            partition_items=values,
            first_offset=int(match["off"]),
            extension=match["ext"],
        )


_DECODERS: dict[SinkPlan, _Decoder] = {}


def parse_key(plan: SinkPlan, key: str) -> ParsedKey | None:
    """Decode a committed data key of ``plan`` (relative to the bucket, no leading ``/``).

    Returns ``None`` for anything that is not a committed data file of this plan: hidden or
    staging objects, another prefix, another topic (unless the source is ``*``), a name that does
    not follow the plan's naming, or a directory structure that does not match its PARTITIONBY.
    """
    decoder = _DECODERS.get(plan)
    if decoder is None:
        if len(_DECODERS) > 256:
            _DECODERS.clear()
        decoder = _DECODERS[plan] = _Decoder(plan)
    return decoder.parse(key)
