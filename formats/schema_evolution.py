"""When a record's schema differs from the open file's: same file (projected) or a new file.

Confluent's ``schema.compatibility`` semantics (``StorageSchemaCompatibility``), applied per file:

* ``NONE``: any schema that is not equal to the file's starts a new file.
* ``BACKWARD`` / ``FULL``: a record with an *older* schema that the file's (newer) schema can read
  is projected onto the file's schema (missing fields take their defaults); a *newer* schema
  starts a new file, which then has the newer schema.
* ``FORWARD``: the other way round: a *newer* record the file's (older) schema can read is
  projected onto it (its extra fields are dropped, as in Confluent); an older one starts a file.

"Older/newer" comes from the schema version when both schemas carry one (``connect.version``, as
Confluent's AvroData writes it, or ``version``). Without versions we decide by the top-level field
names, so that BACKWARD never loses data: a record is older when its fields are a subset of the
file's (and newer when a superset). "Can read" is Avro schema resolution (promotions
int->long->float->double, string<->bytes, unions, defaults for missing fields, enum symbols).
Anything else starts a new file: a new file is always safe, a wrong projection is data loss.

Decisions are cached per schema object, because converters hand out the same schema object for
every record of a schema id; the per-record cost is then one dict lookup.
"""

from __future__ import annotations

from enum import Enum
from typing import Any

__all__ = ["Decision", "SchemaEvolution", "can_read", "project"]

_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "double": {"double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


_CACHE_LIMIT = 256


class Decision(Enum):
    SAME = "same"
    PROJECT = "project"
    ROLL = "roll"


def _named(schema: Any, names: dict[str, Any], namespace: str = "") -> None:
    """Collect named types (records, enums, fixed) so string references can be resolved."""
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, names, namespace)
    elif isinstance(schema, dict):
        kind = schema.get("type")
        if kind in ("record", "error", "enum", "fixed"):
            ns = schema.get("namespace", namespace)
            name = schema["name"]
            full = name if "." in name or not ns else f"{ns}.{name}"
            names[full] = schema
            names.setdefault(name, schema)
            for field in schema.get("fields", ()):
                _named(field["type"], names, ns)
        elif kind == "array":
            _named(schema["items"], names, namespace)
        elif kind == "map":
            _named(schema["values"], names, namespace)
        elif isinstance(kind, dict | list):
            _named(kind, names, namespace)


def _deref(schema: Any, names: dict[str, Any]) -> Any:
    if isinstance(schema, str) and schema in names:
        return names[schema]
    if isinstance(schema, dict) and isinstance(schema.get("type"), dict | list) and len(schema) == 1:
        return _deref(schema["type"], names)
    return schema


def _type(schema: Any) -> str:
    if isinstance(schema, list):
        return "union"
    if isinstance(schema, dict):
        inner = schema.get("type")
        return inner if isinstance(inner, str) else _type(inner)
    return str(schema)


def _logical(schema: Any) -> Any:
    return schema.get("logicalType") if isinstance(schema, dict) else None


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def can_read(reader: Any, writer: Any) -> bool:
    """Whether data written with ``writer`` can be read with ``reader`` (Avro schema resolution)."""
    rn: dict[str, Any] = {}
    wn: dict[str, Any] = {}
    _named(reader, rn)
    _named(writer, wn)
    return _can_read(reader, writer, rn, wn, set())


def _can_read(r: Any, w: Any, rn: dict[str, Any], wn: dict[str, Any], seen: set[tuple[str, str]]) -> bool:
    r = _deref(r, rn)
    w = _deref(w, wn)
    if isinstance(w, list):
        return all(_can_read(r, branch, rn, wn, seen) for branch in w)
    if isinstance(r, list):
        return any(_can_read(branch, w, rn, wn, seen) for branch in r)
    rt, wt = _type(r), _type(w)
    if _logical(r) != _logical(w):
        return False
    if _logical(r) == "decimal":
        return r.get("scale", 0) == w.get("scale", 0) and r.get("precision", 0) >= w.get("precision", 0)
    if rt == "record" and wt == "record":
        pair = (r["name"], w["name"])
        if _short(pair[0]) != _short(pair[1]):
            return False
        if pair in seen:  # recursive types: assume the cycle resolves
            return True
        seen = seen | {pair}
        wfields = {f["name"]: f for f in w["fields"]}
        for field in w["fields"]:
            for alias in field.get("aliases", ()):
                wfields.setdefault(alias, field)
        for field in r["fields"]:
            wf = wfields.get(field["name"])
            if wf is None:
                wf = next((wfields[a] for a in field.get("aliases", ()) if a in wfields), None)
            if wf is None:
                if "default" not in field:
                    return False
            elif not _can_read(field["type"], wf["type"], rn, wn, seen):
                return False
        return True
    if rt == "array" and wt == "array":
        return _can_read(r["items"], w["items"], rn, wn, seen)
    if rt == "map" and wt == "map":
        return _can_read(r["values"], w["values"], rn, wn, seen)
    if rt == "enum" and wt == "enum":
        return _short(r["name"]) == _short(w["name"]) and (
            set(w["symbols"]) <= set(r["symbols"]) or "default" in r
        )
    if rt == "fixed" and wt == "fixed":
        return _short(r["name"]) == _short(w["name"]) and r["size"] == w["size"]
    return rt in _PROMOTIONS.get(wt, {wt})


def _version(schema: Any) -> int | None:
    if isinstance(schema, dict):
        for key in ("connect.version", "version"):
            value = schema.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                return value
    return None


def _field_names(schema: Any) -> frozenset[str] | None:
    if isinstance(schema, dict) and schema.get("type") == "record":
        return frozenset(f["name"] for f in schema["fields"])
    return None


def _older(incoming: Any, current: Any) -> bool | None:
    """True when ``incoming`` is an older schema than ``current``, False when newer, None if unknown."""
    vi, vc = _version(incoming), _version(current)
    if vi is not None and vc is not None and vi != vc:
        return vi < vc
    fi, fc = _field_names(incoming), _field_names(current)
    if fi is None or fc is None or fi == fc:
        return None
    if fi < fc:
        return True
    if fi > fc:
        return False
    return None


class SchemaEvolution:
    """Decides, record by record, whether a schema can share the open file's schema.

    One instance per open file; the first schema seen becomes the file's schema.
    """

    def __init__(self, compatibility: str = "NONE") -> None:
        self.mode = (compatibility or "NONE").upper()
        self.current: Any = None
        self._has_current = False
        # id(schema) -> (schema, decision); the schema is kept so its id is never reused
        self._cache: dict[int, tuple[Any, Decision]] = {}

    def decide(self, schema: Any) -> Decision:
        """SAME, PROJECT (onto :attr:`current`) or ROLL for a record with ``schema``."""
        if not self._has_current:
            self.current = schema
            self._has_current = True
            self._cache[id(schema)] = (schema, Decision.SAME)
            return Decision.SAME
        if schema is self.current:
            return Decision.SAME
        hit = self._cache.get(id(schema))
        if hit is not None and hit[0] is schema:
            return hit[1]
        decision = self._decide(schema)
        if len(self._cache) >= _CACHE_LIMIT:  # a converter that builds a schema object per record
            self._cache.clear()
        self._cache[id(schema)] = (schema, decision)
        return decision

    def _decide(self, schema: Any) -> Decision:
        if schema == self.current:
            return Decision.SAME
        if self.mode == "NONE" or schema is None or self.current is None:
            return Decision.ROLL
        older = _older(schema, self.current)
        wanted = older if self.mode in ("BACKWARD", "FULL") else (None if older is None else not older)
        if wanted and can_read(self.current, schema):
            return Decision.PROJECT
        return Decision.ROLL


def project(value: Any, target: Any) -> Any:
    """``value`` shaped for the ``target`` record schema: missing top-level fields take defaults.

    Extra fields are left in place; the encoders only read the target's fields. Nested records
    rely on nullable fields (Avro writers fill declared defaults themselves).
    """
    if not isinstance(value, dict) or not isinstance(target, dict) or target.get("type") != "record":
        return value
    missing = [f for f in target["fields"] if f["name"] not in value and "default" in f]
    if not missing:
        return value
    out = dict(value)
    for field in missing:
        out[field["name"]] = field["default"]
    return out
