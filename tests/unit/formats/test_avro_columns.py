"""formats/avro_columns.py: column-wise Avro decoding must equal the per-record path, or refuse.

The per-record path is the reference: ``fastavro.schemaless_reader`` per body, then
``pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))``. For any flat schema and any
records, :func:`decode_columns` must give the same batch (same schema, same nulls, same values bit
for bit, NaN aside). For damaged bodies it may refuse (``None``: the per-record path then reports
the bad record), but whatever it accepts must be exactly what fastavro reads from those very
bytes, using every byte.
"""

from __future__ import annotations

import io
import math
import struct
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, example, given, settings
from hypothesis import strategies as st

from formats import avro_columns
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import decode_columns, flat_fields

_TYPES = ("boolean", "int", "long", "float", "double", "string", "bytes")
_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

# ------------------------------------------------------------------------------------- helpers


def _record(fields: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": "Flat", "namespace": "test", "fields": fields}


def encode(schema: Any, datum: Any) -> bytes:
    """The Avro binary body of ``datum`` (fastavro: what the Confluent serializer writes)."""
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), datum)
    return out.getvalue()


def field_pieces(schema: dict[str, Any], row: dict[str, Any]) -> list[bytes]:
    """The bytes of each field of ``row``: an Avro record body is its fields' encodings in order."""
    return [encode(_record([field]), {field["name"]: row[field["name"]]}) for field in schema["fields"]]


def decode(
    schema: dict[str, Any], bodies: list[bytes], gaps: list[bytes] | None = None
) -> pa.RecordBatch | None:
    """:func:`decode_columns` over the bodies joined with ``gaps`` (e.g. wire headers) between them."""
    fields = flat_fields(schema)
    assert fields is not None
    gaps = gaps or [b""] * len(bodies)
    data, starts, ends = b"", [], []
    for gap, body in zip(gaps, bodies, strict=True):
        data += gap
        starts.append(len(data))
        data += body
        ends.append(len(data))
    batch = decode_columns(
        data, np.array(starts, dtype=np.int64), np.array(ends, dtype=np.int64), fields, avro_to_arrow(schema)
    )
    if batch is not None:
        batch.validate(full=True)
    return batch


def fastavro_rows(schema: dict[str, Any], bodies: list[bytes]) -> tuple[list[Any] | None, bool]:
    """Rows fastavro reads (``None`` when it fails on a body) and whether every body was read whole."""
    parsed = fastavro.parse_schema(schema)
    rows, whole = [], True
    for body in bodies:
        stream = io.BytesIO(body)
        try:
            rows.append(fastavro.schemaless_reader(stream, parsed, None))
        except Exception:  # any failure: the per-record path rejects the record
            return None, False
        whole = whole and stream.read() == b""
    return rows, whole


def reference(schema: dict[str, Any], bodies: list[bytes]) -> pa.RecordBatch | None:
    """The per-record path's batch, or ``None`` when it rejects a record (fastavro or Arrow)."""
    rows, _whole = fastavro_rows(schema, bodies)
    if rows is None:
        return None
    try:
        return pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))
    except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError, ValueError):
        return None


def _float_bits(column: pa.Array) -> list[Any]:
    """Float values as bit patterns (so -0.0 differs from 0.0); every NaN as "NaN", nulls as None."""
    width = 4 if pa.types.is_float32(column.type) else 8
    code = "<f" if width == 4 else "<d"
    out: list[Any] = []
    for value in column.to_pylist():
        if value is None:
            out.append(None)
        elif math.isnan(value):
            out.append("NaN")
        else:
            out.append(struct.pack(code, value))
    return out


def assert_same_batch(got: pa.RecordBatch, want: pa.RecordBatch) -> None:
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.num_rows == want.num_rows
    for name, a, b in zip(got.schema.names, got.columns, want.columns, strict=True):
        assert a.null_count == b.null_count, name
        assert a.is_null().to_pylist() == b.is_null().to_pylist(), name
        if pa.types.is_floating(a.type):
            assert _float_bits(a) == _float_bits(b), name
        else:
            assert a.to_pylist() == b.to_pylist(), name
            assert [type(v) for v in a.to_pylist()] == [type(v) for v in b.to_pylist()], name


# ---------------------------------------------------------------------------------- strategies

_names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,7}", fullmatch=True)
_text = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),  # anything UTF-8 can carry: astral planes, U+FFFE, ...
        st.sampled_from(["\x00", "é", "\u2028", "\U0001f600", "\U0010ffff", "\ufeff"]),
    ),
    max_size=12,
)
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "boolean": st.booleans(),
    "int": st.one_of(st.integers(*_INT32), st.sampled_from([*_INT32, 0, -1, 63, -64, 64, -65])),
    "long": st.one_of(st.integers(*_INT64), st.sampled_from([*_INT64, 2**31, -(2**31) - 1, 2**53 + 1])),
    "float": st.one_of(
        st.floats(width=32, allow_nan=True, allow_infinity=True),
        st.sampled_from(
            [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.401298464324817e-45, 3.4028234663852886e38]
        ),
    ),
    "double": st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([math.nan, -math.nan, math.inf, -math.inf, -0.0, 5e-324, 1.7976931348623157e308]),
    ),
    "string": st.one_of(_text, st.just("")),
    "bytes": st.one_of(st.binary(max_size=12), st.just(b""), st.just(b"\x00\xff\x80")),
}


@st.composite
def flat_cases(draw: st.DrawFn, min_rows: int = 1, max_rows: int = 25) -> tuple[dict[str, Any], list[dict]]:
    """A flat record schema (random names, types, nullability in either branch order) and rows."""
    names = draw(st.lists(_names, min_size=1, max_size=6, unique_by=str.lower))
    fields, makers = [], {}
    for name in names:
        kind = draw(st.sampled_from(_TYPES))
        nullable = draw(st.sampled_from(["no", "null first", "null last"]))
        if nullable == "no":
            fields.append({"name": name, "type": kind})
            makers[name] = _VALUES[kind]
        else:
            union = ["null", kind] if nullable == "null first" else [kind, "null"]
            fields.append({"name": name, "type": union, **({"default": None} if union[0] == "null" else {})})
            makers[name] = st.one_of(st.none(), _VALUES[kind])
    rows = draw(st.lists(st.fixed_dictionaries(makers), min_size=min_rows, max_size=max_rows))
    return _record(fields), rows


# ------------------------------------------------------------------------------- the property


@settings(max_examples=300, deadline=None)
@given(case=flat_cases(), data=st.data())
def test_decode_columns_equals_the_per_record_path(case: tuple[dict[str, Any], list[dict]], data) -> None:
    schema, rows = case
    bodies = [encode(schema, row) for row in rows]
    # whatever sits between the bodies (wire headers in the sink) must not matter
    gaps = data.draw(st.lists(st.binary(max_size=6), min_size=len(bodies), max_size=len(bodies)))
    got = decode(schema, bodies, gaps)
    want = reference(schema, bodies)
    assert want is not None, "fastavro + from_pylist must take what fastavro wrote"
    assert got is not None, "a clean body of a flat schema must decode column by column"
    assert_same_batch(got, want)


@pytest.mark.parametrize("kind", _TYPES)
@pytest.mark.parametrize("nullable", ["no", "null first", "null last"])
def test_every_type_at_its_edges_in_one_batch(kind: str, nullable: str) -> None:
    edges: dict[str, list[Any]] = {
        "boolean": [True, False],
        "int": [*_INT32, 0, -1, 1, 63, -64, 64, 8191, -8192],
        "long": [*_INT64, 0, -1, 2**31, -(2**31) - 1, 2**56, -(2**56)],
        "float": [math.nan, math.inf, -math.inf, -0.0, 0.0, 1.5, 1.401298464324817e-45],
        "double": [math.nan, math.inf, -math.inf, -0.0, 0.0, 0.1, 5e-324],
        "string": ["", "\x00", "a\x00b", "\U0001f600\U0010ffff", "é" * 200, "\ufffe\uffff"],
        "bytes": [b"", b"\x00", b"\xff" * 200, bytes(range(256))],
    }
    ftype: Any = kind if nullable == "no" else ["null", kind] if nullable == "null first" else [kind, "null"]
    schema = _record([{"name": "a", "type": ftype}, {"name": "z", "type": "int"}])
    values = edges[kind] + ([None, None] if nullable != "no" else [])
    rows = [{"a": v, "z": i} for i, v in enumerate(values)]
    bodies = [encode(schema, row) for row in rows]
    got, want = decode(schema, bodies), reference(schema, bodies)
    assert got is not None and want is not None
    assert_same_batch(got, want)


def test_all_null_and_no_null_columns_and_one_record() -> None:
    schema = _record([{"name": "s", "type": ["null", "string"]}, {"name": "d", "type": ["double", "null"]}])
    for rows in ([{"s": None, "d": None}] * 3, [{"s": "x", "d": 1.0}] * 3, [{"s": None, "d": 2.0}]):
        bodies = [encode(schema, r) for r in rows]
        got = decode(schema, bodies)
        assert got is not None
        assert_same_batch(got, reference(schema, bodies))


def test_bodies_out_of_order_in_the_joined_bytes_decode_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    """Text columns are cut from the joined bytes by offsets when the bodies lie in order there
    (the sink's batches); bodies given in any other order take the byte-by-byte gather, same rows.
    (The numpy decoder's two ways; the C module copies each text where it lies, in any order.)"""
    schema = _record([
        {"name": "s", "type": "string"},
        {"name": "n", "type": ["null", "string"]},
        {"name": "b", "type": "bytes"},
    ])
    rows = [{"s": f"s{i}" * i, "n": None if i % 3 else "é" * i, "b": bytes([i]) * i} for i in range(7)]
    bodies = [encode(schema, row) for row in rows]
    data = b"".join(bodies)
    ends = np.cumsum([len(b) for b in bodies])
    starts = ends - [len(b) for b in bodies]
    fields = flat_fields(schema)
    assert fields is not None
    order = np.array([3, 0, 6, 1, 5, 2, 4])
    from_c = decode_columns(data, starts[order], ends[order], fields, avro_to_arrow(schema))
    monkeypatch.setattr(avro_columns, "_native", None)
    gathered = []
    real = avro_columns._gathered
    monkeypatch.setattr(avro_columns, "_gathered", lambda *args: gathered.append(1) or real(*args))
    got = decode_columns(data, starts[order], ends[order], fields, avro_to_arrow(schema))
    want = reference(schema, [bodies[i] for i in order])
    assert got is not None and want is not None
    assert_same_batch(got, want)
    assert len(gathered) == 3  # every text column took the fallback
    assert from_c is not None
    assert_same_batch(from_c, want)


def test_non_canonical_varints_decode_as_fastavro_reads_them() -> None:
    """Zero written as 0x80 0x00 (legal, if wasteful): fastavro reads 0, so must the columns."""
    schema = _record([{"name": "u", "type": ["null", "long"]}, {"name": "s", "type": "string"}])
    bodies = [b"\x82\x00" + b"\x80\x00" + b"\x80\x00", b"\x00" + b"\x82\x80\x00" + b"a"]
    want = reference(schema, bodies)
    assert want is not None and want.to_pylist() == [{"u": 0, "s": ""}, {"u": None, "s": "a"}]
    got = decode(schema, bodies)
    assert got is not None
    assert_same_batch(got, want)


# ----------------------------------------------------------------------------- damaged bodies


def _check_refused_or_identical(schema: dict[str, Any], bodies: list[bytes]) -> pa.RecordBatch | None:
    """The rule for damaged input: ``None``, or exactly what fastavro reads using every byte."""
    got = decode(schema, bodies)
    if got is None:
        return None
    rows, whole = fastavro_rows(schema, bodies)
    assert rows is not None, "accepted bodies fastavro cannot read"
    assert whole, "accepted bodies with bytes fastavro leaves unread"
    want = reference(schema, bodies)
    assert want is not None, "accepted values the per-record path rejects (Arrow conversion)"
    assert_same_batch(got, want)
    return got


def _padded(varint: bytes) -> bytes:
    """The same number as a longer (non-canonical, still legal) varint: one more 0x00 group."""
    return varint[:-1] + bytes([varint[-1] | 0x80, 0]) if len(varint) < 10 else varint


_TARGETED: dict[str, tuple[str, ...]] = {
    "union branch": ("nullable",),
    "bad utf-8": ("string",),
    "bool byte": ("boolean",),
    "int overflow": ("int",),
    "long varint": ("int", "long", "string", "bytes"),
    "padded varint": ("int", "long", "string", "bytes", "nullable"),
}
"""Targeted damage, and which fields it applies to ("nullable": any field in a union)."""


def _damage(draw: st.DrawFn, schema: dict[str, Any], row: dict[str, Any], body: bytes) -> tuple[str, bytes]:
    """One damaged version of ``body``; targeted damage rewrites one field's bytes."""
    pieces = field_pieces(schema, row)
    assert b"".join(pieces) == body
    fields = schema["fields"]

    def tags(ftype: Any) -> set[str]:
        return {ftype} if isinstance(ftype, str) else {"nullable", next(t for t in ftype if t != "null")}

    usable = {
        how: [i for i, f in enumerate(fields) if tags(f["type"]) & set(kinds)]
        for how, kinds in _TARGETED.items()
    }
    how = draw(st.sampled_from(["truncate", "append", "flip", *(h for h, idx in usable.items() if idx)]))
    if how == "truncate":
        return how, body[: draw(st.integers(0, len(body) - 1))]
    if how == "append":
        return how, body + draw(st.binary(min_size=1, max_size=3))
    if how == "flip":
        damaged = bytearray(body)
        for _ in range(draw(st.integers(1, 3))):
            damaged[draw(st.integers(0, len(damaged) - 1))] = draw(st.integers(0, 255))
        return how, bytes(damaged)
    index = draw(st.sampled_from(usable[how]))
    ftype = fields[index]["type"]
    kind = ftype if isinstance(ftype, str) else next(t for t in ftype if t != "null")
    branch = b"" if isinstance(ftype, str) else encode("long", ftype.index(kind))
    value = row[fields[index]["name"]]
    if how == "union branch":
        bad = draw(st.sampled_from([2, 3, -1, 64]))
        pieces[index] = encode("long", bad) + pieces[index][1:]
    elif how == "bad utf-8":
        junk = draw(
            st.sampled_from([b"\xff", b"\x80", b"\xc3", b"\xed\xa0\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"])
        )
        text = draw(st.sampled_from([b"", b"ok", "é".encode()]))
        payload = text + junk + text
        pieces[index] = branch + encode("long", len(payload)) + payload
    elif how == "bool byte":
        pieces[index] = branch + bytes([draw(st.integers(2, 255))])
    elif how == "int overflow":
        pieces[index] = branch + encode("long", draw(st.sampled_from([2**31, -(2**31) - 1, 2**40, *_INT64])))
    elif how == "long varint":
        # eleven bytes, or a tenth byte carrying bits beyond 64: no Avro long
        pieces[index] = branch + draw(
            st.sampled_from([b"\x80" * 10 + b"\x00", b"\xff" * 9 + b"\x7f", b"\xff" * 10])
        )
    elif isinstance(ftype, list) and (
        value is None or kind not in ("int", "long", "string", "bytes") or draw(st.booleans())
    ):  # padded varint: the union branch
        pieces[index] = _padded(pieces[index][:1]) + pieces[index][1:]
    else:  # padded varint: the number, or the length of the text or bytes
        number = len(value.encode() if kind == "string" else value) if kind in ("string", "bytes") else value
        head = encode("long", number)
        rest = pieces[index][len(branch) + len(head) :]
        pieces[index] = branch + _padded(head) + rest
    return how, b"".join(pieces)


_MUST_REFUSE = {"union branch", "bad utf-8", "int overflow", "long varint"}
"""Damage the columns must always refuse."""
_REFERENCE_REJECTS = {"bad utf-8", "int overflow"}
"""Damage the per-record path rejects too. It does read an over-long varint (fastavro keeps
reading bytes) and union branch -1 (Python's ``list[-1]``): refusing those hands them to it."""


@settings(max_examples=400, deadline=None)
@given(case=flat_cases(min_rows=1, max_rows=8), data=st.data())
def test_damaged_bodies_are_refused_or_decoded_exactly_as_fastavro_reads_them(case, data) -> None:
    schema, rows = case
    bodies = [encode(schema, row) for row in rows]
    index = data.draw(st.integers(0, len(bodies) - 1))
    how, bodies[index] = _damage(data.draw, schema, rows[index], bodies[index])
    got = _check_refused_or_identical(schema, bodies)
    event(f"{how}: {'refused' if got is None else 'decoded'}")
    if how == "padded varint":  # legal Avro: fastavro reads the same row, so must the columns
        assert got is not None
        assert_same_batch(got, reference(schema, [encode(schema, row) for row in rows]))
    if how in _MUST_REFUSE:
        assert got is None
    if how in _REFERENCE_REJECTS:
        assert reference(schema, bodies) is None


@pytest.mark.parametrize(
    ("ftype", "body"),
    [
        pytest.param(["null", "int"], b"\x04\x02", id="union-branch-2"),
        pytest.param(["int", "null"], b"\x04\x02", id="union-branch-2-null-last"),
        pytest.param(["null", "int"], b"\x01\x02", id="union-branch-minus-1"),  # fastavro: list[-1]
        pytest.param("boolean", b"\x02", id="bool-byte-2"),  # fastavro reads True
        pytest.param("boolean", b"\xff", id="bool-byte-255"),
        pytest.param(["null", "boolean"], b"\x02\x02", id="nullable-bool-byte-2"),
        pytest.param("int", encode("long", 2**31), id="int-2**31"),
        pytest.param("int", encode("long", -(2**31) - 1), id="int-minus-2**31-minus-1"),
        pytest.param("long", b"\xff" * 10 + b"\x01", id="eleven-byte-varint"),
        pytest.param("long", b"\xfe" + b"\xff" * 8 + b"\x03", id="varint-beyond-64-bits"),
        pytest.param("string", b"\x06\xed\xa0\x80", id="utf-8-surrogate"),
        pytest.param("string", b"\x04\xc0\x80", id="utf-8-overlong-nul"),
        pytest.param("string", b"\x02\xff", id="utf-8-ff"),
        pytest.param("string", b"\x01", id="negative-length"),
        pytest.param("string", b"\x06ab", id="string-past-its-record"),
        pytest.param(["null", "string"], b"\x02", id="nullable-string-missing-length"),
        pytest.param("bytes", b"\x0a\x00", id="bytes-past-its-record"),
        pytest.param("double", b"\x00" * 7, id="double-short"),
        pytest.param(["double", "null"], b"\x00\x00\x00", id="nullable-double-short"),
        pytest.param("float", b"\x00\x00\x80\x3f\x00", id="float-plus-a-byte"),
        pytest.param("long", b"", id="empty-body"),
        pytest.param(["null", "long"], b"", id="empty-nullable-body"),
    ],
)
def test_damaged_single_field_bodies(ftype: Any, body: bytes) -> None:
    schema = _record([{"name": "a", "type": ftype}])
    plain = {"boolean": True, "string": "x", "bytes": b"x", "double": 1.0, "float": 1.0, "int": 7, "long": 7}
    good = encode(schema, {"a": None if isinstance(ftype, list) else plain[ftype]})
    for bodies in ([body], [good, body], [body, good], [good, body, good]):
        assert decode(schema, bodies) is None
        _check_refused_or_identical(schema, bodies)


def test_the_last_body_cannot_borrow_the_padding() -> None:
    """A body cut short at the very end of the data: the zero padding must not complete it."""
    schema = _record([{"name": "a", "type": "long"}, {"name": "b", "type": ["null", "double"]}])
    whole = encode(schema, {"a": 1, "b": 2.0})
    for cut in range(len(whole)):
        assert decode(schema, [whole, whole[:cut]]) is None
    body = encode(_record([{"name": "a", "type": "string"}]), {"a": "abc"})
    assert decode(_record([{"name": "a", "type": "string"}]), [body[:-1]]) is None


def test_signalling_float32_nan_is_a_nan_on_both_paths() -> None:
    schema = _record([{"name": "f", "type": "float"}])
    bodies = [struct.pack("<I", 0x7F800001), struct.pack("<I", 0xFFA00000), struct.pack("<f", 1.0)]
    got, want = decode(schema, bodies), reference(schema, bodies)
    assert got is not None and want is not None
    assert_same_batch(got, want)  # NaN-aware: both are NaN


def test_signalling_float32_nan_keeps_the_per_record_bits() -> None:
    """float32 NaN payloads: the per-record path goes float32 -> Python float -> float32, which
    quiets a signalling NaN (0x7f800001 -> 0x7fc00001); the columns must write what it writes."""
    schema = _record([{"name": "f", "type": "float"}])
    bodies = [struct.pack("<I", 0x7F800001), struct.pack("<I", 0xFFA00000), struct.pack("<f", 1.0)]
    got, want = decode(schema, bodies), reference(schema, bodies)
    assert got is not None and want is not None
    assert got.column(0).buffers()[1].to_pybytes() == want.column(0).buffers()[1].to_pybytes()


# ------------------------------------------------------------------------------- flat_fields


@pytest.mark.parametrize(
    ("ftype", "expected"),
    [
        ("boolean", ("a", "boolean", -1)),
        ("bytes", ("a", "bytes", -1)),
        (["null", "string"], ("a", "string", 0)),
        (["double", "null"], ("a", "double", 1)),
    ],
)
def test_flat_fields_names_the_type_and_the_null_branch(ftype: Any, expected: tuple) -> None:
    assert flat_fields(_record([{"name": "a", "type": ftype}, {"name": "b", "type": "long"}])) == (
        expected,
        ("b", "long", -1),
    )


_NESTED = {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}


@pytest.mark.parametrize(
    "ftype",
    [
        pytest.param(_NESTED, id="nested-record"),
        pytest.param(["null", _NESTED], id="nullable-nested-record"),
        pytest.param({"type": "array", "items": "int"}, id="array"),
        pytest.param({"type": "map", "values": "string"}, id="map"),
        pytest.param({"type": "enum", "name": "E", "symbols": ["A", "B"]}, id="enum"),
        pytest.param(["null", {"type": "enum", "name": "E2", "symbols": ["A"]}], id="nullable-enum"),
        pytest.param({"type": "fixed", "name": "F", "size": 4}, id="fixed"),
        pytest.param({"type": "int", "logicalType": "date"}, id="date"),
        pytest.param({"type": "int", "logicalType": "time-millis"}, id="time-millis"),
        pytest.param({"type": "long", "logicalType": "timestamp-millis"}, id="timestamp-millis"),
        pytest.param({"type": "long", "logicalType": "timestamp-micros"}, id="timestamp-micros"),
        pytest.param({"type": "long", "logicalType": "local-timestamp-millis"}, id="local-timestamp"),
        pytest.param({"type": "string", "logicalType": "uuid"}, id="uuid"),
        pytest.param({"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}, id="decimal"),
        pytest.param(["null", {"type": "long", "logicalType": "timestamp-millis"}], id="nullable-timestamp"),
        pytest.param(["null", "int", "string"], id="three-branch-union"),
        pytest.param(["int", "null", "string"], id="three-branch-union-null-middle"),
        pytest.param(["int", "string"], id="two-branch-union-without-null"),
        pytest.param(["null"], id="one-branch-union"),
        pytest.param(["null", "null"], id="null-null-union"),
        pytest.param("null", id="null"),
        pytest.param("In", id="named-type-reference"),
    ],
)
def test_flat_fields_rejects_anything_but_primitives(ftype: Any) -> None:
    schema = _record([{"name": "ok", "type": "long"}, {"name": "a", "type": ftype}])
    assert flat_fields(schema) is None


@pytest.mark.parametrize(
    "schema",
    [
        pytest.param("string", id="primitive"),
        pytest.param(["null", _record([{"name": "a", "type": "int"}])], id="nullable-record"),
        pytest.param({"type": "array", "items": "int"}, id="array"),
        pytest.param(_record([]), id="no-fields"),
        pytest.param({"type": "error", "name": "E", "fields": [{"name": "a", "type": "int"}]}, id="error"),
        pytest.param(None, id="none"),
    ],
)
def test_flat_fields_rejects_values_that_are_not_a_flat_record(schema: Any) -> None:
    assert flat_fields(schema) is None


@example(ftype={"type": "int"})
@given(ftype=st.sampled_from([{"type": t} for t in _TYPES]))
def test_primitive_written_as_a_type_object_is_refused_or_decoded_exactly(ftype: dict[str, str]) -> None:
    """``{"type": "int"}`` means ``"int"``; taking it or not is a choice, decoding it wrong is not."""
    schema = _record([{"name": "a", "type": ftype}])
    fields = flat_fields(schema)
    if fields is None:
        return
    value = {
        "boolean": True,
        "int": -5,
        "long": 2**40,
        "float": 0.5,
        "double": -0.0,
        "string": "é",
        "bytes": b"\0",
    }
    bodies = [encode(schema, {"a": value[ftype["type"]]})]
    got, want = decode(schema, bodies), reference(schema, bodies)
    assert got is not None and want is not None
    assert_same_batch(got, want)
