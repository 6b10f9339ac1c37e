"""Kafka Connect's JsonConverter with ``schemas.enable=true``: the envelope read as Kafka reads it,
the Connect schema translated to Avro as Confluent's ``AvroData`` does.

Read side, after Apache Kafka's ``connect/json`` (``JsonConverter.toConnectData``/``asConnectSchema``/
``convertToConnect``, ``JsonSchema``, ``JsonConverterConfig``, ``JsonDeserializer``) and the logical
types of ``connect/api`` (``Decimal``, ``Date``, ``Time``, ``Timestamp``):

* the document is an object with exactly ``schema`` and ``payload``; a ``null`` schema means a
  schemaless payload;
* schema ``type`` names are JsonConverter's: ``boolean``, ``int8``, ``int16``, ``int32``,
  ``int64``, ``float`` (FLOAT32), ``double`` (FLOAT64), ``bytes``, ``string``, ``array``
  (``items``), ``map`` (``keys``, ``values``), ``struct`` (``fields``, each naming itself with
  ``field``). ``float32``/``float64`` (Connect's ``Schema.Type`` names, which JsonConverter itself
  rejects) are still accepted, as before;
* ``optional`` is true only when it is JSON ``true``; ``name``/``doc`` only when strings,
  ``version`` only when an integer; ``parameters`` must have string values; a ``default`` is
  converted with the schema it belongs to (a ``null`` default is no default);
* a null or missing value takes the schema's default (``replace.null.with.default``, default
  true, also for optional schemas), else null when optional, else it is an error;
* logical types go by schema name: Decimal from base64 bytes (``decimal.format=BASE64``) or from
  a JSON number (``NUMERIC``): the reader takes both whatever ``decimal.format`` says, as Kafka
  does (the setting only chooses what JsonConverter *writes*); Date from an int32 day count, Time
  from int32 milliseconds (0 to 86400000), Timestamp from integral milliseconds;
* maps whose key schema is ``string`` are JSON objects, every other map is an array of
  ``[key, value]`` pairs; struct payloads keep only the schema's fields, in the schema's order;
* numbers with leading zeros (``0012``) are read, as Kafka's deserializer allows them.

Where JsonConverter would silently invent a value (Jackson turns a string in an int32 field into
0, a number in a string field into null, truncates 1.5 to 1, wraps 300 in an int8 to 44) the value
is refused instead, with the path of the offending field; everything JsonConverter writes is
accepted. JSON numbers are read exactly (as Kafka's ``USE_BIG_DECIMAL_FOR_FLOATS``) when the
document holds a Decimal.

Avro side, after Confluent's ``AvroData.fromConnectSchema`` with its default configuration
(``connect.meta.data=true``, no enhanced schema support, names not scrubbed): int8/int16 → ``int``
with ``connect.type``; float32/float64 → ``float``/``double``; the Connect name, version, doc,
parameters and default go to ``connect.name``, ``connect.version``, ``connect.doc``,
``connect.parameters`` and ``connect.default``; Decimal → ``bytes`` ``decimal`` (precision from
``connect.decimal.precision``, else 64), Date → ``int``/``date``, Time → ``int``/``time-millis``,
Timestamp → ``long``/``timestamp-millis``; optional → ``["null", T]``, or ``[T, "null"]`` when there
is a default; struct fields get the Avro default AvroData gives them (the Connect default, null
for optional fields) when Avro accepts it; unnamed structs are ``ConnectDefault``,
``ConnectDefault2``, ... in ``io.confluent.connect.avro``; maps with keys other than a required
string are arrays of ``MapEntry`` records; a named ``bytes`` with ``connect.fixed.size`` is a
``fixed``; a struct named ``io.confluent.connect.avro.Union`` (or with the
``org.apache.kafka.connect.data.Union`` parameter) is an Avro union of its fields' types. A type
that occurs again is written as a reference to its name, as Avro writes equal named types; a
different type under a name already taken (two different ``MapEntry`` records), which Avro cannot
write at all, gets a number added (``MapEntry2``).

Python values are what fastavro writes for that Avro schema: ``Decimal`` with the schema's scale,
``date``, ``time``, UTC ``datetime``, ``bytes``, ``dict`` for structs and string-keyed maps, a list
of ``{"key", "value"}`` dicts for ``MapEntry`` arrays.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import copy
import json
import math
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Context, Decimal, DecimalException, Inexact, InvalidOperation
from typing import Any

from sink.records.record import Schema

__all__ = [
    "ConnectJsonError",
    "ConnectSchema",
    "EnvelopeReader",
    "avro_schema",
    "connect_schema_to_avro",
    "parse_schema",
    "value_reader",
]

NAMESPACE = "io.confluent.connect.avro"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
AVRO_UNION = "io.confluent.connect.avro.Union"
CONNECT_UNION_PARAM = "org.apache.kafka.connect.data.Union"
_FIXED_SIZE = "connect.fixed.size"
_DECIMAL_PRECISION = "connect.decimal.precision"
_DECIMAL_PRECISION_DEFAULT = 64
_FIELD_DEFAULT_FLAG = "io.confluent.connect.avro.field.default"
_RECORD_DOC = "io.confluent.connect.avro.record.doc"
_FIELD_DOC_PREFIX = "io.confluent.connect.avro.field.doc."

_TYPES = {  # JsonConverter's type names (JsonSchema.*_TYPE_NAME) -> Connect Schema.Type
    "boolean": "BOOLEAN",
    "int8": "INT8",
    "int16": "INT16",
    "int32": "INT32",
    "int64": "INT64",
    "float": "FLOAT32",
    "double": "FLOAT64",
    "bytes": "BYTES",
    "string": "STRING",
    "array": "ARRAY",
    "map": "MAP",
    "struct": "STRUCT",
    # Connect's Schema.Type names: not JsonConverter's, kept because this sink always took them
    "float32": "FLOAT32",
    "float64": "FLOAT64",
}
_LOGICAL_BASE = {DECIMAL: "BYTES", DATE: "INT32", TIME: "INT32", TIMESTAMP: "INT64"}
_INT_RANGES = {
    "INT8": (-(2**7), 2**7 - 1),
    "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1),
    "INT64": (-(2**63), 2**63 - 1),
}
_AVRO_PRIMITIVE = {
    "INT8": "int",
    "INT16": "int",
    "INT32": "int",
    "INT64": "long",
    "FLOAT32": "float",
    "FLOAT64": "double",
    "BOOLEAN": "boolean",
    "STRING": "string",
}
_FLOAT32_MAX = 3.4028234663852886e38
_NON_FINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
_MILLIS_PER_DAY = 86_400_000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
_EXACT = Context(prec=1000, traps=[InvalidOperation, Inexact])
"""Rescaling a NUMERIC decimal to the schema's scale may add zeros, never drop digits."""


class ConnectJsonError(ValueError):
    """A Connect JSON envelope that cannot be read; says where (``payload.a.b[2]``, ``schema.a``)."""

    def __init__(self, message: str, *path: str) -> None:
        super().__init__(message)
        self.message = message
        self.path: list[str] = list(path)

    def within(self, segment: str) -> ConnectJsonError:
        """Prepend one path segment (a field name, ``[index]``) while the error unwinds."""
        self.path.insert(0, segment)
        return self

    def __str__(self) -> str:
        if not self.path:
            return self.message
        where = "".join(p if p.startswith("[") else f".{p}" for p in self.path).lstrip(".")
        return f"{self.message} (at {where})"


def _kind(v: Any) -> str:
    """The Jackson node type JsonConverter names in its messages."""
    if v is None:
        return "NULL"
    if isinstance(v, bool):
        return "BOOLEAN"
    if isinstance(v, int | float | Decimal):
        return "NUMBER"
    if isinstance(v, str):
        return "STRING"
    if isinstance(v, list):
        return "ARRAY"
    return "OBJECT"


def _show(v: Any) -> str:
    """A payload value in a message: as JSON would show it, cut short (records can be large)."""
    if isinstance(v, str):
        text = repr(v)
    elif isinstance(v, Decimal):
        text = str(v)
    else:
        text = json.dumps(v, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


# --------------------------------------------------------------------------- the Connect schema


@dataclass(frozen=True, slots=True, eq=False)
class ConnectSchema:
    """A Connect schema as JsonConverter's ``asConnectSchema`` builds it."""

    type: str
    """Connect ``Schema.Type``: BOOLEAN, INT8, ..., FLOAT32, FLOAT64, BYTES, STRING, ARRAY, MAP, STRUCT."""
    optional: bool = False
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: dict[str, str] | None = None
    default: Any = None
    """The default as a converted Python value (what :func:`value_reader` returns); None: none."""
    fields: tuple[tuple[str, ConnectSchema], ...] = ()
    keys: ConnectSchema | None = None
    values: ConnectSchema | None = None
    """Element schema of an ARRAY, value schema of a MAP."""
    ident: tuple[Any, ...] = ()
    """Equality key, as ``ConnectSchema.equals`` compares (AvroData reuses equal schemas)."""

    @property
    def is_union(self) -> bool:
        """AvroData's union struct (``io.confluent.connect.avro.Union`` or ConnectUnion)."""
        return self.type == "STRUCT" and (
            self.name == AVRO_UNION or CONNECT_UNION_PARAM in (self.parameters or {})
        )


def _ident(cs: ConnectSchema) -> tuple[Any, ...]:
    return (
        cs.optional,
        cs.type,
        cs.name,
        cs.version,
        cs.doc,
        tuple(sorted((cs.parameters or {}).items())),
        repr(cs.default),
        tuple((n, f.ident) for n, f in cs.fields),
        cs.keys.ident if cs.keys is not None else None,
        cs.values.ident if cs.values is not None else None,
    )


def _build(**kw: Any) -> ConnectSchema:
    cs = ConnectSchema(**kw)
    object.__setattr__(cs, "ident", _ident(cs))
    return cs


def _required(cs: ConnectSchema) -> ConnectSchema:
    """AvroData's ``nonOptional``: the same schema, required (default kept)."""
    if not cs.optional:
        return cs
    out = replace(cs, optional=False)
    object.__setattr__(out, "ident", (False, *cs.ident[1:]))
    return out


def parse_schema(node: Any, replace_null_with_default: bool = True) -> ConnectSchema:
    """A JsonConverter schema (the envelope's ``schema``) as a :class:`ConnectSchema`.

    Raises:
        ConnectJsonError: what ``asConnectSchema`` rejects, with JsonConverter's message, and
            logical types on a base type Avro cannot carry them on.
    """
    try:
        return _parse(node, replace_null_with_default)
    except ConnectJsonError as exc:
        raise exc.within("schema") from None


def _parse(node: Any, replace_null: bool) -> ConnectSchema:
    tname = node.get("type") if isinstance(node, Mapping) else None
    if not isinstance(tname, str):
        raise ConnectJsonError("Schema must contain 'type' field")
    ctype = _TYPES.get(tname)
    if ctype is None:
        raise ConnectJsonError(f"Unknown schema type: {tname}")
    kw: dict[str, Any] = {"type": ctype}
    if ctype == "ARRAY":
        items = node.get("items")
        if items is None:
            raise ConnectJsonError("Array schema did not specify the element type")
        kw["values"] = _within(_parse, items, replace_null, "[items]")
    elif ctype == "MAP":
        if "keys" not in node:
            raise ConnectJsonError("Map schema did not specify the key type")
        if "values" not in node:
            raise ConnectJsonError("Map schema did not specify the value type")
        kw["keys"] = _within(_parse, node["keys"], replace_null, "[keys]")
        kw["values"] = _within(_parse, node["values"], replace_null, "[values]")
    elif ctype == "STRUCT":
        fields = node.get("fields")
        if not isinstance(fields, list):
            raise ConnectJsonError('Struct schema\'s "fields" argument is not an array.')
        out: list[tuple[str, ConnectSchema]] = []
        seen: set[str] = set()
        for field in fields:
            fname = field.get("field") if isinstance(field, Mapping) else None
            if not isinstance(fname, str):
                raise ConnectJsonError("Struct schema's field name not specified properly")
            if fname in seen:
                raise ConnectJsonError(f"Cannot create field because of field name duplication {fname}")
            seen.add(fname)
            out.append((fname, _within(_parse, field, replace_null, fname)))
        kw["fields"] = tuple(out)
    kw["optional"] = node.get("optional") is True
    name = node.get("name")
    if isinstance(name, str):
        kw["name"] = name
    version = node.get("version")
    if isinstance(version, int) and not isinstance(version, bool):
        kw["version"] = version
    doc = node.get("doc")
    if isinstance(doc, str):
        kw["doc"] = doc
    params = node.get("parameters")
    if isinstance(params, Mapping):
        if not all(isinstance(v, str) for v in params.values()):
            raise ConnectJsonError("Schema parameters must have string values.")
        kw["parameters"] = dict(params)
    base = _LOGICAL_BASE.get(kw.get("name", ""))
    if base is not None and base != ctype:
        raise ConnectJsonError(f"{kw['name']} must be a {base.lower()} schema, not {tname}")
    if kw.get("name") == DECIMAL:
        _scale(kw.get("parameters"))  # Decimal.scale(): the schema is unusable without one
    cs = _build(**kw)
    if "default" in node:
        try:
            default = value_reader(cs, replace_null)(node["default"])
        except ConnectJsonError as exc:
            raise exc.within("[default]") from None
        if default is not None:
            cs = _build(**kw, default=default)
    return cs


def _within(fn: Callable[..., Any], node: Any, arg: Any, segment: str) -> Any:
    try:
        return fn(node, arg)
    except ConnectJsonError as exc:
        raise exc.within(segment) from None


def _scale(params: Mapping[str, str] | None) -> int:
    text = (params or {}).get("scale")
    if text is None:
        raise ConnectJsonError("Invalid Decimal schema: scale parameter not found.")
    if not re.fullmatch(r"[+-]?\d+", text):
        raise ConnectJsonError(f"Invalid scale parameter found in Decimal schema: {text!r}")
    return int(text)


# --------------------------------------------------------------------------- payload -> values

Reader = Callable[[Any], Any]


def value_reader(cs: ConnectSchema, replace_null_with_default: bool = True) -> Reader:
    """``payload -> value``: JsonConverter's ``convertToConnect`` for ``cs``, giving the Python
    values fastavro writes for :func:`avro_schema` of ``cs``.

    The reader raises :class:`ConnectJsonError` for what JsonConverter rejects and for values it
    would silently replace (see the module docs).
    """
    base = _base_reader(cs, replace_null_with_default)
    default = cs.default
    if default is not None and replace_null_with_default:
        if isinstance(default, dict | list):
            return lambda v: copy.deepcopy(default) if v is None else base(v)
        return lambda v: default if v is None else base(v)
    if cs.optional:
        return lambda v: None if v is None else base(v)
    message = f"Invalid null value for required {cs.type} field"

    def required(v: Any) -> Any:
        if v is None:
            raise ConnectJsonError(message)
        return base(v)

    return required


def _base_reader(cs: ConnectSchema, replace_null: bool) -> Reader:
    name = cs.name
    if name == DECIMAL:
        return _decimal_reader(cs)
    if name == DATE:
        return _read_date
    if name == TIME:
        return _read_time
    if name == TIMESTAMP:
        return _read_timestamp
    ctype = cs.type
    if ctype in _INT_RANGES:
        return _int_reader(ctype)
    if ctype in ("FLOAT32", "FLOAT64"):
        return _read_float32 if ctype == "FLOAT32" else _read_float64
    if ctype == "BOOLEAN":
        return _read_boolean
    if ctype == "STRING":
        return _read_string
    if ctype == "BYTES":
        size = _fixed_size(cs)
        return _read_bytes if size is None else _fixed_reader(size)
    if ctype == "ARRAY":
        assert cs.values is not None  # noqa: S101 - parse_schema sets it
        return _array_reader(value_reader(cs.values, replace_null))
    if ctype == "MAP":
        assert cs.keys is not None and cs.values is not None  # noqa: S101 - parse_schema sets them
        return _map_reader(cs, value_reader(cs.keys, replace_null), value_reader(cs.values, replace_null))
    fields = tuple((n, value_reader(f, replace_null)) for n, f in cs.fields)
    return _union_reader(fields) if cs.is_union else _struct_reader(fields)


def _int_reader(ctype: str) -> Reader:
    lo, hi = _INT_RANGES[ctype]

    def read(v: Any) -> Any:
        if type(v) is int and lo <= v <= hi:
            return v
        if type(v) in (float, Decimal) and v == v and v not in (math.inf, -math.inf) and v == int(v):
            return read(int(v))  # 12.0: the same integer; 12.5 is refused, Jackson would truncate
        if type(v) is int:
            raise ConnectJsonError(f"Invalid value for {ctype}: {v} is out of range")
        raise ConnectJsonError(
            f"Invalid value for {ctype}: expected an integer but was {_kind(v)} {_show(v)}"
        )

    return read


def _read_float64(v: Any) -> Any:
    t = type(v)
    if t is float:
        return v
    if t is int or t is Decimal:
        try:
            return float(v)
        except OverflowError:
            return math.copysign(math.inf, v)
    if t is str and v in _NON_FINITE:  # Jackson writes NaN and the infinities as strings
        return _NON_FINITE[v]
    raise ConnectJsonError(f"Invalid value for FLOAT64: expected a number but was {_kind(v)} {_show(v)}")


def _read_float32(v: Any) -> Any:
    x = _read_float64(v) if type(v) is not float else v
    if -_FLOAT32_MAX <= x <= _FLOAT32_MAX or x != x:
        return x
    try:
        struct.pack("<f", x)  # rounds to the largest float32, or overflows as Java's (float) does
    except OverflowError:
        return math.copysign(math.inf, x)
    return x


def _read_boolean(v: Any) -> Any:
    if type(v) is bool:
        return v
    raise ConnectJsonError(f"Invalid value for BOOLEAN: expected true or false but was {_kind(v)} {_show(v)}")


def _read_string(v: Any) -> Any:
    if type(v) is str:
        return v
    raise ConnectJsonError(f"Invalid value for STRING: expected a string but was {_kind(v)} {_show(v)}")


def _b64(v: Any, what: str) -> bytes:
    if type(v) is not str:
        raise ConnectJsonError(f"Invalid {what}: expected a base64 string but was {_kind(v)} {_show(v)}")
    try:
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ConnectJsonError(f"Invalid {what}: {exc}") from None


def _read_bytes(v: Any) -> Any:
    return _b64(v, "bytes field")


def _fixed_size(cs: ConnectSchema) -> int | None:
    """AvroData's ``isFixedSchema``: a named BYTES with ``connect.fixed.size``."""
    size = (cs.parameters or {}).get(_FIXED_SIZE)
    if size is None or cs.name is None:
        return None
    if not size.isdigit():
        raise ConnectJsonError(f"Invalid {_FIXED_SIZE} parameter: {size!r}")
    return int(size)


def _fixed_reader(size: int) -> Reader:
    def read(v: Any) -> Any:
        data = _b64(v, "bytes field")
        if len(data) != size:
            raise ConnectJsonError(f"Invalid bytes field: {len(data)} bytes for a fixed size of {size}")
        return data

    return read


def _decimal_reader(cs: ConnectSchema) -> Reader:
    scale = _scale(cs.parameters)
    quantum = Decimal(1).scaleb(-scale)
    exponent = f"E{-scale}"

    def read(v: Any) -> Any:
        t = type(v)
        if t is str:  # BASE64: the unscaled value, big-endian two's complement
            data = _b64(v, "bytes for Decimal field")
            if not data:
                raise ConnectJsonError("Invalid bytes for Decimal field: Zero length BigInteger")
            return Decimal(f"{int.from_bytes(data, 'big', signed=True)}{exponent}")
        if t is Decimal or t is int or t is float:  # NUMERIC
            d = v if t is Decimal else Decimal(repr(v) if t is float else v)
            if not d.is_finite():
                raise ConnectJsonError(f"Invalid value for Decimal: {_show(v)}")
            if d.as_tuple().exponent == -scale:
                return d
            try:
                return d.quantize(quantum, context=_EXACT)
            except DecimalException:
                raise ConnectJsonError(f"Decimal value {v} does not fit the schema's scale {scale}") from None
        raise ConnectJsonError(
            "Invalid type for Decimal, underlying representation should be numeric or bytes but was "
            + _kind(v)
        )

    return read


def _representation(logical: str, what: str, v: Any) -> ConnectJsonError:
    found = f"{_kind(v)} {_show(v)}"
    return ConnectJsonError(
        f"Invalid type for {logical}, underlying representation should be {what} but was {found}"
    )


def _read_date(v: Any) -> Any:
    if type(v) is not int or not -(2**31) <= v < 2**31:
        raise _representation("Date", "integer", v)
    try:
        return _EPOCH_DATE + timedelta(days=v)
    except OverflowError:
        raise ConnectJsonError(f"Date {v} (days since 1970-01-01) is outside years 1 to 9999") from None


def _read_time(v: Any) -> Any:
    if type(v) is not int or not -(2**31) <= v < 2**31:
        raise _representation("Time", "integer", v)
    if not 0 <= v <= _MILLIS_PER_DAY:
        raise ConnectJsonError(
            "Time values must use number of milliseconds greater than 0 and less than 86400000"
        )
    if v == _MILLIS_PER_DAY:
        raise ConnectJsonError("Time 86400000 (24:00) cannot be stored as a time of day")
    return (_EPOCH + timedelta(milliseconds=v)).time()


def _read_timestamp(v: Any) -> Any:
    if type(v) is not int or not -(2**63) <= v < 2**63:
        raise _representation("Timestamp", "integral", v)
    try:
        return _EPOCH + timedelta(milliseconds=v)
    except OverflowError:
        raise ConnectJsonError(f"Timestamp {v} (ms since the epoch) is outside years 1 to 9999") from None


def _array_reader(item: Reader) -> Reader:
    def read(v: Any) -> Any:
        if type(v) is not list:
            raise ConnectJsonError(f"Arrays should be encoded as JSON arrays, but found {_kind(v)}")
        out = []
        for i, x in enumerate(v):
            try:
                out.append(item(x))
            except ConnectJsonError as exc:
                raise exc.within(f"[{i}]") from None
        return out

    return read


def _map_reader(cs: ConnectSchema, key: Reader, value: Reader) -> Reader:
    assert cs.keys is not None  # noqa: S101 - a MAP has keys
    if cs.keys.type == "STRING":  # a JSON object; keys are taken as they are, as JsonConverter does
        as_entries = cs.keys.optional  # AvroData: an optional string key is not an Avro map key

        def read_object(v: Any) -> Any:
            if type(v) is not dict:
                raise ConnectJsonError(
                    f"Maps with string fields should be encoded as JSON objects, but found {_kind(v)}"
                )
            out = {}
            for k, x in v.items():
                try:
                    out[k] = value(x)
                except ConnectJsonError as exc:
                    raise exc.within(f"[{k!r}]") from None
            return [{"key": k, "value": x} for k, x in out.items()] if as_entries else out

        return read_object

    def read_pairs(v: Any) -> Any:
        if type(v) is not list:
            raise ConnectJsonError(
                f"Maps with non-string fields should be encoded as JSON array of tuples, but found {_kind(v)}"
            )
        pairs = []
        for i, entry in enumerate(v):
            if type(entry) is not list:
                raise ConnectJsonError(
                    f"Found invalid map entry instead of array tuple: {_kind(entry)}"
                ).within(f"[{i}]")
            if len(entry) != 2:
                raise ConnectJsonError(
                    f"Found invalid map entry, expected length 2 but found :{len(entry)}"
                ).within(f"[{i}]")
            try:
                pairs.append((key(entry[0]), value(entry[1])))
            except ConnectJsonError as exc:
                raise exc.within(f"[{i}]") from None
        # a Connect map: a key given twice keeps its last value (struct, array or map keys are not
        # hashable here and are kept as they came)
        with contextlib.suppress(TypeError):
            pairs = list(dict(pairs).items())
        return [{"key": k, "value": x} for k, x in pairs]

    return read_pairs


def _struct_reader(fields: tuple[tuple[str, Reader], ...]) -> Reader:
    def read(v: Any) -> Any:
        if type(v) is not dict:
            raise ConnectJsonError(f"Structs should be encoded as JSON objects, but found {_kind(v)}")
        out = {}
        get = v.get
        for name, field in fields:
            try:
                out[name] = field(get(name))
            except ConnectJsonError as exc:
                raise exc.within(name) from None
        return out

    return read


def _union_reader(fields: tuple[tuple[str, Reader], ...]) -> Reader:
    struct_read = _struct_reader(fields)

    def read(v: Any) -> Any:  # AvroData: the union's value is the first non-null field's
        for x in struct_read(v).values():
            if x is not None:
                return x
        return None

    return read


# --------------------------------------------------------------------------- Connect schema -> Avro


class _Context:
    """AvroData's ``FromConnectContext``: equal schemas built once, unnamed structs numbered."""

    def __init__(self) -> None:
        self.built: dict[tuple[Any, ...], Any] = {}
        self.seen_names: set[str] = set()
        self.index = 0

    def name(self, full: str | None) -> tuple[str | None, str]:
        if full is not None:
            namespace, _, short = full.rpartition(".")
            return namespace or None, short
        self.index += 1
        return NAMESPACE, "ConnectDefault" if self.index == 1 else f"ConnectDefault{self.index}"


def avro_schema(cs: ConnectSchema) -> Schema:
    """The Avro schema ``AvroData.fromConnectSchema`` gives ``cs`` (see the module docs), as JSON."""
    return _emit(_avro(cs, _Context(), False), None, {})


def _avro(cs: ConnectSchema, ctx: _Context, ignore_optional: bool) -> Any:
    union = cs.is_union
    if not union and not cs.optional:
        hit = ctx.built.get(cs.ident)
        if hit is not None:
            return hit
    params = cs.parameters or {}
    base: Any
    ctype = cs.type
    if ctype in _AVRO_PRIMITIVE:
        base = {"type": _AVRO_PRIMITIVE[ctype]}
        if ctype in ("INT8", "INT16"):
            base["connect.type"] = ctype.lower()
    elif ctype == "BYTES":
        size = _fixed_size(cs)
        if size is not None:
            namespace, short = ctx.name(cs.name)
            base = {"type": "fixed", "name": short, **({"namespace": namespace} if namespace else {})}
            base["size"] = size
        else:
            base = {"type": "bytes"}
        if cs.name == DECIMAL:
            base["scale"] = _scale(params)
            base["precision"] = int(params.get(_DECIMAL_PRECISION, _DECIMAL_PRECISION_DEFAULT))
    elif ctype == "ARRAY":
        assert cs.values is not None  # noqa: S101
        base = {"type": "array", "items": _avro(cs.values, ctx, False)}
    elif ctype == "MAP":
        assert cs.keys is not None and cs.values is not None  # noqa: S101
        if cs.keys.type == "STRING" and not cs.keys.optional:
            base = {"type": "map", "values": _avro(cs.values, ctx, False)}
        else:
            if cs.name is None:
                entry: dict[str, Any] = {"type": "record", "name": "MapEntry", "namespace": NAMESPACE}
            else:
                namespace, short = ctx.name(cs.name)
                entry = {"type": "record", "name": short, **({"namespace": namespace} if namespace else {})}
                entry["connect.internal.type"] = "MapEntry"
            entry["fields"] = [
                _avro_field("key", cs.keys, None, ctx),
                _avro_field("value", cs.values, None, ctx),
            ]
            base = {"type": "array", "items": entry}
    elif union:
        base = ["null"] if cs.optional else []
        base += [_avro(_required(f), ctx, True) for _, f in cs.fields]
    elif cs.optional:
        base = ["null", _avro(_required(cs), ctx, False)]
    else:
        namespace, short = ctx.name(cs.name)
        record: dict[str, Any] = {"type": "record", "name": short}
        if namespace:
            record["namespace"] = namespace
        if _RECORD_DOC in params:
            record["doc"] = params[_RECORD_DOC]
        record["fields"] = [_avro_field(n, f, params.get(_FIELD_DOC_PREFIX + n), ctx) for n, f in cs.fields]
        base = record
    final = base
    if not isinstance(base, list):
        _metadata(cs, base, params)
        if not ignore_optional and cs.optional:
            final = [base, "null"] if cs.default is not None else ["null", base]
    if not cs.optional:
        ctx.built[cs.ident] = final
    return final


def _metadata(cs: ConnectSchema, base: dict[str, Any], params: Mapping[str, str]) -> None:
    """AvroData's ``connect.*`` properties and logical types on a non-union Avro schema."""
    if cs.doc is not None:
        base["connect.doc"] = cs.doc
    if cs.version is not None:
        base["connect.version"] = cs.version
    shown = {k: v for k, v in params.items() if k != _FIELD_DEFAULT_FLAG}
    if shown:
        base["connect.parameters"] = shown
    if cs.default is not None and _FIELD_DEFAULT_FLAG not in params:
        base["connect.default"] = _avro_default(cs, cs.default)
    if cs.name is not None:
        base["connect.name"] = cs.name
    logical = {DECIMAL: "decimal", TIME: "time-millis", TIMESTAMP: "timestamp-millis", DATE: "date"}
    if cs.name in logical:
        base["logicalType"] = logical[cs.name]
    base.update({k: v for k, v in params.items() if k.startswith("avro")})


_NO_DEFAULT = object()


def _avro_field(name: str, fs: ConnectSchema, doc: str | None, ctx: _Context) -> dict[str, Any]:
    """AvroData's ``addAvroRecordField``."""
    default: Any = _NO_DEFAULT
    if fs.default is not None:
        default = _avro_default(fs, fs.default)
    elif fs.optional:
        default = None
    already_seen = fs.name is not None and fs.name in ctx.seen_names
    if fs.name is not None:
        ctx.seen_names.add(fs.name)
    schema = _avro(fs, ctx, False)
    field: dict[str, Any] = {"name": name, "type": schema}
    if doc is not None:
        field["doc"] = doc
    if default is not _NO_DEFAULT and _valid_default(schema, default, {}):
        field["default"] = default  # Avro refuses the others; AvroData then drops the default
    if already_seen and fs.parameters and _is_named(schema):
        field["connect.parameters"] = dict(fs.parameters)
    return field


def _is_named(schema: Any) -> bool:
    branches = schema if isinstance(schema, list) else [schema]
    return any(isinstance(b, dict) and b.get("type") in ("record", "enum", "fixed") for b in branches)


def _avro_default(cs: ConnectSchema, value: Any) -> Any:
    """AvroData's ``defaultValueFromConnect``: a Connect default as Avro JSON."""
    if value is None:
        return None
    if cs.name == DECIMAL:
        unscaled = int(value.scaleb(_scale(cs.parameters)))
        return _latin1(_twos_complement(unscaled))
    if cs.name == DATE:
        return (value - _EPOCH_DATE).days
    if cs.name == TIME:
        return (value.hour * 3600 + value.minute * 60 + value.second) * 1000 + value.microsecond // 1000
    if cs.name == TIMESTAMP:
        return (value - _EPOCH) // timedelta(milliseconds=1)
    ctype = cs.type
    if ctype == "BYTES":
        return _latin1(value)
    if ctype == "ARRAY":
        assert cs.values is not None  # noqa: S101
        return [_avro_default(cs.values, x) for x in value]
    if ctype == "MAP":
        assert cs.keys is not None and cs.values is not None  # noqa: S101
        if isinstance(value, dict):
            return {k: _avro_default(cs.values, x) for k, x in value.items()}
        return [[_avro_default(cs.keys, e["key"]), _avro_default(cs.values, e["value"])] for e in value]
    if ctype == "STRUCT":
        if cs.is_union:  # AvroData returns the first field's default, null or not
            return _avro_default(cs.fields[0][1], value) if cs.fields else {}
        out = {}
        for n, f in cs.fields:
            x = value.get(n)
            out[n] = _avro_default(f, f.default if x is None else x)
        return out
    return value


def _latin1(data: bytes) -> str:
    return data.decode("latin-1")


def _twos_complement(n: int) -> bytes:
    """``BigInteger.toByteArray``: the shortest big-endian two's complement."""
    length = ((n if n >= 0 else ~n).bit_length() + 8) // 8
    return n.to_bytes(length, "big", signed=True)


def _valid_default(schema: Any, value: Any, names: dict[str, Any]) -> bool:
    """Avro's ``Schema.isValidDefault`` (a union's default must fit its first branch)."""
    if isinstance(schema, list):
        return bool(schema) and _valid_default(schema[0], value, names)
    if isinstance(schema, str):
        if schema in names:
            return _valid_default(names[schema], value, names)
        schema = {"type": schema}
    kind = schema.get("type")
    if kind in ("string", "bytes", "enum", "fixed"):
        return isinstance(value, str)
    if kind in ("int", "long"):
        lo, hi = _INT_RANGES["INT32" if kind == "int" else "INT64"]
        return type(value) is int and lo <= value <= hi
    if kind in ("float", "double"):
        return isinstance(value, int | float | Decimal) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list) and all(_valid_default(schema["items"], x, names) for x in value)
    if kind == "map":
        values = schema["values"]
        return isinstance(value, dict) and all(_valid_default(values, x, names) for x in value.values())
    if kind == "record":
        if not isinstance(value, dict):
            return False
        for field in schema["fields"]:
            x = value[field["name"]] if field["name"] in value else field.get("default", _NO_DEFAULT)
            if x is _NO_DEFAULT or not _valid_default(field["type"], x, names):
                return False
        return True
    return False


def _emit(node: Any, namespace: str | None, seen: dict[str, list[tuple[Any, str]]]) -> Any:
    """The Avro JSON of a built schema: a named type defined once, then referenced by full name
    (as Avro's ``Schema.toString`` writes an equal named type again).

    A *different* type under a name already defined (two unnamed maps with different non-string
    keys or values both make an ``io.confluent.connect.avro.MapEntry``) is where Avro stops
    (``Can't redefine``) and AvroData's schema cannot be written at all; it is written here under
    the name with a number added (``MapEntry2``), so that the record can still be stored.
    """
    if isinstance(node, list):
        return [_emit(b, namespace, seen) for b in node]
    if not isinstance(node, dict):
        return node
    kind = node["type"]
    out = dict(node)
    if kind in ("record", "fixed", "enum"):
        own = node.get("namespace", namespace) or None
        full = f"{own}.{node['name']}" if own else node["name"]
        variants = seen.setdefault(full, [])
        for earlier, used in variants:
            if earlier is node or earlier == node:
                return used
        if variants:
            taken = {used for group in seen.values() for _, used in group}
            number = len(variants) + 1
            while f"{full}{number}" in taken:
                number += 1
            out["name"] = f"{node['name']}{number}"
            full = f"{full}{number}"
        variants.append((node, full))
        if kind == "record":
            out["fields"] = [{**f, "type": _emit(f["type"], own, seen)} for f in node["fields"]]
        return out
    if kind == "array":
        out["items"] = _emit(node["items"], namespace, seen)
    elif kind == "map":
        out["values"] = _emit(node["values"], namespace, seen)
    elif len(node) == 1:
        return kind  # a primitive without properties is just its name
    return out


def connect_schema_to_avro(schema: Mapping[str, Any]) -> Schema:
    """Translate a Connect JSON schema (``JsonConverter`` envelope) into an Avro schema.

    Raises:
        ValueError: the schema is not a valid Connect schema (a :class:`ConnectJsonError`).
    """
    return avro_schema(parse_schema(schema))


# --------------------------------------------------------------------------- the envelope

_ENVELOPE_MESSAGE = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
    "contain additional fields. If you are trying to deserialize plain JSON data, set "
    "schemas.enable=false in your converter configuration."
)
_DECIMAL_MARK = DECIMAL.encode()
# A string (skipped as it is) or the leading zeros of a number outside strings
_LEADING_ZEROS = re.compile(r'("(?:[^"\\]|\\.)*")|(?<![\w.+-])(-?)0+(?=\d)')


def _loads(data: bytes, exact: bool) -> Any:
    parse_float = Decimal if exact else None
    try:
        return json.loads(data, parse_float=parse_float)
    except json.JSONDecodeError as exc:
        # Kafka's JsonDeserializer enables ALLOW_LEADING_ZEROS_FOR_NUMBERS: 0012 is 12
        try:
            text = data.decode("utf-8") if isinstance(data, bytes | bytearray) else str(data)
            fixed = _LEADING_ZEROS.sub(lambda m: m.group(1) or m.group(2), text)
            if fixed != text:
                return json.loads(fixed, parse_float=parse_float)
        except ValueError:
            pass
        raise exc from None


_WS = "[ \t\n\r]*"  # JSON's whitespace, no more
_SCHEMA_HEAD = re.compile(_WS + r"\{" + _WS + r'"schema"' + _WS + ":" + _WS)
_PAYLOAD_HEAD = re.compile(_WS + "," + _WS + r'"payload"' + _WS + ":" + _WS)
_TAIL = re.compile(_WS + r"\}" + _WS)
_DECODER = json.JSONDecoder()
_EXACT_DECODER = json.JSONDecoder(parse_float=Decimal)
_RECENT = 16


class EnvelopeReader:
    """Reads ``{"schema": .., "payload": ..}`` documents: ``(value, avro schema)``.

    Schemas are translated once and cached (1000 of them, as JsonConverter's
    ``schemas.cache.size`` default); the cache hands out the same Avro schema object for every
    record of a schema, which the formats rely on to compare schemas cheaply.

    JsonConverter writes the schema first, and the same schema as the same text: a document that
    starts with the text of a schema seen recently only has its payload parsed. Anything else
    (another key order, whitespace, a new schema) is parsed whole.
    """

    def __init__(self, replace_null_with_default: bool = True, cache_size: int = 1000) -> None:
        self.replace_null_with_default = replace_null_with_default
        self._cache_size = cache_size
        self._cache: dict[str, tuple[Schema, Reader]] = {}
        self._texts: dict[str, tuple[Schema, Reader]] = {}
        """Schema text, exactly as it came, -> the cached schema: the fast path's look-up."""

    def schema(self, node: Any) -> tuple[Schema, Reader]:
        """``(avro schema, payload reader)`` of a JsonConverter schema, cached."""
        key = repr(node)
        hit = self._cache.get(key)
        if hit is None:
            cs = parse_schema(node, self.replace_null_with_default)
            try:
                hit = (avro_schema(cs), value_reader(cs, self.replace_null_with_default))
            except ConnectJsonError as exc:
                raise exc.within("schema") from None
            if len(self._cache) >= self._cache_size:
                self._cache.clear()
            self._cache[key] = hit
        return hit

    def read(self, data: bytes) -> tuple[Any, Schema | None]:
        """One Kafka value or key.

        Raises:
            ValueError: not JSON, not an envelope (JsonConverter's message), or a schema or
                payload JsonConverter rejects (:class:`ConnectJsonError`, naming the field).
        """
        exact = _DECIMAL_MARK in data
        text = None
        if self._texts:
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                pass
            else:
                fast = self._fast(text, exact)
                if fast is not None:
                    avro, reader, payload = fast
                    try:
                        return reader(payload), avro
                    except ConnectJsonError as exc:
                        raise exc.within("payload") from None
        doc = _loads(data, exact)
        if not isinstance(doc, dict) or len(doc) != 2 or "schema" not in doc or "payload" not in doc:
            raise ValueError(_ENVELOPE_MESSAGE)
        node, payload = doc["schema"], doc["payload"]
        if node is None:  # schemaless payload, typed by JSON alone
            return (_loads(data, False)["payload"] if exact else payload), None
        avro, reader = hit = self.schema(node)
        self._remember(data if text is None else text, hit)
        try:
            return reader(payload), avro
        except ConnectJsonError as exc:
            raise exc.within("payload") from None

    def _fast(self, text: str, exact: bool) -> tuple[Schema, Reader, Any] | None:
        """``(avro, reader, payload)`` when ``text`` is ``{"schema": <a recent schema's text>,
        "payload": <JSON>}`` and nothing else; None sends it down the full parse."""
        head = _SCHEMA_HEAD.match(text)
        if head is None:
            return None
        start = head.end()
        # a JSON object ends at its own closing brace: starting with a whole schema's text, the
        # document's schema is that text
        found = next(((t, hit) for t, hit in self._texts.items() if text.startswith(t, start)), None)
        if found is None:
            return None
        schema_text, (avro, reader) = found
        middle = _PAYLOAD_HEAD.match(text, start + len(schema_text))
        if middle is None:
            return None
        try:
            payload, end = (_EXACT_DECODER if exact else _DECODER).raw_decode(text, middle.end())
        except ValueError:
            return None  # the full parse reports it (or reads leading zeros)
        tail = _TAIL.match(text, end)
        if tail is None or tail.end() != len(text):
            return None
        return avro, reader, payload

    def _remember(self, data: bytes | str, hit: tuple[Schema, Reader]) -> None:
        """Keep the schema text of a document JsonConverter-shaped (schema first) for :meth:`_fast`."""
        try:
            text = data if isinstance(data, str) else data.decode("utf-8")
            head = _SCHEMA_HEAD.match(text)
            if head is None:
                return
            _node, end = _DECODER.raw_decode(text, head.end())
        except ValueError:
            return
        if len(self._texts) >= _RECENT:
            self._texts.clear()
        self._texts[text[head.end() : end]] = hit
