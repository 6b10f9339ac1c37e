"""KCQL's ``SELECT`` list and ``IGNORE``, applied: the written value has exactly the projected fields.

Lenses' S3 sink parses the projection and writes the whole value anyway; kcql-sink applies it,
unless the statement sets ``PROPERTIES('projection.enabled'=false)`` (configs moved over from
Lenses unchanged then write what Lenses writes). The rules:

* entries give the written value's fields in order, each named by its alias, else by the last
  segment of its path (``a.b`` → ``b``), else by its source (``_key`` → ``key``, ``_.topic`` →
  ``topic``, ``_.offset`` → ``offset``...);
* ``*`` copies every field of the value, ``f.*`` every field of struct ``f``, ``_key.*`` every
  field of the key, at the top level;
* a path missing from a schemaless value (JSON without schema) is written as null, since such
  documents are sparse; a path that is not in the value's schema, or that runs through something
  that is not a struct, is a record error (stage TRANSFORMATION);
* ``IGNORE`` removes fields of the result (``a``, ``a.b``, ``f.*``);
* two entries giving one name is a configuration error; a wildcard colliding with another entry
  is a record error (the name depends on the record).

With a value schema (Avro, JSON with ``schemas.enable``) the projected value gets the matching
Avro record schema, so AVRO and PARQUET files have exactly the projected columns.

Projection happens after partitioning: ``PARTITIONBY`` may use any field of the record, as SQL's
``SELECT`` does not limit what ``WHERE`` reads, and Hive-style layouts keep the partition
columns in the directories rather than in the files.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kcql.errors import ConfigError, ConfigProblem, RecordError
from kcql.model import SelectField, SinkPlan
from sink.records.batch import RecordBatch
from sink.records.record import Schema, SinkRecord

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["PROJECTION_PROPERTY", "Projection", "compile_projection"]

Columns = tuple[Schema, "pa.Schema", Callable[["pa.RecordBatch"], "pa.RecordBatch"]]
"""The projected writer schema, its Arrow schema, and decoded Avro columns → projected ones."""

PROJECTION_PROPERTY = "projection.enabled"
"""The KCQL property that turns projection off (``false``: write every field, as Lenses does)."""

_METADATA_SCHEMAS: dict[str, Schema] = {
    "topic": "string",
    "partition": "int",
    "offset": "long",
    "timestamp": ["null", {"type": "long", "logicalType": "timestamp-millis"}],
}
_MISSING = object()
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    field: SelectField
    name: str | None
    """The output name; ``None`` for a wildcard (named by the fields it expands to)."""


class Projection:
    """One statement's projection; :meth:`apply` reshapes a record's value (and schema)."""

    def __init__(self, plan: SinkPlan, entries: list[_Entry], ignore: list[tuple[str, ...]]) -> None:
        self.plan = plan
        self._entries = entries
        self._ignore = ignore
        self._static = all(e.field.source in ("value", *_METADATA_SCHEMAS) for e in entries)
        """The output schema depends on the value schema alone (no key or header entries)."""
        self._schemas: dict[int, tuple[Schema, Schema | None]] = {}
        """id(value schema) -> (it, the projected schema): one schema object per source schema,
        so formats see the same object for every record of it (and compare nothing)."""
        self._arrow: dict[int, tuple[Any, Columns | None]] = {}
        self._plain: list[tuple[str, str]] | None = None
        """``(written name, value field)`` when every entry is a top-level value field and there
        is no IGNORE: schemaless values then take :meth:`_apply_plain`, a dict built in one go."""
        if not ignore and all(
            e.field.source == "value" and len(e.field.path) == 1 and not e.field.is_wildcard for e in entries
        ):
            self._plain = [(e.name or e.field.path[0], e.field.path[0]) for e in entries]

    def apply(self, record: SinkRecord) -> SinkRecord:
        """``record`` with its value projected.

        Raises:
            RecordError: (stage ``TRANSFORMATION``) a path is not in the value's schema, runs
                through a non-struct, or a wildcard gives a name another entry gives.
        """
        if self._plain is not None and record.value_schema is None and type(record.value) is dict:
            return self._apply_plain(record)
        return self._apply(record)

    def _apply_plain(self, record: SinkRecord) -> SinkRecord:
        """The common case on the hot path: top-level fields of a schemaless value, renamed or not
        (what :meth:`_apply` gives for it, without the general walk: ~6x faster)."""
        value = record.value
        projected = {name: value.get(source) for name, source in self._plain}  # type: ignore[union-attr]
        return SinkRecord(
            record.topic, record.partition, record.offset, record.timestamp, record.key, projected,
            record.headers, record.key_schema, None, None,
        )

    def _apply(self, record: SinkRecord) -> SinkRecord:
        typed = record.value_schema is not None
        value: dict[str, Any] = {}
        fields: list[dict[str, Any]] = []
        for entry in self._entries:
            for name, item, schema in self._expand(record, entry, typed):
                if name in value:
                    raise _error(record, f"two SELECT entries give the field {name!r} (use AS to rename one)")
                value[name] = item
                if typed:
                    fields.append(_avro_field(name, schema))
        schema_out: Schema | None = None
        if typed:
            schema_out = {"type": "record", "name": _record_name(record.value_schema), "fields": fields}
        for path in self._ignore:
            value, schema_out = _drop(value, schema_out, path)
        if typed and self._static:
            schema_out = self._same_schema(record.value_schema, schema_out)
        return dataclasses.replace(record, value=value, value_schema=schema_out, raw_value=None)

    def _same_schema(self, source: Schema | None, projected: Schema | None) -> Schema | None:
        hit = self._schemas.get(id(source))
        if hit is not None and hit[0] is source:
            return hit[1]
        if len(self._schemas) >= 256:  # a converter that builds a schema object per record
            self._schemas.clear()
        self._schemas[id(source)] = (source, projected)  # type: ignore[assignment]
        return projected

    def batch(self, part: RecordBatch) -> RecordBatch:
        """``part`` projected: records when first read, decoded Avro columns when a format asks
        and the projection is a choice of top-level fields (:meth:`columns_of`)."""
        return part.mapped(self.apply, self._columns)

    def _columns(self, writer: Any) -> Columns | None:
        hit = self._arrow.get(id(writer))
        if hit is not None and hit[0] is writer:
            return hit[1]
        found = self.columns_of(writer)
        columns: Columns | None = None
        if found is not None:
            from formats.arrow_schema import avro_to_arrow

            schema, pairs = found
            arrow_schema = avro_to_arrow(schema)
            sources = [source for source, _ in pairs]

            def select(batch: pa.RecordBatch) -> pa.RecordBatch:
                import pyarrow as pa

                arrays = [batch.column(name) for name in sources]
                return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema)

            columns = (schema, arrow_schema, select)
        self._arrow[id(writer)] = (writer, columns)
        return columns

    def columns_of(self, value_schema: Schema) -> tuple[Schema, list[tuple[str, str]]] | None:
        """For the Arrow fast path: the projected schema of ``value_schema`` and the
        ``(source column, written name)`` pairs that give it, when the projection is a choice of
        top-level value fields (renamed or not) and nothing else; ``None`` otherwise."""
        if self._ignore or not all(
            e.field.source == "value" and len(e.field.path) == 1 and not e.field.is_wildcard
            for e in self._entries
        ):
            return None
        probe = SinkRecord(topic="", partition=0, offset=-1, value={}, value_schema=value_schema)
        try:
            schema = self.apply(probe).value_schema
        except RecordError:
            return None  # a field is not in this schema: the per-record path says which record
        assert schema is not None  # noqa: S101 - typed in, typed out
        return schema, [(e.field.path[0], e.name or e.field.path[0]) for e in self._entries]

    def _expand(self, record: SinkRecord, entry: _Entry, typed: bool) -> list[tuple[str, Any, Schema | None]]:
        field = entry.field
        source = field.source
        if source in _METADATA_SCHEMAS:
            assert entry.name is not None  # noqa: S101 - metadata entries are named
            item = getattr(record, source)
            if source == "timestamp" and typed and item is not None:  # a timestamp-millis value
                item = _EPOCH + dt.timedelta(milliseconds=item)
            return [(entry.name, item, _METADATA_SCHEMAS[source])]
        if source == "header":
            found: Any = None
            for header, header_value in record.headers:  # the last one wins, as Connect's lastWithName
                if header == field.path[0]:
                    found = header_value
            item, schema = _walk(record, found, None, field.path[1:], schemaless=True)
            assert entry.name is not None  # noqa: S101
            return [(entry.name, item, schema if schema is not None else _guess(item))]
        if source == "key":
            root, root_schema = record.key, record.key_schema
        else:
            root, root_schema = record.value, record.value_schema
        schemaless = root_schema is None
        path = field.path[:-1] if field.is_wildcard else field.path
        item, schema = _walk(record, root, root_schema, path, schemaless=schemaless)
        if not field.is_wildcard:
            assert entry.name is not None  # noqa: S101
            if typed and schema is None:
                schema = _guess(item)
            return [(entry.name, item, schema)]
        if item is None and (schema is None or not typed):
            return []
        if item is not None and not isinstance(item, dict):
            raise _error(
                record, f"{field.name} selects the fields of a {type(item).__name__}, not of a struct"
            )
        if schema is None:
            return [(k, v, _guess(v) if typed else None) for k, v in (item or {}).items()]
        rec = _record_of(schema)
        if rec is None:
            raise _error(record, f"{field.name} selects the fields of what its schema says is not a struct")
        return [(f["name"], None if item is None else item.get(f["name"]), f) for f in rec["fields"]]


def compile_projection(plan: SinkPlan) -> Projection | None:
    """The projection ``plan`` asks for; ``None`` for ``SELECT *`` without IGNORE, or when off.

    Raises:
        ConfigError: two entries give one field name; an IGNORE entry names no value field.
    """
    if not plan.projection:
        return None
    fields = plan.fields or (SelectField("*", None, "value", ("*",)),)
    if fields == (SelectField("*", None, "value", ("*",)),) and not plan.ignore:
        return None
    problems: list[ConfigProblem] = []
    entries: list[_Entry] = []
    seen: set[str] = set()
    for field in fields:
        name = field.output_name
        if name is not None:
            if name in seen:
                problems.append(
                    ConfigProblem(
                        "connect.s3.kcql",
                        plan.statement or plan.source,
                        f"two SELECT entries give the field {name!r}; rename one with AS",
                    )
                )
            seen.add(name)
        entries.append(_Entry(field, name))
    ignore: list[tuple[str, ...]] = []
    for spec in plan.ignore:
        path = spec.split(".")
        if path[0] in ("_key", "_header") or path[0].startswith("_."):
            problems.append(
                ConfigProblem(
                    "connect.s3.kcql",
                    plan.statement or plan.source,
                    f"IGNORE {spec!r}: IGNORE removes fields of the written value, not of the key or headers",
                )
            )
            continue
        if path[0] == "_value":
            path = path[1:]
        if path[-1:] == ["*"]:
            path = path[:-1]
        if path:
            ignore.append(tuple(path))
    if problems:
        raise ConfigError(problems)
    return Projection(plan, entries, ignore)


def _record_of(schema: Schema | None) -> dict[str, Any] | None:
    """The record schema inside ``schema`` (through an optional union), or ``None``."""
    if isinstance(schema, list):
        others = [s for s in schema if s != "null"]
        schema = others[0] if len(others) == 1 else None
    if isinstance(schema, dict) and schema.get("type") == "record":
        return schema
    return None


def _walk(
    record: SinkRecord, item: Any, schema: Schema | None, path: tuple[str, ...], *, schemaless: bool
) -> tuple[Any, Schema | None]:
    """The value (and, with a schema, its schema) at ``path`` under ``item``."""
    walked: list[str] = []
    for segment in path:
        parent = ".".join(walked) or "the value"
        walked.append(segment)
        if schemaless:
            if item is None:
                return None, None
            if not isinstance(item, dict):
                raise _error(record, f"{parent} is a {type(item).__name__}, not a struct")
            item = item.get(segment)
            continue
        rec = _record_of(schema)
        if rec is None:
            raise _error(record, f"{parent} is not a struct in its schema")
        match = next((f for f in rec["fields"] if f["name"] == segment), None)
        if match is None:
            known = ", ".join(f["name"] for f in rec["fields"])
            raise _error(record, f"field {'.'.join(walked)!r} is not in the schema (its fields: {known})")
        schema = match["type"]
        item = item.get(segment) if isinstance(item, dict) else None
    return item, schema


def _avro_field(name: str, schema: Schema | dict[str, Any] | None) -> dict[str, Any]:
    """The output field ``name`` of type ``schema`` (or of the source field ``schema``)."""
    if (
        isinstance(schema, dict)
        and "name" in schema
        and "type" in schema
        and schema.get("type") not in ("record", "enum", "fixed")
    ):
        out = {"name": name, "type": copy.deepcopy(schema["type"])}  # a source field: keep its default
        if "default" in schema:
            out["default"] = schema["default"]
        return out
    field: dict[str, Any] = {"name": name, "type": copy.deepcopy(schema) if schema is not None else "null"}
    if isinstance(field["type"], list) and field["type"][:1] == ["null"]:
        field["default"] = None
    return field


def _guess(item: Any) -> Schema:
    """An optional Avro type for a value that came without a schema (a header, a plain key)."""
    if isinstance(item, bool):
        kind = "boolean"
    elif isinstance(item, int):
        kind = "long"
    elif isinstance(item, float):
        kind = "double"
    elif isinstance(item, bytes):
        kind = "bytes"
    else:
        kind = "string"
    return ["null", kind]


def _record_name(schema: Schema | None) -> str:
    rec = _record_of(schema)
    name = rec.get("name") if rec else None
    return name if isinstance(name, str) and name else "Projection"


def _drop(value: Any, schema: Schema | None, path: tuple[str, ...]) -> tuple[Any, Schema | None]:
    """``value`` (and ``schema``) without the field at ``path`` (copies what it changes)."""
    if not isinstance(value, dict):
        return value, schema
    head, rest = path[0], path[1:]
    rec = _record_of(schema) if schema is not None else None
    value = dict(value)
    if not rest:
        value.pop(head, None)
        if rec is not None:
            rec = {**rec, "fields": [f for f in rec["fields"] if f["name"] != head]}
            schema = _rewrap(schema, rec)
        return value, schema
    inner = value.get(head, _MISSING)
    if inner is _MISSING:
        return value, schema
    inner_schema = None
    if rec is not None:
        inner_schema = next((f["type"] for f in rec["fields"] if f["name"] == head), None)
    new_inner, new_inner_schema = _drop(inner, inner_schema, rest)
    value[head] = new_inner
    if rec is not None and new_inner_schema is not None:
        rec = {
            **rec,
            "fields": [{**f, "type": new_inner_schema} if f["name"] == head else f for f in rec["fields"]],
        }
        schema = _rewrap(schema, rec)
    return value, schema


def _rewrap(original: Schema | None, rec: dict[str, Any]) -> Schema:
    """``rec`` in place of the record inside ``original`` (keeps an optional union)."""
    if isinstance(original, list):
        return [rec if _record_of(s) is not None else s for s in original]
    return rec


def _error(record: SinkRecord, why: str) -> RecordError:
    return RecordError(
        f"the KCQL projection failed on the record at {record.where}: {why}",
        offset=record.offset,
        stage="TRANSFORMATION",
    )
