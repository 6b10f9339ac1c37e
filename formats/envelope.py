"""The envelope: one row per record holding ``key``, ``value``, ``headers`` and ``metadata``.

With ``store.envelope=true`` (JSON, AVRO and PARQUET only) each record becomes::

    {key, value, headers, metadata: {timestamp, topic, partition, offset}}

restricted to the ``store.envelope.fields.*`` that are enabled. Key and value are always nullable,
so tombstones (``value`` null) and null keys are written, never dropped.

Headers have two shapes:

* JSON keeps the Lenses shape, an object ``{"name": value, ...}``; a name that occurs more than once
  maps to a JSON array of its values in arrival order, so no header is lost.
* AVRO and PARQUET use one fixed type for every record, an array of
  ``{name: string, value: string|null, value_bytes: bytes|null}`` in arrival order (repeated names
  kept). ``value`` holds string headers as is and other converted values (numbers, booleans,
  decimals, structs) as JSON text; ``value_bytes`` holds byte-array headers. Because the type never
  depends on which headers a record has, header-set changes never start a new file (unlike Lenses,
  which builds a struct per header set: their issue #1654), and header names are data, not Avro
  names, so names such as ``trace-id`` need no sanitizing (Lenses issues #1822, #2136).
"""

from __future__ import annotations

import base64
from typing import Any

from formats.avro_schemas import make_nullable
from formats.base import Record
from formats.json_values import dumps
from kcql.model import EnvelopeFields

Headers = tuple[tuple[str, Any], ...]
Schema = Any

__all__ = [
    "HEADER_SCHEMA",
    "METADATA_SCHEMA",
    "envelope_avro_schema",
    "envelope_row",
    "header_entries",
    "json_envelope",
    "json_headers",
]

HEADER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Header",
    "namespace": "kcql_sink.envelope",
    "fields": [
        {"name": "name", "type": "string"},
        {"name": "value", "type": ["null", "string"], "default": None},
        {"name": "value_bytes", "type": ["null", "bytes"], "default": None},
    ],
}
"""One Kafka header in AVRO/PARQUET envelopes (see the module docstring)."""

METADATA_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Metadata",
    "namespace": "kcql_sink.envelope",
    "fields": [
        # epoch milliseconds as a plain long, like Lenses; null when the record has no timestamp
        {"name": "timestamp", "type": ["null", "long"], "default": None},
        {"name": "topic", "type": "string"},
        {"name": "partition", "type": "int"},
        {"name": "offset", "type": "long"},
    ],
}


def envelope_avro_schema(
    key_schema: Schema | None, value_schema: Schema | None, fields: EnvelopeFields
) -> dict[str, Any]:
    """The Avro record schema of an envelope row, given the (already known) key and value schemas."""
    out: list[dict[str, Any]] = []
    if fields.key and fields.value and key_schema is not None and value_schema is not None:
        defined: dict[str, Any] = {}
        _dedupe_names(key_schema, "", defined, rename=False)
        value_schema = _dedupe_names(value_schema, "", defined, rename=True)
    if fields.key:
        out.append({"name": "key", "type": make_nullable(key_schema or "null"), "default": None})
    if fields.value:
        out.append({"name": "value", "type": make_nullable(value_schema or "null"), "default": None})
    if fields.headers:
        out.append({"name": "headers", "type": {"type": "array", "items": HEADER_SCHEMA}, "default": []})
    if fields.metadata:
        out.append({"name": "metadata", "type": METADATA_SCHEMA})
    return {"type": "record", "name": "Envelope", "namespace": "kcql_sink.envelope", "fields": out}


def _dedupe_names(schema: Any, namespace: str, defined: dict[str, Any], rename: bool) -> Any:
    """Make the value schema's named types coexist with the key schema's in one Avro schema.

    Avro forbids defining a name twice. A type the key schema already defines identically becomes a
    reference; a different type with the same name moves to the ``kcql_sink.value`` namespace
    (names only: the data is unchanged).
    """
    if isinstance(schema, list):
        return [_dedupe_names(b, namespace, defined, rename) for b in schema]
    if not isinstance(schema, dict):
        return schema
    kind = schema.get("type")
    if kind in ("record", "error", "enum", "fixed"):
        name = schema["name"]
        ns = name.rsplit(".", 1)[0] if "." in name else schema.get("namespace", namespace)
        full = name if "." in name else (f"{ns}.{name}" if ns else name)
        if rename and full in defined:
            if defined[full] == schema:
                return full
            ns = f"kcql_sink.value.{ns}" if ns else "kcql_sink.value"
            short = name.rsplit(".", 1)[-1]
            schema = {**schema, "name": short, "namespace": ns}
            full = f"{ns}.{short}"
        defined[full] = schema
        if "fields" in schema:
            fields = [{**f, "type": _dedupe_names(f["type"], ns, defined, rename)} for f in schema["fields"]]
            schema = {**schema, "fields": fields}
        return schema
    if kind == "array":
        return {**schema, "items": _dedupe_names(schema["items"], namespace, defined, rename)}
    if kind == "map":
        return {**schema, "values": _dedupe_names(schema["values"], namespace, defined, rename)}
    if isinstance(kind, dict | list):
        return {**schema, "type": _dedupe_names(kind, namespace, defined, rename)}
    return schema


def header_entries(headers: Headers) -> list[dict[str, Any]]:
    """Headers as the fixed AVRO/PARQUET entry type: ``[{name, value, value_bytes}, ...]``."""
    entries: list[dict[str, Any]] = []
    for name, value in headers:
        if value is None or isinstance(value, str):
            entries.append({"name": name, "value": value, "value_bytes": None})
        elif isinstance(value, bytes | bytearray | memoryview):
            entries.append({"name": name, "value": None, "value_bytes": bytes(value)})
        else:
            entries.append({"name": name, "value": dumps(value), "value_bytes": None})
    return entries


def envelope_row(record: Record, fields: EnvelopeFields, value: Any = None) -> dict[str, Any]:
    """The envelope of ``record`` as a plain dict for fastavro / pyarrow.

    ``value`` overrides ``record.value`` (used when the value was projected onto the file schema).
    """
    row: dict[str, Any] = {}
    if fields.key:
        row["key"] = record.key
    if fields.value:
        row["value"] = record.value if value is None else value
    if fields.headers:
        row["headers"] = header_entries(record.headers) if record.headers else []
    if fields.metadata:
        row["metadata"] = {
            "timestamp": record.timestamp,
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
        }
    return row


def json_headers(headers: Headers) -> dict[str, Any]:
    """Headers as a JSON object (Lenses shape); repeated names collect their values in a list."""
    out: dict[str, Any] = {}
    repeated: set[str] = set()
    for name, value in headers:
        if name in out:
            if name not in repeated:
                out[name] = [out[name]]
                repeated.add(name)
            out[name].append(value)
        else:
            out[name] = value
    return out


def _json_part(name: str, value: Any, raw: bytes | None, parts: list[str]) -> None:
    if isinstance(value, bytes | bytearray | memoryview):
        # Lenses (Jackson) writes byte arrays base64 and flags them so a restore can decode them
        parts.append(f'"{name}":"{base64.b64encode(value).decode("ascii")}","{name}IsArray":true')
    elif raw is not None:
        parts.append(f'"{name}":{raw.decode("utf-8")}')
    else:
        parts.append(f'"{name}":{dumps(value)}')


def json_envelope(record: Record, fields: EnvelopeFields, raw_value: bytes | None = None) -> str:
    """One JSON envelope document (no trailing newline).

    ``raw_value`` is the value's JSON text when it can be spliced in as is (no newline), which
    avoids re-encoding values that arrived as JSON.
    """
    parts: list[str] = []
    if fields.key:
        _json_part("key", record.key, None, parts)
    if fields.value:
        _json_part("value", record.value, raw_value, parts)
    if fields.headers:
        parts.append(f'"headers":{dumps(json_headers(record.headers))}')
    if fields.metadata:
        meta: dict[str, Any] = {}
        if record.timestamp is not None:  # Lenses omits the timestamp when the record has none
            meta["timestamp"] = record.timestamp
        meta["topic"] = record.topic
        meta["partition"] = record.partition
        meta["offset"] = record.offset
        parts.append(f'"metadata":{dumps(meta)}')
    return "{" + ",".join(parts) + "}"
