"""Meaning of a parsed KCQL statement: Lenses' checks and defaults, and the plan they produce.

Every check raises :class:`KcqlSemanticError` positioned at the text that is wrong (the format
name, the PARTITIONBY entry, the property key or value), so the user never has to guess which of
several statements or properties is meant. Where Lenses silently ignores a mistake (an unknown
property key, a malformed number) we refuse it: a typo in ``'flush.cuont'`` must not quietly run
with a 50 000-record default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, cast

from lark import Token

from kcql.codecs import CODEC_NAMES, CodecError, check_codec
from kcql.dates import DatePatternError, validate_date_pattern
from kcql.errors import KcqlSemanticError
from kcql.model import (
    DEFAULT_FLUSH_COUNT,
    DEFAULT_FLUSH_INTERVAL,
    DEFAULT_FLUSH_SIZE,
    DateSource,
    EnvelopeFields,
    FileNaming,
    FlushSettings,
    Padding,
    PartitionField,
    SelectField,
    SelectSource,
    SinkPlan,
    StoreFormat,
    TimeUnit,
)

if TYPE_CHECKING:
    from kcql.parser import Name

__all__ = [
    "COMPRESSION_CODECS",
    "KNOWN_PROPERTIES",
    "LEGACY_KEYWORDS",
    "SCHEMA_COMPATIBILITIES",
    "RawField",
    "RawStatement",
    "compile_statement",
]

LEGACY_KEYWORDS = {
    "WITH_FLUSH_COUNT": "flush.count",
    "WITH_FLUSH_SIZE": "flush.size",
    "WITH_FLUSH_INTERVAL": "flush.interval",
    "WITHPARTITIONER": "partition.include.keys",
}
"""Lenses <= 6.x keywords and the >= 7.x property each one maps to."""

ENVELOPE_FIELD_KEYS = (
    "store.envelope.fields.key",
    "store.envelope.fields.value",
    "store.envelope.fields.headers",
    "store.envelope.fields.metadata",
)
DATE_SOURCE_KEYS = ("timestamp.field", "timestamp.format", "timestamp.unit", "timezone")
"""Where ``_date`` takes its instant and its zone (kcql-sink; names after Confluent's S3 sink)."""
_TIME_UNITS = ("seconds", "milliseconds", "microseconds", "nanoseconds")
KNOWN_PROPERTIES = (
    "flush.count",
    "flush.size",
    "flush.interval",
    "partition.include.keys",
    "store.envelope",
    *ENVELOPE_FIELD_KEYS,
    "padding.type",
    "padding.char",
    "padding.length.offset",
    "padding.length.partition",
    "key.suffix",
    # kcql-sink extensions
    "file.naming",
    "compression.codec",
    "compression.level",
    "schema.compatibility",
    "projection.enabled",
    *DATE_SOURCE_KEYS,
)
"""Every PROPERTIES key the sink understands (Lenses' plus our extensions), lower case."""

COMPRESSION_CODECS = CODEC_NAMES
SCHEMA_COMPATIBILITIES = ("NONE", "BACKWARD", "FORWARD", "FULL")
_PADDING_TYPES = {"leftpad": "LeftPad", "rightpad": "RightPad", "noop": "NoOp"}
_PADDING_LENGTH = "padding.length."
_PADDING_LENGTH_VALUE = re.compile(r"[+-]?[0-9]{1,10}")  # what Java's Integer.parseInt reads
_MAX_PADDING = 1024
_SPECIAL = ("_key", "_value", "_header", "_topic", "_partition", "_date")
_DIGITS = re.compile(r"[0-9]+")


@dataclass(frozen=True, slots=True)
class RawField:
    """One SELECT or IGNORE item as written: ``*`` (no name), ``name``, ``name.*``, ``... AS alias``."""

    name: Name | None
    star: Token | None
    alias: Name | None


@dataclass
class RawStatement:
    """What the tree walk found, before any meaning is attached. Built by :mod:`kcql.parser`."""

    text: str
    statement: str
    line: int
    target: Name | None = None
    topic: Name | None = None
    fields: list[RawField] = field(default_factory=list)
    ignore: list[RawField] = field(default_factory=list)
    nopartition: bool = False
    partitions: list[Name] = field(default_factory=list)
    storeas: Name | None = None
    legacy: list[tuple[Token, Name]] = field(default_factory=list)
    limit: Name | None = None
    has_properties: bool = False
    properties: list[tuple[Name, Name]] = field(default_factory=list)


def _error(
    raw: RawStatement, at: Token | Name, message: str, expected: tuple[str, ...] = ()
) -> KcqlSemanticError:
    tok = at if isinstance(at, Token) else at.first
    return KcqlSemanticError(message, raw.text, tok.line or 1, tok.column or 1, expected)


def compile_statement(raw: RawStatement) -> SinkPlan:
    """Check one statement and build its plan with every default filled in."""
    if raw.target is None or raw.topic is None:  # pragma: no cover - the grammar requires both
        raise KcqlSemanticError("INSERT INTO and FROM are required", raw.text, raw.line, 1)
    bucket, prefix = _target(raw, raw.target)
    source = raw.topic.value
    if not source.strip():
        raise _error(raw, raw.topic, "the topic name is empty")
    fmt = _format(raw)
    props, given = _properties(raw)
    partition_by = None if raw.nopartition else tuple(_partitions(raw))
    flush = FlushSettings(
        count=_positive(raw, props, given, "flush.count", DEFAULT_FLUSH_COUNT),
        size=_positive(raw, props, given, "flush.size", DEFAULT_FLUSH_SIZE),
        interval=_positive(raw, props, given, "flush.interval", DEFAULT_FLUSH_INTERVAL),
    )
    if fmt is StoreFormat.BYTES and flush.count != 1:
        at = given.get("flush.count") or raw.storeas or raw.topic
        raise _error(
            raw,
            at,
            f"flush.count > 1 is not allowed for BYTES (flush.count is {flush.count}): a BYTES file holds "
            "exactly one record; add PROPERTIES('flush.count'=1)",
        )
    include_keys = _include_keys(raw, props, given, partition_by)
    envelope = _envelope(raw, props, given, fmt)
    padding = _padding(raw, props, given)
    codec = _upper_choice(raw, props, given, "compression.codec", COMPRESSION_CODECS)
    level = _int(raw, props, given, "compression.level")
    if codec is not None or level is not None:
        _check_codec(raw, given, fmt, codec, level)
    limit = None
    if raw.limit is not None:
        if not _DIGITS.fullmatch(raw.limit.value):
            raise _error(raw, raw.limit, f"LIMIT takes a whole number, not {raw.limit.value!r}")
        limit = int(raw.limit.value)
    return SinkPlan(
        bucket=bucket,
        prefix=prefix,
        source=source,
        format=fmt,
        partition_by=partition_by,
        include_keys=include_keys,
        flush=flush,
        envelope=envelope,
        padding=padding,
        naming=_choice_naming(raw, props, given),
        key_suffix=_key_suffix(raw, props, given),
        compression_codec=codec,
        compression_level=level,
        schema_compatibility=cast(
            Literal["NONE", "BACKWARD", "FORWARD", "FULL"],
            _upper_choice(raw, props, given, "schema.compatibility", SCHEMA_COMPATIBILITIES) or "NONE",
        ),
        date_source=_date_source(raw, props, given, partition_by),
        fields=_select(raw),
        projection=_bool(raw, props, given, "projection.enabled") is not False,
        ignore=tuple(_select_field(raw, item, "IGNORE").name for item in raw.ignore),
        limit=limit,
        properties=tuple(props.items()),
        statement=raw.statement,
        line=raw.line,
    )


# --------------------------------------------------------------------------- target, format


def _target(raw: RawStatement, target: Name) -> tuple[str, str]:
    text = target.value
    parts = text.split(":")
    if len(parts) > 2:
        raise _error(
            raw,
            target,
            f"invalid target {text!r}: more than one ':'; expected bucket or bucket:prefix",
        )
    bucket = parts[0].strip()
    if not bucket:
        raise _error(
            raw, target, f"invalid target {text!r}: the bucket name is empty; expected bucket[:prefix]"
        )
    if "/" in bucket:
        # Lenses: the bucket fails S3's DNS-name check at startup; here, at the '/' itself
        line, column = _position_in(target, parts[0].index("/"))
        raise KcqlSemanticError(
            f"invalid bucket {bucket!r}: a bucket name cannot contain '/'; the target is "
            "bucket[:prefix], and a prefix may be nested (bucket:prefix/sub)",
            raw.text,
            line,
            column,
        )
    prefix = parts[1].strip("/") if len(parts) == 2 else ""
    return bucket, prefix


def _position_in(name: Name, index: int) -> tuple[int, int]:
    """Line and column in the text of character ``index`` of ``name.value`` (quotes skipped)."""
    for tok in name.tokens:
        quoted = tok.type != "NAME"
        piece = str(tok)[1:-1] if quoted else str(tok)
        if index < len(piece):
            before = str(tok)[: index + quoted]
            line = (tok.line or 1) + before.count("\n")
            if "\n" in before:
                return line, len(before) - before.rfind("\n")
            return line, (tok.column or 1) + len(before)
        index -= len(piece)
    return name.first.line or 1, name.first.column or 1  # pragma: no cover - index is inside name


def _format(raw: RawStatement) -> StoreFormat:
    if raw.storeas is None:
        return StoreFormat.JSON
    name = raw.storeas.value.strip()
    upper = name.upper()
    if upper.startswith("BYTES_"):
        raise _error(
            raw,
            raw.storeas,
            f"Unsupported format - {name}: the BYTES variants such as Bytes_KeyAndValueWithSizes are no "
            "longer supported; use BYTES",
            tuple(f.value for f in StoreFormat),
        )
    try:
        return StoreFormat(upper)
    except ValueError:
        raise _error(
            raw, raw.storeas, f"Unsupported format - {name}", tuple(f.value for f in StoreFormat)
        ) from None


def _check_codec(
    raw: RawStatement, where: dict[str, Name], fmt: StoreFormat, codec: str | None, level: int | None
) -> None:
    # kcql.codecs owns which codec each format can write (formats reads the same table), so that
    # `kcql check` catches 'compression.codec'='SNAPPY' on CSV before a worker starts.
    try:
        check_codec(fmt, codec, level)
    except CodecError as exc:
        at = where["compression.codec"] if codec is not None else where["compression.level"]
        if codec is not None and level is not None and "level" in str(exc):
            at = where["compression.level"]
        raise _error(raw, at, str(exc)) from None


# --------------------------------------------------------------------------- SELECT, IGNORE

_METADATA: tuple[SelectSource, ...] = ("topic", "partition", "offset", "timestamp")
_UNDERSCORE_NEEDS = "'_' needs to be followed by: key,topic,partition,timestamp,offset"


def _select(raw: RawStatement) -> tuple[SelectField, ...]:
    """The SELECT list as Lenses' parser reads it; ``()`` for a plain ``SELECT *``."""
    fields = [_select_field(raw, item, "SELECT") for item in raw.fields]
    seen: set[tuple[str, str]] = set()
    for item, selected in zip(raw.fields, fields, strict=True):
        identity = _top_level(item, selected)
        if identity is None:
            continue
        if identity in seen:
            # Lenses (Kcql.addField): a top-level field, '*' or metadata field listed twice
            at = item.name if item.name is not None else item.star
            assert at is not None  # noqa: S101 - an item is a name, a '*' or both
            shown = selected.source if selected.source in _METADATA else identity[1]
            raise _error(raw, at, f"Field {shown} has already been defined")
        seen.add(identity)
    if len(fields) == 1 and raw.fields[0].name is None:
        return ()
    return tuple(fields)


def _top_level(item: RawField, selected: SelectField) -> tuple[str, str] | None:
    """What Lenses compares to find a field listed twice: fields without parents (and metadata).

    (Its check never matches fields with parents, so ``a.b, a.b`` passes there, and here.)
    """
    if selected.source in _METADATA:
        return (selected.source, "")
    if item.name is None:
        return ("value", "*")
    if item.star is None and len(_split(item.name)) == 1:
        return ("value", selected.name)
    return None


def _select_field(raw: RawStatement, item: RawField, clause: str) -> SelectField:
    """One SELECT/IGNORE item, checked as Lenses' ``Field.from`` checks it."""
    if item.name is None:
        return SelectField("*", None, "value", ("*",))
    entry = item.name
    spec = _spec(entry)
    segments = _split(entry)
    alias = item.alias.value if item.alias is not None else None
    if item.star is not None:
        last = entry.tokens[-1]
        if last.type != "NAME" or not str(last).endswith(".") or item.star.start_pos != last.end_pos:
            base = spec.rstrip(".") or "f"
            raise _error(
                raw,
                item.star,
                f"'*' after a field selects all its fields and is written {base}.* (no spaces); "
                f"'*' alone selects the whole value",
            )
        segments[-1] = "*"  # "f." split into ["f", ""]
        spec += "*"
    if _underscore_dot(entry):
        return _underscore_field(raw, item, spec, segments[1:], clause)
    if any(not s for s in segments):
        raise _error(raw, entry, f"invalid {clause} field {spec!r}: a path segment is empty")
    # as in PARTITIONBY, a quoted first segment (`_key`.a) is a value field, not a special source
    bare_head = entry.first.type == "NAME" and str(entry.first).split(".")[0] == segments[0]
    head = segments[0] if bare_head else ""
    source: SelectSource = "value"
    path = tuple(segments)
    if head.lower() in ("_key", "_value", "_header"):
        source = cast(SelectSource, head.lower()[1:])
        path = tuple(segments[1:])
    return SelectField(spec, alias, source, path)


def _underscore_field(
    raw: RawStatement, item: RawField, spec: str, rest: list[str], clause: str
) -> SelectField:
    """``_.topic`` and friends, ``_.key.<path>``: Lenses' ``Field.from`` rules, and its errors."""
    assert item.name is not None  # noqa: S101 - only named items start with '_.'
    alias = item.alias.value if item.alias is not None else None
    if all(rest) and rest[-1].lower() in _METADATA:
        # Lenses reads any '_.' path ending in a metadata name as that field (so _.a.topic too)
        return SelectField(spec, alias, cast(SelectSource, rest[-1].lower()), ())
    if len(rest) >= 2 and rest[0].lower() == "key" and all(rest[1:]):
        if rest[1:] == ["*"] and item.alias is not None:
            raise _error(raw, item.alias, "You can't alias '*'.")
        return SelectField(spec, alias, "key", tuple(rest[1:]))
    if rest and rest[0].lower() == "key":
        message = (
            f"invalid {clause} field {spec!r}: '_.key' needs a key field after it; write "
            "_.key.<field> or _.key.* (or _key for the whole key)"
        )
    else:
        message = f"invalid {clause} field {spec!r}: {_UNDERSCORE_NEEDS}"
    raise _error(raw, item.name, message)


# --------------------------------------------------------------------------- PARTITIONBY


def _split(entry: Name) -> list[str]:
    """Split a name on '.', keeping backtick (and quote) groups whole; empty segments are kept."""
    segments = [""]
    for tok in entry.tokens:
        if tok.type == "NAME":
            first, *rest = str(tok).split(".")
            segments[-1] += first
            segments.extend(rest)
        else:
            segments[-1] += str(tok)[1:-1]
    return segments


def _segments(raw: RawStatement, entry: Name) -> list[str]:
    """Split a PARTITIONBY entry on '.', keeping backtick (and quote) groups whole."""
    segments = _split(entry)
    if any(not s for s in segments):
        raise _error(raw, entry, f"invalid PARTITIONBY entry {_spec(entry)!r}: a path segment is empty")
    return segments


def _underscore_dot(entry: Name) -> bool:
    """Whether ``entry`` starts with a bare ``_.`` (Lenses' SELECT syntax for the key and metadata)."""
    first = entry.first
    return first.type == "NAME" and str(first).startswith("_.")


def _spec(entry: Name) -> str:
    return "".join(str(t).replace("`", "") if t.type != "STRING" else str(t)[1:-1] for t in entry.tokens)


def _partitions(raw: RawStatement) -> list[PartitionField]:
    out: list[PartitionField] = []
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for entry in raw.partitions:
        spec = _spec(entry)
        field = _partition_field(raw, entry, spec)
        identity = _identity(field)
        if identity in seen:
            raise _error(raw, entry, f"The field {spec} appears twice in PARTITIONBY")
        seen.add(identity)
        out.append(field)
    return out


def _underscore_partition_message(spec: str, rest: list[str]) -> str:
    # Lenses >= 4 reads PARTITIONBY _.x as a value field named '_' (2.x-3.x rejected it); it is
    # almost always SELECT's _.key.x / _.topic written where PARTITIONBY wants _key.x / _topic.
    head = rest[0].lower() if rest else ""
    tail = ".".join(r for r in rest[1:] if r)
    if head == "key":
        better = "_key" + (f".{tail}" if tail else "")
    elif head in ("topic", "partition") and not tail:
        better = f"_{head}"
    else:
        better = "_key.<field>, _value.<field>, _header.<name>, _topic or _partition"
    literal = ".".join(rest) if rest and all(rest) else "<field>"
    return (
        f"invalid PARTITIONBY entry {spec!r}: '_.' is SELECT syntax ({_UNDERSCORE_NEEDS}), not a "
        f"PARTITIONBY source; write {better} (or `_`.{literal} for a value field named '_')"
    )


def _identity(field: PartitionField) -> tuple[str, tuple[str, ...]]:
    """What makes two PARTITIONBY entries the same directory level.

    Field names compare case-insensitively (as Lenses), and ``a.b`` is ``_value.a.b``. A ``_date``
    pattern is case-sensitive: ``_date.MM`` (month) and ``_date.mm`` (minute) are different levels.
    """
    if field.kind == "date":
        return (field.kind, field.path)
    return (field.kind, tuple(segment.lower() for segment in field.path))


def _partition_field(raw: RawStatement, entry: Name, spec: str) -> PartitionField:
    if _underscore_dot(entry):
        raise _error(raw, entry, _underscore_partition_message(spec, _split(entry)[1:]))
    segments = _segments(raw, entry)
    # a _date pattern may contain '/' (it formats to nested directories; partitioners supports it)
    checked = segments[:1] if segments[0].lower() == "_date" else segments
    for segment in checked:
        if "/" in segment or "\\" in segment:
            raise _error(
                raw,
                entry,
                f"invalid PARTITIONBY entry {spec!r}: name {segment!r} must not contain a slash character",
            )
    head = segments[0].lower()
    rest = tuple(segments[1:])
    # a quoted first segment (`_key`) is a field name, not the special source
    first_quoted = entry.first.type != "NAME" or str(entry.first).split(".")[0] != segments[0]
    if head not in _SPECIAL or first_quoted:
        return PartitionField(spec, "value", tuple(segments))
    if head == "_key":
        return PartitionField(spec, "key", rest)
    if head == "_value":
        if not rest:
            raise _error(
                raw,
                entry,
                "cannot partition by Value partition field without path: write _value.<field> "
                "(or just <field>)",
            )
        return PartitionField(spec, "value", rest)
    if head == "_header":
        if not rest:
            raise _error(
                raw,
                entry,
                "cannot partition by Header partition field without a header name: write _header.<name>",
            )
        return PartitionField(spec, "header", rest)
    if head in ("_topic", "_partition"):
        if rest:
            what = head[1:]
            raise _error(raw, entry, f"partitioning by {what} requires no path: write {head} alone")
        return PartitionField(spec, "topic" if head == "_topic" else "partition", ())
    # _date
    if not rest:
        raise _error(
            raw,
            entry,
            "cannot partition by Date partition field without format: write _date.<pattern>, "
            "e.g. _date.uuuu or _date.`uuuu-MM-dd`",
        )
    if len(rest) > 1:
        # Lenses (PartitionField): the path after _date must be one segment
        raise _error(
            raw,
            entry,
            f"only one format should be provided for date: {spec!r} splits into {len(rest)} formats "
            f"at '.'; keep a pattern with '.' in one piece with backticks: _date.`{'.'.join(rest)}`",
        )
    pattern = rest[0]
    _check_date_pattern(raw, entry, pattern)
    return PartitionField(spec, "date", (pattern,))


def _check_date_pattern(raw: RawStatement, entry: Name, pattern: str) -> None:
    # partitioners.dates formats exactly what kcql.dates accepts, so a compiled plan never fails there
    try:
        validate_date_pattern(pattern)
    except DatePatternError as exc:
        raise _error(
            raw,
            entry,
            f"invalid PARTITIONBY entry {_spec(entry)!r}: {exc}",
        ) from None


# --------------------------------------------------------------------------- PROPERTIES


def _date_source(
    raw: RawStatement, props: dict[str, str], where: dict[str, Name], partition_by: Any
) -> DateSource:
    """``timestamp.field``/``timestamp.format``/``timestamp.unit``/``timezone``: the instant and
    zone of ``_date`` entries. Each needs a ``_date`` entry to act on."""
    given = [key for key in DATE_SOURCE_KEYS if key in props]
    if not given:
        return DateSource()
    if not any(f.kind == "date" for f in partition_by or ()):
        key = given[0]
        raise _error(
            raw,
            where[key],
            f"{key} applies to _date partitioning, but the statement has no "
            "PARTITIONBY _date.<pattern> entry",
        )
    zone = props.get("timezone", "UTC").strip()
    if "timezone" in props and not _known_zone(zone):
        why = f"timezone {zone!r} is not a time zone this machine knows (e.g. Europe/Paris, UTC)"
        raise _error(raw, where["timezone"], why)
    unit = props.get("timestamp.unit", "milliseconds").strip().lower()
    if unit not in _TIME_UNITS:
        why = f"timestamp.unit must be one of {', '.join(_TIME_UNITS)}, not {unit!r}"
        raise _error(raw, where["timestamp.unit"], why)
    field_spec = props.get("timestamp.field", "").strip()
    fmt = props.get("timestamp.format")
    if not field_spec:
        for key in ("timestamp.format", "timestamp.unit"):
            if key in props:
                why = f"{key} describes the field timestamp.field names; set timestamp.field too"
                raise _error(raw, where[key], why)
        if "timestamp.field" in props:
            why = "timestamp.field must name a field, e.g. _value.created"
            raise _error(raw, where["timestamp.field"], why)
        return DateSource(zone=zone)
    if fmt is not None:
        try:
            validate_date_pattern(fmt)
        except DatePatternError as exc:
            raise _error(raw, where["timestamp.format"], f"timestamp.format {fmt!r}: {exc}") from None
    return DateSource(_time_field(raw, where["timestamp.field"], field_spec), fmt, cast(TimeUnit, unit), zone)


def _time_field(raw: RawStatement, at: Name, spec: str) -> PartitionField:
    """``timestamp.field``'s value: ``_value.a.b`` or ``a.b``, ``_key[.a]``, ``_header.h[.a]``."""
    segments = spec.split(".")
    if any(not s for s in segments):
        raise _error(raw, at, f"timestamp.field {spec!r}: a path segment is empty")
    head, rest = segments[0].lower(), tuple(segments[1:])
    if head == "_key":
        return PartitionField(spec, "key", rest)
    if head == "_header":
        if not rest:
            raise _error(raw, at, "timestamp.field _header needs a header name: _header.<name>")
        return PartitionField(spec, "header", rest)
    if head == "_value":
        if not rest:
            raise _error(raw, at, "timestamp.field _value needs a field: _value.<field>")
        return PartitionField(spec, "value", rest)
    if head.startswith("_") and head in _SPECIAL:
        raise _error(raw, at, f"timestamp.field takes a key, value or header field, not {segments[0]}")
    return PartitionField(spec, "value", tuple(segments))


def _known_zone(zone: str) -> bool:
    import zoneinfo

    try:
        zoneinfo.ZoneInfo(zone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def _same(key: str, a: str, b: str) -> bool:
    if key.startswith("flush."):
        return a.strip().isdigit() and b.strip().isdigit() and int(a) == int(b)
    return a.strip().lower() == b.strip().lower()


def _properties(raw: RawStatement) -> tuple[dict[str, str], dict[str, Name]]:
    """Legacy keywords and PROPERTIES merged into one map (key -> value), plus where each value is."""
    props: dict[str, str] = {}
    where: dict[str, Name] = {}
    for keyword, value in raw.legacy:
        key = LEGACY_KEYWORDS[keyword.type]
        text = value.value.strip()
        if key == "partition.include.keys":
            mapped = {"values": "false", "keysandvalues": "true"}.get(text.lower())
            if mapped is None:
                raise _error(
                    raw,
                    value,
                    f"WITHPARTITIONER must be Values or KeysAndValues, not {text!r}",
                    ("Values", "KeysAndValues"),
                )
            text = mapped
        _put(raw, props, where, key, text, value, f"{keyword.type}")
    for key_name, value in raw.properties:
        key = key_name.value.strip().lower()
        if key not in KNOWN_PROPERTIES and not _padding_length_field(key):
            raise _error(raw, key_name, _unknown_property(key), KNOWN_PROPERTIES)
        _put(raw, props, where, key, value.value, value, f"'{key}'")
    return props, where


def _padding_length_field(key: str) -> str:
    """``offset`` for ``padding.length.offset``: Lenses 5.x-11.x read every ``padding.length.<field>``
    key into one map (``getOptionalMap(PaddingLength, ...)``); ``""`` when ``key`` is not one."""
    return key.removeprefix(_PADDING_LENGTH) if key.startswith(_PADDING_LENGTH) else ""


_MISPLACED_PROPERTIES = {
    "padding.length": (
        "padding.length needs a field: 'padding.length.offset'=n or 'padding.length.partition'=n "
        "(Lenses reads only padding.length.<field> keys and silently ignores a bare padding.length; "
        "the connector-wide setting is connect.s3.padding.length)"
    ),
    "skip.null.values": (
        "skip.null.values is not a KCQL property (Lenses 8.1.28+ reads it only from the connector "
        "config and ignores it in PROPERTIES, so tombstones would still be written); set "
        "connect.s3.skip.null.values=true in the connector config"
    ),
}


def _unknown_property(key: str) -> str:
    return _MISPLACED_PROPERTIES.get(key) or (
        f"unknown property {key!r}; known properties: {', '.join(KNOWN_PROPERTIES)}"
    )


def _put(
    raw: RawStatement,
    props: dict[str, str],
    where: dict[str, Name],
    key: str,
    text: str,
    at: Name,
    label: str,
) -> None:
    if key in props:
        if not _same(key, props[key], text):
            raise _error(
                raw,
                at,
                f"{label} sets {key} to {text!r} but the statement already sets it to {props[key]!r}",
            )
        return
    props[key] = text
    where[key] = at


def _positive(
    raw: RawStatement, props: dict[str, str], where: dict[str, Name], key: str, default: int
) -> int:
    if key not in props:
        return default
    text = props[key].strip()
    if not _DIGITS.fullmatch(text) or int(text) <= 0:
        raise _error(raw, where[key], f"{key} must be a positive whole number, not {props[key]!r}")
    return int(text)


def _int(raw: RawStatement, props: dict[str, str], where: dict[str, Name], key: str) -> int | None:
    if key not in props:
        return None
    text = props[key].strip()
    if not re.fullmatch(r"-?[0-9]+", text):
        raise _error(raw, where[key], f"{key} must be a whole number, not {props[key]!r}")
    return int(text)


def _bool(
    raw: RawStatement, props: dict[str, str], where: dict[str, Name], key: str, *, exact: bool = False
) -> bool | None:
    if key not in props:
        return None
    text = props[key].strip()
    candidate = text if exact else text.lower()
    if candidate not in ("true", "false"):
        raise _error(raw, where[key], f"{key} must be true or false, not {props[key]!r}", ("true", "false"))
    return candidate == "true"


def _upper_choice(
    raw: RawStatement, props: dict[str, str], where: dict[str, Name], key: str, choices: tuple[str, ...]
) -> str | None:
    if key not in props:
        return None
    value = props[key].strip().upper()
    if value not in choices:
        raise _error(
            raw, where[key], f"{key} must be one of {', '.join(choices)}, not {props[key]!r}", choices
        )
    return value


def _choice_naming(raw: RawStatement, props: dict[str, str], where: dict[str, Name]) -> FileNaming:
    if "file.naming" not in props:
        return FileNaming.LENSES
    value = props["file.naming"].strip().lower()
    try:
        return FileNaming(value)
    except ValueError:
        choices = tuple(n.value for n in FileNaming)
        raise _error(
            raw,
            where["file.naming"],
            f"file.naming must be one of {', '.join(choices)}, not {props['file.naming']!r}",
            choices,
        ) from None


def _key_suffix(raw: RawStatement, props: dict[str, str], where: dict[str, Name]) -> str:
    suffix = props.get("key.suffix", "")
    if "/" in suffix or "\\" in suffix:
        raise _error(
            raw,
            where["key.suffix"],
            f"key.suffix must not contain '/' or '\\' (it is part of a file name): {suffix!r}",
        )
    return suffix


def _include_keys(
    raw: RawStatement,
    props: dict[str, str],
    where: dict[str, Name],
    partition_by: tuple[PartitionField, ...] | None,
) -> bool:
    """``name=value`` (KeysAndValues) or value-only directories.

    With PARTITIONBY and nothing choosing, every Lenses S3 sink from 2.1 to 11.x uses KeysAndValues,
    in both dialects: ``Option(kcql.getWithPartitioner).fold(KeysAndValues)`` (2.1-4.x
    ``PartitionDisplay``), ``PartitionDisplay(kcql, props, KeysAndValues)`` (5.x-6.x) and
    ``PartitionDisplay(props, KeysAndValues)`` (7.x-11.x) in ``PartitionSelection``; their tests
    expect ``name=first/title=primary/`` for ``PARTITIONBY name,title WITH_FLUSH_COUNT = 2``. The
    Lenses article's "Values only [default]" is wrong.
    """
    explicit = _bool(raw, props, where, "partition.include.keys")
    legacy_only = not any(k.value.strip().lower() == "partition.include.keys" for k, _ in raw.properties)
    if explicit is not None and legacy_only and not partition_by:
        # Lenses 2.x-4.x: WITHPARTITIONER only shaped PARTITIONBY directories; the default layout
        # stayed topic/partition. (5.x-6.x applied it to the default layout too; only the property
        # switches it here, see README.)
        return False
    if explicit is not None:
        return explicit
    return bool(partition_by)


def _envelope(
    raw: RawStatement, props: dict[str, str], where: dict[str, Name], fmt: StoreFormat
) -> EnvelopeFields | None:
    # Lenses (DataStorageSettings.from): every flag must be exactly true/false, but the flags are
    # combined (all four or none, at least one true) only when the envelope is on; then the format.
    on = _bool(raw, props, where, "store.envelope", exact=True)
    flags = {k: _bool(raw, props, where, k, exact=True) for k in ENVELOPE_FIELD_KEYS}
    if not on:
        return None
    given = [k for k, v in flags.items() if v is not None]
    if given and len(given) != len(ENVELOPE_FIELD_KEYS):
        missing = [k for k in ENVELOPE_FIELD_KEYS if k not in given]
        raise _error(
            raw,
            where[given[0]],
            "store.envelope.fields.* must be set all four or none (setting selective fields is not "
            f"allowed); missing: {', '.join(missing)}",
        )
    if given and not any(flags.values()):
        raise _error(raw, where[given[0]], "at least one of store.envelope.fields.* must be true")
    if not fmt.supports_envelope:
        raise _error(raw, where["store.envelope"], f"Envelope is not supported for format {fmt.value}.")
    if not given:
        return EnvelopeFields()
    return EnvelopeFields(
        key=bool(flags[ENVELOPE_FIELD_KEYS[0]]),
        value=bool(flags[ENVELOPE_FIELD_KEYS[1]]),
        headers=bool(flags[ENVELOPE_FIELD_KEYS[2]]),
        metadata=bool(flags[ENVELOPE_FIELD_KEYS[3]]),
    )


def _padding(raw: RawStatement, props: dict[str, str], where: dict[str, Name]) -> Padding:
    ptype: Literal["LeftPad", "RightPad", "NoOp"] = "LeftPad"
    if "padding.type" in props:
        found = _PADDING_TYPES.get(props["padding.type"].strip().lower())
        if found is None:
            raise _error(
                raw,
                where["padding.type"],
                f"padding.type must be LeftPad, RightPad or NoOp, not {props['padding.type']!r}",
                ("LeftPad", "RightPad", "NoOp"),
            )
        ptype = cast(Literal["LeftPad", "RightPad", "NoOp"], found)
    char = props.get("padding.char", "0")
    if len(char) != 1:
        raise _error(raw, where["padding.char"], f"padding.char must be exactly one character, not {char!r}")
    # Lenses 5.x-11.x (PaddingService): every padding.length.<field> goes into one map, read with
    # String.toInt (no trimming; a malformed number fails the connector). When the map is not empty
    # it replaces the default {offset: 12}: only the listed fields are padded, and only offset and
    # partition are ever asked for, so padding.length.topic=3 alone just stops offset padding.
    lengths: dict[str, int | None] = {}
    for key, text in props.items():
        name = _padding_length_field(key)
        if not name:
            continue
        if not _PADDING_LENGTH_VALUE.fullmatch(text):
            raise _error(raw, where[key], f"{key} must be a whole number, not {text!r}")
        length = int(text)
        if length > _MAX_PADDING:
            raise _error(
                raw,
                where[key],
                f"{key} must be at most {_MAX_PADDING} (an S3 object key is at most 1024 bytes), "
                f"not {length}",
            )
        lengths[name] = length if length > 0 else None  # a length <= 0 pads nothing (padTo)
    if lengths:
        return Padding(ptype, char, lengths.get("offset"), lengths.get("partition"))
    return Padding(ptype, char)
