"""sink/records/intake.py: BatchBuilder, which forms a consumed run gets and where it is cut.

The converter pair decides the cheap forms (String/ByteArray keys only; schemaless JSON or Avro
values), runs are cut where values stop fitting a form, and ``behavior.on.null.values`` is
applied. Whatever the forms, a batch's records must be exactly the per-record reference's
(``cheap_forms=False``), record for record and error for error, and a cheap form must hold
exactly those records.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Message
from hypothesis import event, given, settings
from hypothesis import strategies as st

from sink.records.batch import RecordBatch
from sink.records.converters import (
    ByteArrayConverter,
    Converter,
    JsonConverter,
    RecordConverter,
    StringConverter,
    record_converter,
)
from sink.records.intake import BatchBuilder, NullValueSkipped
from tests.unit.sink.consumed import avro_converter, messages, wire

GOOD = b'{"id":1,"name":"a"}'
FLAT: dict[str, Any] = {
    "type": "record",
    "name": "R",
    "fields": [{"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"]}],
}
OTHER: dict[str, Any] = {**FLAT, "name": "R2", "fields": [*FLAT["fields"], {"name": "x", "type": "int"}]}


def avro(schema_id: int, i: int) -> bytes:
    if schema_id == 8:
        return wire(8, OTHER, {"id": i, "s": None, "x": i})
    return wire(schema_id, FLAT, {"id": i, "s": None if i % 2 else f"s{i}"})


def build(key: Converter, value: Converter, msgs: Sequence[Message], **kw: Any) -> list[RecordBatch]:
    """Batches as the runtime builds them; with ``check_json=False`` (connect.json.validate=false)
    its converter passes framed JSON text through unparsed, as the runtime's does for JSON -> JSON."""
    parse = None if kw.get("check_json", True) else (lambda _topic: False)
    return BatchBuilder(RecordConverter(key, value, parse), **kw).build("t", 0, msgs)


def forms(batch: RecordBatch) -> set[str]:
    found = set()
    if batch.json_lines(checked=False) is not None:
        found.add("json")
    if batch.avro_columns() is not None:
        found.add("avro")
    return found


def shape(batches: list[RecordBatch]) -> list[tuple[int, int, set[str]]]:
    return [(b.first_offset, b.last_offset, forms(b)) for b in batches]


def outcome(view: Sequence[Any], i: int) -> tuple[Any, ...]:
    """Record ``i`` of a view as comparable data, or its error (type, offset, stage, transient);
    an error must name ``i``, its position in the view it was read from."""
    try:
        record = view[i]
    except Exception as exc:  # ConversionError, or the null-value policy's RecordError
        assert exc.index == i  # type: ignore[attr-defined]
        return ("error", type(exc).__name__, exc.offset, exc.stage, exc.transient)  # type: ignore[attr-defined]
    return ("record", repr(record))


def outcomes(batches: list[RecordBatch]) -> list[tuple[int, tuple[Any, ...]]]:
    """Every record of ``batches`` (offset, outcome), each read in its own batch's view."""
    out = []
    for batch in batches:
        view = batch.records()
        out += [(batch.offset_at(i), outcome(view, i)) for i in range(len(batch))]
    return out


# ----------------------------------------------------------------------------- converter pairs

AVRO = "avro"  # placeholder: the AvroConverter is built per test (its registry is a stub)


def _converter(name: str) -> Converter:
    return {
        "bytes": ByteArrayConverter(),
        "string": StringConverter(),
        "string-UTF8-alias": StringConverter("UTF8"),
        "string-latin-1": StringConverter("latin-1"),
        "string-utf-16": StringConverter("utf-16"),
        "json": JsonConverter(False),
        "json-schemas": JsonConverter(True),
    }[name]


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("bytes", "json", {"json"}),
        ("string", "json", {"json"}),
        ("string-UTF8-alias", "json", {"json"}),
        ("string-latin-1", "json", {"json"}),  # a String key never fails, in any encoding
        ("string-utf-16", "json", {"json"}),
        ("json", "json", set()),  # a JSON key can fail in ways no bulk check sees
        ("json-schemas", "json", set()),
        ("bytes", "json-schemas", set()),  # values need the envelope taken apart
        ("bytes", "string", set()),
        ("bytes", "bytes", set()),
        ("string", "string", set()),
        ("bytes", AVRO, {"avro"}),
        ("string", AVRO, {"avro"}),
        ("string-latin-1", AVRO, {"avro"}),
        ("json", AVRO, set()),
    ],
)
def test_which_converter_pairs_give_which_forms(key: str, value: str, expected: set[str]) -> None:
    if value == AVRO:
        converter, _ = avro_converter({7: FLAT})
        values = [avro(7, i) for i in range(3)]
    else:
        converter = _converter(value)
        values = [b'{"schema":null,"payload":{"a":%d}}' % i for i in range(3)]
    msgs = messages(values, keys=[b"k0", b"k1", None])
    batches = build(_converter(key), converter, msgs)
    assert [(b.first_offset, b.last_offset) for b in batches] == [(0, 2)]
    assert forms(batches[0]) == expected
    # whatever the forms, the records are the per-record ones
    reference = build(_converter(key), converter, msgs, cheap_forms=False)
    assert forms(reference[0]) == set()
    assert outcomes(batches) == outcomes(reference)


def test_byte_keys_are_never_checked() -> None:
    msgs = messages([GOOD, GOOD], keys=[b"\xff", "€".encode()[:1]])
    (batch,) = build(ByteArrayConverter(), JsonConverter(False), msgs)
    assert batch.json_lines() == GOOD + b"\n" + GOOD
    converter, _ = avro_converter({7: FLAT})
    (batch,) = build(ByteArrayConverter(), converter, messages([avro(7, 0)], keys=[b"\xfe"]))
    assert batch.avro_columns() is not None


def test_the_default_converters_give_the_json_form() -> None:
    """No converter configured: ByteArray keys and schemaless JSON values (docs/configuration.md)."""
    (batch,) = BatchBuilder(record_converter({})).build("t", 0, messages([GOOD] * 3))
    assert batch.json_lines() == b"\n".join([GOOD] * 3)


# ---------------------------------------------------------------------------------- cut runs


def test_json_runs_are_cut_where_values_stop_being_framed() -> None:
    values: list[bytes | None] = [
        GOOD, GOOD, None, GOOD, b"42", b'"s"', GOOD, b'{"a":\n1}', b"[1]", GOOD, GOOD,
    ]
    batches = build(StringConverter(), JsonConverter(False), messages(values, first=10))
    assert shape(batches) == [
        (10, 11, {"json"}), (12, 12, set()), (13, 13, {"json"}), (14, 15, set()), (16, 16, {"json"}),
        (17, 18, set()), (19, 20, {"json"}),
    ]
    assert sum(map(len, batches)) == len(values)


def test_avro_runs_are_cut_by_schema_id_and_foreign_payloads() -> None:
    converter, registry = avro_converter({7: FLAT, 8: OTHER})
    values: list[bytes | None] = [
        avro(7, 0), avro(7, 1), None, avro(8, 3), b"\x01foreign", b"{}", avro(7, 6), avro(7, 7),
    ]
    batches = build(ByteArrayConverter(), converter, messages(values))
    assert shape(batches) == [
        (0, 1, {"avro"}), (2, 2, set()), (3, 3, {"avro"}), (4, 5, set()), (6, 7, {"avro"}),
    ]
    assert sorted(set(registry.asked)) == [7, 8]


def test_other_converters_give_one_batch_per_consumed_run() -> None:
    values: list[bytes | None] = [GOOD, None, b"42", b"\xff"]
    assert shape(build(ByteArrayConverter(), ByteArrayConverter(), messages(values))) == [(0, 3, set())]
    assert shape(build(StringConverter(), JsonConverter(False), messages(values), cheap_forms=False)) == [
        (0, 3, set())
    ]


def test_no_messages_no_batches() -> None:
    assert BatchBuilder(record_converter({})).build("t", 0, []) == []


# ----------------------------------------------------------------------- behavior.on.null.values


@pytest.mark.parametrize("cheap", [True, False])
def test_ignore_drops_tombstones_before_batches_are_built(cheap: bool) -> None:
    values: list[bytes | None] = [GOOD, None, None, GOOD, None, GOOD]
    batches = build(ByteArrayConverter(), JsonConverter(False), messages(values), null_values="ignore",
                    cheap_forms=cheap)
    kept = [b.offset_at(i) for b in batches for i in range(len(b))]
    assert kept == [0, 3, 5]
    assert all(r.value == {"id": 1, "name": "a"} for b in batches for r in b.records())
    if cheap:
        assert shape(batches) == [(0, 5, {"json"})]  # the dropped tombstones do not cut the run
    assert build(ByteArrayConverter(), JsonConverter(False), messages([None, None]), null_values="ignore",
                 cheap_forms=cheap) == []


def test_ignore_skips_a_value_that_converts_to_null() -> None:
    """JSON with schemas: a present value whose payload is null converts to a null value."""
    values: list[bytes | None] = [
        b'{"schema":{"type":"string","optional":true},"payload":"x"}',
        b'{"schema":{"type":"string","optional":true},"payload":null}',
        b'{"schema":{"type":"string","optional":true},"payload":"z"}',
    ]
    msgs = messages(values, first=4)
    (batch,) = build(ByteArrayConverter(), JsonConverter(True), msgs, null_values="ignore")
    view = batch.records()
    assert view[0].value == "x" and view[2].value == "z"
    with pytest.raises(NullValueSkipped) as raised:
        view[1]
    assert (raised.value.offset, raised.value.index) == (5, 1)
    (written,) = build(ByteArrayConverter(), JsonConverter(True), messages(values), null_values="write")
    assert written.records()[1].value is None


def test_ignore_skips_schemaless_json_null_text_too() -> None:
    """``null`` is a present value the schemaless JsonConverter converts to null (Connect's
    SinkRecord.value() == null), so ``ignore`` skips it like a tombstone."""
    msgs = messages([b'{"a":1}', b"null", b'{"b":2}'])
    batches = build(ByteArrayConverter(), JsonConverter(False), msgs, null_values="ignore")
    views = [b.records() for b in batches]
    with pytest.raises(NullValueSkipped):
        [record for view in views for record in view]


@pytest.mark.parametrize("cheap", [True, False])
def test_fail_makes_a_tombstone_a_record_error_of_the_per_record_view(cheap: bool) -> None:
    values: list[bytes | None] = [GOOD, GOOD, None, GOOD]
    msgs = messages(values, first=20)
    batches = build(ByteArrayConverter(), JsonConverter(False), msgs, null_values="fail", cheap_forms=cheap)
    results = outcomes(batches)
    assert [o for o, r in results if r[0] == "record"] == [20, 21, 23]
    ((offset, error),) = [(o, r) for o, r in results if r[0] == "error"]
    assert offset == 22 and error[1:4] == ("RecordError", 22, "TASK_PUT")
    tombstone_batch = next(b for b in batches if b.first_offset <= 22 <= b.last_offset)
    with pytest.raises(Exception, match=r"behavior\.on\.null\.values=fail") as raised:
        list(tombstone_batch.records())
    assert raised.value.index == tombstone_batch.index_of(22)  # type: ignore[attr-defined]


@pytest.mark.parametrize("cheap", [True, False])
def test_write_hands_tombstones_on(cheap: bool) -> None:
    batches = build(ByteArrayConverter(), JsonConverter(False), messages([GOOD, None]), cheap_forms=cheap)
    records = [r for b in batches for r in b.records()]
    assert [r.value for r in records] == [{"id": 1, "name": "a"}, None]


# ------------------------------------------------------------- cheap batches vs the reference

_valid = st.sampled_from([GOOD, b"{}", b'{"a":[1,{"b":null}],"s":"\\u00e9"}', '{"é":"€"}'.encode()])
_odd_framed = st.sampled_from(
    [b'{"a": }', b'{"a":NaN}', b'{"a":"\\ud800"}', b'{"a":"\xff"}', b"{}{}", b'{"a":1},{}']
)
_not_framed = st.sampled_from(
    [b"42", b'"s"', b"null", b"[1]", b'{"a":\n1}', b'{"a":1}\r', b"", b"not json", b"\xff"]
)
_values = st.one_of(_valid, _valid, _valid, _odd_framed, _not_framed, st.none())
_keys = st.one_of(
    st.none(), st.text(max_size=3).map(str.encode), st.sampled_from([b"\xff", b"\xe2\x82", b""])
)


@settings(max_examples=300, deadline=None)
@given(
    items=st.lists(st.tuples(_values, _keys), min_size=1, max_size=12),
    key=st.sampled_from(["bytes", "string"]),
    null_values=st.sampled_from(["write", "ignore", "fail"]),
    check_json=st.booleans(),
)
def test_a_cheap_json_batch_holds_exactly_the_per_record_records(
    items: list[tuple[bytes | None, bytes | None]], key: str, null_values: str, check_json: bool
) -> None:
    msgs = messages([v for v, _ in items], keys=[k for _, k in items])
    kw: dict[str, Any] = {"null_values": null_values, "check_json": check_json}
    cheap = build(_converter(key), JsonConverter(False), msgs, **kw)
    reference = build(_converter(key), JsonConverter(False), msgs, cheap_forms=False, **kw)
    assert outcomes(cheap) == outcomes(reference)
    used = 0
    for batch in cheap:
        text = batch.json_lines(checked=True)
        framed = batch.json_lines(checked=False)
        values = [m.value() for m in (batch.message(i) for i in range(len(batch)))]
        if framed is not None:
            assert framed == b"\n".join(values)  # type: ignore[arg-type]
        elif key == "bytes":  # byte keys never fail: a run of framed values always has its text
            assert not all(
                v is not None and v[:1] == b"{" and v[-1:] == b"}" and b"\n" not in v and b"\r" not in v
                for v in values
            )
        if text is None:
            continue
        used += len(batch)
        assert text == framed
        records = list(batch.records())  # text never hides a record error
        if check_json:
            assert [json.loads(line) for line in text.split(b"\n")] == [r.value for r in records]
    event("text used" if used else "per record only")


@functools.cache
def _shared_avro_converter() -> Converter:
    """One converter for every example (building its registry client costs tens of milliseconds)."""
    return avro_converter({7: FLAT, 8: OTHER})[0]


_avro_kinds = st.sampled_from(["id7", "id7", "id7", "id8", "tombstone", "foreign", "truncated", "unknown-id"])


@settings(max_examples=200, deadline=None)
@given(
    items=st.lists(st.tuples(_avro_kinds, _keys), min_size=1, max_size=10),
    key=st.sampled_from(["bytes", "string"]),
    null_values=st.sampled_from(["write", "ignore", "fail"]),
)
def test_a_cheap_avro_batch_holds_exactly_the_per_record_records(
    items: list[tuple[str, bytes | None]], key: str, null_values: str
) -> None:
    values: list[bytes | None] = []
    for i, (kind, _) in enumerate(items):
        values.append({
            "id7": lambda i: avro(7, i),
            "id8": lambda i: avro(8, i),
            "tombstone": lambda i: None,
            "foreign": lambda i: b"\x01" + avro(7, i)[1:],
            "truncated": lambda i: avro(7, i)[:-1],
            "unknown-id": lambda i: wire(99, FLAT, {"id": i, "s": None}),
        }[kind](i))
    msgs = messages(values, keys=[k for _, k in items])
    converter = _shared_avro_converter()
    cheap = build(_converter(key), converter, msgs, null_values=null_values)
    reference = build(_converter(key), converter, msgs, null_values=null_values, cheap_forms=False)
    assert outcomes(cheap) == outcomes(reference)
    for batch in cheap:
        columns = batch.avro_columns()
        if columns is not None:
            rows, schema = columns
            records = list(batch.records())
            assert rows.to_pylist() == [r.value for r in records]
            assert all(r.value_schema == schema for r in records)
            event("columns used")


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = b""
    while True:
        byte = z & 0x7F
        z >>= 7
        if z:
            out += bytes([byte | 0x80])
        else:
            return out + bytes([byte])


_HEADER = b"\x00\x00\x00\x00\x07"
_DAMAGED = {
    "truncated-body": lambda good: good[:-1],
    "a-byte-left-over": lambda good: good + b"\x00",
    "header-only": lambda good: _HEADER,
    "invalid-utf-8-string": lambda good: _HEADER + _varint(5) + b"\x02" + _varint(2) + b"\xff\xfe",
    "union-branch-2": lambda good: _HEADER + _varint(5) + b"\x04" + _varint(1) + b"x",
    "negative-string-length": lambda good: _HEADER + _varint(5) + b"\x02" + _varint(-1) + b"x",
    "varint-longer-than-10-bytes": lambda good: _HEADER + b"\xff" * 10 + b"\x01" + b"\x00",
}


@pytest.mark.parametrize("damage", list(_DAMAGED.values()), ids=list(_DAMAGED))
def test_a_damaged_avro_body_is_decided_as_per_record(damage: Any) -> None:
    """The run keeps its schema id (the header is fine), so only decoding can tell: the columns
    are then absent, and the records (and the damaged one's error, if fastavro finds one) are
    the per-record ones."""
    values: list[bytes | None] = [avro(7, i) for i in range(6)]
    values[3] = damage(values[3])
    msgs = messages(values)
    converter = _shared_avro_converter()
    cheap = build(ByteArrayConverter(), converter, msgs)
    reference = build(ByteArrayConverter(), converter, msgs, cheap_forms=False)
    assert outcomes(cheap) == outcomes(reference)
    (batch,) = cheap
    assert batch.avro_columns() is None  # a body that does not decode cleanly is left to fastavro
    assert batch.slice(0, 3).avro_columns() is None  # decoded once per consumed run, not per slice
