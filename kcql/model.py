"""The sink plan: what one KCQL statement compiles to.

Every other package starts from a :class:`SinkPlan`. Plans are frozen so that a plan can be
shared between threads and worker processes and used as a dictionary key; the parser is the
only place that builds them, after every semantic check has passed, so code downstream never
re-validates.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Literal

__all__ = [
    "DEFAULT_FLUSH_COUNT",
    "DEFAULT_FLUSH_INTERVAL",
    "DEFAULT_FLUSH_SIZE",
    "DateSource",
    "EnvelopeFields",
    "FileNaming",
    "FlushSettings",
    "Padding",
    "PartitionField",
    "PartitionKind",
    "SelectField",
    "SelectSource",
    "SinkPlan",
    "StoreFormat",
    "TimeUnit",
]

DEFAULT_FLUSH_COUNT = 50_000
"""Lenses 3.x+ default: records per file."""
DEFAULT_FLUSH_SIZE = 500_000_000
"""Lenses 3.x+ default: bytes written to the staging file."""
DEFAULT_FLUSH_INTERVAL = 3600
"""Lenses 3.x+ default: seconds since the file's first record."""


class StoreFormat(StrEnum):
    """The STOREAS formats. The value is the canonical upper-case name shown to users."""

    JSON = "JSON"
    AVRO = "AVRO"
    PARQUET = "PARQUET"
    CSV = "CSV"
    CSV_WITHHEADERS = "CSV_WITHHEADERS"
    TEXT = "TEXT"
    BYTES = "BYTES"

    @property
    def supports_envelope(self) -> bool:
        """Lenses allows ``store.envelope`` for JSON, AVRO and PARQUET only."""
        return self in (StoreFormat.JSON, StoreFormat.AVRO, StoreFormat.PARQUET)


class FileNaming(StrEnum):
    """How final object names are built (see ``partitioners``)."""

    LENSES = "lenses"
    """Lenses 7.2+: ``<lastOffset>_<minTs>_<maxTs>.ext`` / ``topic(partition_lastOffset).ext``."""
    CONFLUENT = "confluent"
    """Confluent S3 sink: ``topics/<topic>/partition=<p>/<topic>+<p>+<startOffset %010d>.ext``."""


PartitionKind = Literal["key", "value", "header", "topic", "partition", "date"]


@dataclass(frozen=True, slots=True)
class PartitionField:
    """One PARTITIONBY entry.

    Examples (``spec`` → ``kind``, ``path``):
    ``_key`` → key, (); ``_key.a.b`` → key, ("a", "b"); ``a.b`` and ``_value.a.b`` → value, ("a", "b");
    ``_header.h.x`` → header, ("h", "x"); ``_topic`` → topic, (); ``_partition`` → partition, ();
    ``_date.uuuu`` → date, ("uuuu",); ``_key.`cost.centre.id``` → key, ("cost.centre.id",).
    """

    spec: str
    """The entry as written, with backticks removed (``_value.a.b``, ``_date.uuuu-MM-dd``)."""
    kind: PartitionKind
    """Where the value comes from."""
    path: tuple[str, ...] = ()
    """Path segments after the source; for ``header`` the first is the header name; for ``date``
    the single segment is the DateTimeFormatter pattern."""

    @property
    def display_name(self) -> str:
        """The name used in ``name=value`` (KeysAndValues) directories, as Lenses shows it.

        ``_key`` → ``key``, ``_key.a.b`` → ``a.b``, ``a.b`` → ``a.b``, ``_header.h.x`` → ``h.x``,
        ``_topic`` → ``topic``, ``_partition`` → ``partition``, ``_date.*`` → ``date``.
        """
        if self.kind in ("topic", "partition", "date"):
            return self.kind
        if self.kind == "key" and not self.path:
            return "key"
        return ".".join(self.path)


SelectSource = Literal["value", "key", "header", "topic", "partition", "offset", "timestamp"]


@dataclass(frozen=True, slots=True)
class SelectField:
    """One entry of the SELECT (or IGNORE) list: the projection, parsed and kept.

    Lenses' S3 sink parses the projection and writes the whole value anyway; kcql-sink applies it
    (``sink.transforms.projection``). ``SinkPlan.fields`` is empty for a plain ``SELECT *``;
    a ``*`` mixed with fields is kept as an entry of its own.

    Examples (``name`` → ``source``, ``path``): ``*`` → value, ("*",); ``a.b`` and ``_value.a.b``
    → value, ("a", "b"); ``f.*`` → value, ("f", "*"); ``_key`` → key, (); ``_key.a`` and
    ``_.key.a`` → key, ("a",); ``_key.*`` and ``_.key.*`` → key, ("*",); ``_header.h`` → header,
    ("h",); ``_.topic``, ``_.partition``, ``_.offset``, ``_.timestamp`` → that source, ().
    """

    name: str
    """The entry as written, backticks removed (``f.*``, ``_.key.a``)."""
    alias: str | None = None
    """``AS alias``; Lenses accepts one on a path ending in ``.*`` (except ``_.key.*``) too."""
    source: SelectSource = "value"
    """Which part of the record the entry reads."""
    path: tuple[str, ...] = ()
    """Path inside the source; ``()`` is the whole key, value or header set (or the metadata
    field itself); a final ``"*"`` means every field at that level."""

    @property
    def is_wildcard(self) -> bool:
        """True for ``*``, ``f.*``, ``_key.*``: every field at one level."""
        return self.path[-1:] == ("*",)

    @property
    def output_name(self) -> str | None:
        """The name of the field it writes: the alias, else the path's last segment (``a.b`` →
        ``b``), else the source (``_key`` → ``key``, ``_.offset`` → ``offset``); ``None`` for a
        wildcard without alias, which writes the fields it expands to under their own names."""
        if self.alias:
            return self.alias
        if self.is_wildcard:
            return None
        return self.path[-1] if self.path else self.source


@dataclass(frozen=True, slots=True)
class FlushSettings:
    """When an open file is closed and committed. Any condition reached flushes (OR)."""

    count: int = DEFAULT_FLUSH_COUNT
    """Records in the file."""
    size: int = DEFAULT_FLUSH_SIZE
    """Bytes written to the staging file."""
    interval: int = DEFAULT_FLUSH_INTERVAL
    """Seconds since the file's first record; enforced by a timer, so idle files flush too."""


@dataclass(frozen=True, slots=True)
class Padding:
    """Zero-padding of offsets and partitions in object names (Lenses ``padding.*`` properties)."""

    type: Literal["LeftPad", "RightPad", "NoOp"] = "LeftPad"
    char: str = "0"
    offset: int | None = 12
    """Padded length of offsets in names; ``None`` means not padded."""
    partition: int | None = None
    """Padded length of the Kafka partition in names; ``None`` means not padded."""

    def pad_offset(self, offset: int) -> str:
        return self._pad(str(offset), self.offset)

    def pad_partition(self, partition: int) -> str:
        return self._pad(str(partition), self.partition)

    def _pad(self, text: str, length: int | None) -> str:
        if length is None or self.type == "NoOp":
            return text
        if self.type == "RightPad":
            return text.ljust(length, self.char)
        return text.rjust(length, self.char)


@dataclass(frozen=True, slots=True)
class EnvelopeFields:
    """Which parts of a record the envelope stores (``store.envelope.fields.*``)."""

    key: bool = True
    value: bool = True
    headers: bool = True
    metadata: bool = True


TimeUnit = Literal["seconds", "milliseconds", "microseconds", "nanoseconds"]


@dataclass(frozen=True, slots=True)
class DateSource:
    """Where ``_date`` takes its instant and in which zone it formats it.

    ``PROPERTIES('timestamp.field'=..., 'timestamp.format'=..., 'timestamp.unit'=...,
    'timezone'=...)``; the default is the Kafka record timestamp in UTC.
    """

    field: PartitionField | None = None
    """``None``: the Kafka record timestamp; else a ``key``, ``value`` or ``header`` entry (as
    PARTITIONBY reads it) whose value is epoch time, ISO-8601 text, text in :attr:`format`, or a
    date/time value."""
    format: str | None = None
    """``timestamp.format``: a date pattern (``_date`` letters) for text values; ``None``: ISO-8601."""
    unit: TimeUnit = "milliseconds"
    """``timestamp.unit``: what a number in the field counts since the epoch."""
    zone: str = "UTC"
    """``timezone``: the IANA zone ``_date`` formats in (and text without an offset is read in)."""

    @property
    def describe(self) -> dict[str, str | None]:
        """What ``kcql explain`` shows."""
        return {
            "source": "record timestamp" if self.field is None else self.field.spec,
            "zone": self.zone,
            "format": None if self.field is None else (self.format or "ISO-8601"),
            "unit": None if self.field is None else self.unit,
        }


@dataclass(frozen=True, slots=True)
class SinkPlan:
    """One compiled KCQL statement: where records of a topic go and how.

    Built only by :func:`kcql.parse`; every field is already validated and defaulted.
    """

    bucket: str
    """Target bucket (or directory under the local storage root)."""
    prefix: str
    """Key prefix inside the bucket, without leading or trailing ``/``; ``""`` when absent."""
    source: str
    """Source topic; ``"*"`` means every topic the task receives (first matching statement wins)."""
    format: StoreFormat = StoreFormat.JSON
    partition_by: tuple[PartitionField, ...] | None = ()
    """``()`` = default layout (topic/partition), ``None`` = NOPARTITION, else the PARTITIONBY list."""
    include_keys: bool = False
    """``True`` → ``name=value`` directories (KeysAndValues), ``False`` → values only (Values)."""
    flush: FlushSettings = field(default_factory=FlushSettings)
    envelope: EnvelopeFields | None = None
    """``None`` when ``store.envelope`` is off; otherwise which fields the envelope carries."""
    padding: Padding = field(default_factory=Padding)
    naming: FileNaming = FileNaming.LENSES
    key_suffix: str = ""
    """Lenses ``key.suffix``: appended to the file name before the extension."""
    compression_codec: str | None = None
    """Per-statement codec (``compression.codec`` property); ``None`` → connector default."""
    compression_level: int | None = None
    schema_compatibility: Literal["NONE", "BACKWARD", "FORWARD", "FULL"] = "NONE"
    """Confluent-style schema evolution: NONE rolls a new file on any schema change."""
    date_source: DateSource = field(default_factory=DateSource)
    """Where ``_date`` PARTITIONBY entries take their instant, and their zone."""
    fields: tuple[SelectField, ...] = ()
    """SELECT list; empty means a plain ``SELECT *``. Applied to the written value unless
    :attr:`projection` is off (Lenses parses it and writes the whole value)."""
    projection: bool = True
    """``projection.enabled``: apply SELECT and IGNORE (``False``: write every field, as Lenses)."""
    ignore: tuple[str, ...] = ()
    """IGNORE list as written (``a.b``, ``f.*``): fields removed from the written value."""
    limit: int | None = None
    """LIMIT n, parsed and kept."""
    properties: tuple[tuple[str, str], ...] = ()
    """Every PROPERTIES entry (and mapped legacy keyword) as given, keys lower-cased, values as strings."""
    statement: str = ""
    """The statement text, for messages."""
    line: int = 1
    """1-based line where the statement starts in the compiled text."""

    @property
    def is_custom_partitioning(self) -> bool:
        """True when PARTITIONBY was given (Lenses names files ``topic(partition_offset).ext`` then)."""
        return bool(self.partition_by)

    @property
    def property_map(self) -> dict[str, str]:
        return dict(self.properties)

    def matches_topic(self, topic: str) -> bool:
        """Whether this statement handles records of ``topic`` (``*`` matches every topic)."""
        return self.source == "*" or self.source == topic
