"""Avro schemas inferred from schemaless values (JSON without schemas, plain dicts).

Lenses refuses schemaless data for AVRO and PARQUET ("Schema-less data is not supported"). We infer
a schema per file instead, so ``value.converter.schemas.enable=false`` topics can still be stored
as AVRO or PARQUET:

* ``None`` -> ``"null"``; ``bool`` -> ``boolean``; ``int`` -> ``long``; ``float`` -> ``double``;
  ``str`` -> ``string``; ``bytes`` -> ``bytes``; ``Decimal`` -> ``decimal(38, scale)``;
  ``datetime`` -> ``timestamp-millis``; ``date`` -> ``date``; ``dict`` -> a record (fields in
  first-appearance order); ``list`` -> an array whose item type merges every item.
* Every record field is nullable (``["null", T]``, default ``null``), so a later record that lacks
  a field or holds ``null`` still fits the file's schema.
* The writer merges the schemas of the records it buffers before the file's schema is fixed (a
  field first seen in the 2nd record is still a column); ``long`` and ``double`` merge to
  ``double``; anything else that conflicts (``string`` vs ``long``) cannot share a file, and the
  record starts a new one, exactly like a schema change.

Record names are derived from the field path (``Value``, ``Value_address``) so they are unique.
Field names are kept as they are; :func:`avro_names` sanitizes them for Avro separately.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from decimal import Decimal
from typing import Any

__all__ = [
    "IncompatibleSchemas",
    "avro_names",
    "desanitize_name",
    "infer",
    "merge",
    "rename_for_avro",
    "sanitize_name",
]

_TIMESTAMP = {"type": "long", "logicalType": "timestamp-millis"}
_DATE = {"type": "int", "logicalType": "date"}
_NUMERIC_WIDENING = {frozenset(("long", "double")): "double"}


class IncompatibleSchemas(ValueError):
    """Two inferred schemas cannot describe one file (``string`` vs ``long`` at the same path)."""


def _decimal_schema(value: Decimal) -> dict[str, Any]:
    exponent = value.as_tuple().exponent
    scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
    return {"type": "bytes", "logicalType": "decimal", "precision": 38, "scale": min(scale, 38)}


def infer(value: Any, name: str = "Value") -> Any:
    """The Avro schema of one Python value. ``name`` names records (``Value_<field>`` below it).

    Raises:
        IncompatibleSchemas: the value holds something with no Avro equivalent, or a list mixes
            incompatible item types.
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return "long"
        raise IncompatibleSchemas(f"integer {value} does not fit a 64-bit long")
    if isinstance(value, float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bytes | bytearray | memoryview):
        return "bytes"
    if isinstance(value, Decimal):
        return _decimal_schema(value)
    if isinstance(value, datetime):
        return dict(_TIMESTAMP)
    if isinstance(value, date):
        return dict(_DATE)
    if isinstance(value, dict):
        fields = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise IncompatibleSchemas(f"map key {key!r} at {name} is not a string")
            fields.append({"name": key, "type": _nullable(infer(item, f"{name}_{key}")), "default": None})
        return {"type": "record", "name": name, "fields": fields}
    if isinstance(value, list | tuple):
        items: Any = None
        for item in value:
            schema = infer(item, f"{name}_item")
            items = schema if items is None else merge(items, schema)
        # items of an empty list are "null" until a later record shows them (merge makes them nullable)
        return {"type": "array", "items": "null" if items is None else items}
    raise IncompatibleSchemas(f"a value of type {type(value).__name__} at {name} has no Avro type")


def _nullable(schema: Any) -> Any:
    if schema == "null" or isinstance(schema, list):
        return schema
    return ["null", schema]


def merge(a: Any, b: Any) -> Any:
    """The narrowest schema that describes values of both ``a`` and ``b``.

    Raises:
        IncompatibleSchemas: no such schema among the shapes :func:`infer` produces.
    """
    if a == b:
        return a
    if a == "null":
        return b if isinstance(b, list) or b == "null" else ["null", b]
    if b == "null":
        return merge(b, a)
    if isinstance(a, list) or isinstance(b, list):
        inner = merge(_strip_null(a), _strip_null(b))
        return _nullable(inner)
    if isinstance(a, str) and isinstance(b, str):
        widened = _NUMERIC_WIDENING.get(frozenset((a, b)))
        if widened:
            return widened
        raise IncompatibleSchemas(f"{a} and {b} at the same place")
    if isinstance(a, dict) and isinstance(b, dict) and a.get("type") == b.get("type"):
        kind = a["type"]
        if kind == "record":
            fields = {f["name"]: f for f in a["fields"]}
            out = [dict(f) for f in a["fields"]]
            index = {f["name"]: i for i, f in enumerate(out)}
            for field in b["fields"]:
                if field["name"] in fields:
                    out[index[field["name"]]]["type"] = merge(fields[field["name"]]["type"], field["type"])
                else:
                    out.append(dict(field))
            return {"type": "record", "name": a["name"], "fields": out}
        if kind == "array":
            return {"type": "array", "items": merge(a["items"], b["items"])}
        if a.get("logicalType") == "decimal" and b.get("logicalType") == "decimal":
            return a if a["scale"] >= b["scale"] else b
    raise IncompatibleSchemas(f"{_describe(a)} and {_describe(b)} at the same place")


def _strip_null(schema: Any) -> Any:
    if isinstance(schema, list):
        rest = [s for s in schema if s != "null"]
        return rest[0] if len(rest) == 1 else "null"
    return schema


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        return str(schema.get("logicalType") or schema.get("type"))
    return str(schema)


_VALID_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_ESCAPE = re.compile(r"[^A-Za-z0-9_]|_(?=x(?:[0-9A-F]{2,6})?_)")
_LOOKS_ESCAPED = re.compile(r"_x(?:[0-9A-F]{2,6})?_")
_UNESCAPE = re.compile(r"_x([0-9A-F]{2,6})_")


def sanitize_name(name: str) -> str:
    """An Avro-valid field name for ``name``, reversible with :func:`desanitize_name`.

    Valid names are returned unchanged. Otherwise every character outside ``[A-Za-z0-9_]`` becomes
    ``_x<HEX>_`` (its code point, upper-case hex), as does a ``_`` that would otherwise read as the
    start of such an escape (or of ``_x_``, the empty name); a leading digit is escaped too. ``"trace-id"`` ->
    ``"trace_x2D_id"``, ``"1st"`` -> ``"_x31_st"``, ``""`` -> ``"_x_"``.
    """
    if _VALID_NAME.match(name) and not _LOOKS_ESCAPED.search(name):
        return name
    if not name:
        return "_x_"
    out = _ESCAPE.sub(lambda m: f"_x{ord(m.group(0)):02X}_", name)
    if out[0].isdigit():
        out = f"_x{ord(out[0]):02X}_{out[1:]}"
    return out


def desanitize_name(name: str) -> str:
    """The original of a :func:`sanitize_name` result."""
    if name == "_x_":
        return ""
    return _UNESCAPE.sub(lambda m: chr(int(m.group(1), 16)), name)


def avro_names(schema: Any) -> tuple[Any, bool]:
    """``schema`` with every record field name sanitized; the flag says whether any changed.

    The original name is kept in the field's ``"kcql.name"`` property, so readers that look at the
    schema can show it, and :func:`desanitize_name` recovers it from the Avro name alone.
    """
    if isinstance(schema, list):
        pairs = [avro_names(s) for s in schema]
        return [p[0] for p in pairs], any(p[1] for p in pairs)
    if not isinstance(schema, dict):
        return schema, False
    kind = schema.get("type")
    if kind == "record":
        changed = False
        fields = []
        for field in schema["fields"]:
            inner, inner_changed = avro_names(field["type"])
            new = {**field, "type": inner}
            safe = sanitize_name(field["name"])
            if safe != field["name"]:
                new["name"] = safe
                new["kcql.name"] = field["name"]
                changed = True
            fields.append(new)
            changed = changed or inner_changed
        return {**schema, "name": sanitize_name(schema["name"]), "fields": fields}, changed
    if kind == "array":
        items, changed = avro_names(schema["items"])
        return {**schema, "items": items}, changed
    if kind == "map":
        values, changed = avro_names(schema["values"])
        return {**schema, "values": values}, changed
    return schema, False


def rename_for_avro(value: Any, schema: Any) -> Any:
    """``value`` (inferred from ``schema`` before sanitizing) with dict keys renamed to Avro names."""
    if isinstance(value, dict):
        return {sanitize_name(k): rename_for_avro(v, None) for k, v in value.items()}
    if isinstance(value, list):
        return [rename_for_avro(v, None) for v in value]
    return value
