"""Every STOREAS format x every converter pair: batches with cheap forms write what per-record batches write.

The same Kafka messages are sunk twice (see :mod:`tests.unit.formats.sinking`): once through
``BatchBuilder(cheap_forms=False)`` (the per-record reference) and once through the ordinary
builder, whose batches carry the joined JSON text (schemaless JSON values) or the Avro columns
(Confluent Avro values) when their keys allow it. Both runs must leave the same files, as read back
by independent readers, byte for byte where the format is deterministic (JSON, CSV, TEXT, BYTES;
AVRO apart from its random sync marker; PARQUET: the same Arrow schema and rows), and the same
record errors (offset, Connect stage, error class). Each stream mixes the records that take other
paths: tombstones, multi-line and malformed JSON, scalars, invalid UTF-8, non-finite numbers,
integers beyond 2**53, lone surrogates, bad keys, schema changes mid-stream, Avro bodies that do not
decode, several schema ids, a nested schema.

Which forms were served (and so could be used) is checked too: a cheap form that silently stopped
being offered, or one decoded for a format that never uses it, fails here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formats._rows as rows_module
from formats import FormatSettings
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.converters import Converter
from tests.unit.formats.sinking import (
    Outcome,
    assert_same,
    builders,
    forms_seen,
    key_converter,
    messages,
    sink,
    value_converter,
    wire,
)

FREEZE = 20
"""Rows after which AVRO and PARQUET fix an inferred schema (1,000 in production)."""

ENVELOPE = EnvelopeFields(key=True, value=True, headers=True, metadata=True)

SETTINGS = {
    "JSON": FormatSettings(format=StoreFormat.JSON),
    "JSON-GZIP": FormatSettings(format=StoreFormat.JSON, codec="GZIP"),
    "JSON-envelope": FormatSettings(format=StoreFormat.JSON, envelope=ENVELOPE),
    "AVRO": FormatSettings(format=StoreFormat.AVRO),
    "AVRO-envelope": FormatSettings(format=StoreFormat.AVRO, envelope=ENVELOPE),
    "PARQUET": FormatSettings(format=StoreFormat.PARQUET),
    "PARQUET-envelope": FormatSettings(format=StoreFormat.PARQUET, envelope=ENVELOPE),
    "CSV": FormatSettings(format=StoreFormat.CSV),
    "CSV_WITHHEADERS": FormatSettings(format=StoreFormat.CSV_WITHHEADERS),
    "TEXT": FormatSettings(format=StoreFormat.TEXT),
    "BYTES": FormatSettings(format=StoreFormat.BYTES),
}

# ------------------------------------------------------------------------------- Avro schemas

READING: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "station", "type": ["null", "string"], "default": None},
        {"name": "value", "type": ["double", "null"]},
        {"name": "ok", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "int"},
    ],
}
EVOLVED: dict[str, Any] = {
    **READING,
    "fields": [*READING["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
RETYPED: dict[str, Any] = {
    **READING,
    "fields": [*READING["fields"][:-1], {"name": "n", "type": "long"}],
}
NESTED: dict[str, Any] = {
    "type": "record",
    "name": "Outer",
    "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
REGISTRY: dict[int, Any] = {
    1: READING,
    2: json.loads(json.dumps(READING)),  # the same schema registered again under another id
    3: EVOLVED,
    4: NESTED,
    5: RETYPED,
}


def reading(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": i,
        "station": None if i % 4 == 0 else f"stätion-{i}\U0001f600, \"q\"",
        "value": None if i % 5 == 0 else (math.nan if i % 11 == 0 else i / 7),
        "ok": i % 2 == 0,
        "raw": bytes([i % 256]) * (i % 3),
        "n": -i,
        **extra,
    }


def avro_values() -> list[bytes | None]:
    """Runs of schema id 1 with one odd value each (an odd value in a run of good ones, so that
    no other odd value hides it), between runs of other ids and shapes."""

    def ones(start: int, count: int) -> list[bytes | None]:
        return [wire(1, READING, reading(i)) for i in range(start, start + count)]

    good = wire(1, READING, reading(0))
    odd: list[bytes | None] = [
        good[:-3],  # a body that does not decode (truncated)
        good + b"\x02",  # a byte after the body: fastavro ignores it, the column decoder refuses it
        b"\x00\x00\x00\x00\x01\x02\x04",  # a union branch index out of range
        b"\x00\x00\x00\x00\x01",  # a header and no body
    ]
    between: list[list[bytes | None]] = [
        [None],  # tombstone
        [wire(2, REGISTRY[2], reading(i)) for i in range(30, 40)],  # an equal schema, another id
        [wire(3, EVOLVED, reading(i, note="n")) for i in range(50, 55)],  # a new field
        [b"\x01\x00\x00\x00\x01" + good[5:], b"{}"],  # not magic byte 0; JSON
        [wire(99, READING, reading(i)) for i in range(60, 63)],  # an id the registry does not know
        [wire(4, NESTED, {"id": i, "inner": {"x": i}, "tags": ["a", "b"][: i % 3]}) for i in range(63, 71)],
        [wire(5, RETYPED, reading(i)) for i in range(71, 76)],  # a retyped field
    ]
    out = ones(1000, 30)
    for i, values in enumerate(between):
        out += values
        out += ones(2000 + 100 * i, 9)
        if i < len(odd):
            out.append(odd[i])
            out += ones(2050 + 100 * i, 7)
    return out + ones(3000, 30)


# ------------------------------------------------------------------------ schemaless JSON


def row(i: int, **changes: Any) -> dict[str, Any]:
    base = {"id": i, "name": f"n{i} é \U0001f600", "x": i + 0.5, "ok": i % 3 == 0}
    base.update(changes)
    return base


def text(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def json_values() -> list[bytes | None]:
    out: list[bytes | None] = [text(row(i)) for i in range(30)]
    odd: list[bytes | None] = [
        None,  # tombstone
        b'{\n  "id": 1,\n  "name": "multi-line"\n}',
        b"17",
        b'"scalar"',
        b"[1,2]",
        b"true",
        b'{"id":2,}',  # malformed inside braces
        b'{"id":3},{"id":4}',  # two documents
        b'{"id":3} {"id":4}',
        b'{"id":5,"name":"\xff"}',  # invalid UTF-8
        b'{"id":6,"name":"a","x":NaN,"ok":true}',
        b'{"id":7,"name":"a","x":-NaN,"ok":true}',  # not JSON for json.loads; Arrow reads it
        b'{"id":8,"name":"a","x":Infinity,"ok":true}',
        b'{"id":9,"name":"a","x":9007199254740993,"ok":true}',  # beyond 2**53 in a double column
        b'{"id":10,"name":"\\ud800","x":1.5,"ok":true}',  # lone surrogate escape
        b'"\\udc00"',  # a string value that is a lone surrogate
        b'{"id":11,"name":"a","x":1.5,"ok":true,"extra":1}',  # a new field
        b'{"id":"12","name":"a","x":1.5,"ok":true}',  # a retyped field
        b'{"id":13,\r"name":"cr","x":1.5,"ok":true}',  # a carriage return inside
        b'{"id":14,"inner":{"y":2},"x":1.5}',  # nested
        b"{}",
        b'{"id":15,"id":16,"name":"a","x":1.5,"ok":true}',  # a repeated key
        b"not json",
    ]
    for i, value in enumerate(odd):
        # a good row on several lines ends the run before: each odd value sits in its own run
        out.append(json.dumps(row(100 + 10 * i), indent=1).encode())
        out += [text(row(101 + 10 * i + j)) for j in range(2 + i % 3)]
        out.append(value)
        out += [text(row(105 + 10 * i + j)) for j in range(4)]
    out += [text(row(i)) for i in range(500, 540)]
    return out


CONNECT_V1 = {
    "type": "struct",
    "name": "shop.Order",
    "fields": [
        {"field": "id", "type": "int64"},
        {"field": "name", "type": "string", "optional": True},
        {"field": "amount", "type": "float64"},
    ],
}
CONNECT_V2 = {
    **CONNECT_V1,
    "fields": [*CONNECT_V1["fields"], {"field": "note", "type": "string", "optional": True}],
}


def envelope_values() -> list[bytes | None]:
    def doc(i: int, schema: Any = CONNECT_V1, **extra: Any) -> bytes:
        return text({"schema": schema, "payload": {"id": i, "name": f"n{i}", "amount": i / 4, **extra}})

    out: list[bytes | None] = [doc(i) for i in range(30)]
    out += [None, text({"schema": CONNECT_V1, "payload": None})]  # tombstone, null payload
    out += [doc(i) for i in range(30, 40)]
    out += [text({"payload": {"id": 1}})]  # no schema field: the converter rejects it
    out += [doc(i, CONNECT_V2, note="v2") for i in range(40, 45)]  # a new field
    out += [text({"schema": None, "payload": {"id": 45}})]  # schemaless payload
    out += [text({"schema": {"type": "string"}, "payload": "a string"})]
    out += [doc(i) for i in range(46, 60)]
    out += [b'{"schema":{"type":"int64"},"payload":1,}']  # malformed
    out += [doc(i) for i in range(61, 80)]
    return out


def string_values() -> list[bytes | None]:
    out: list[bytes | None] = [f"line {i} é \U0001f600".encode() for i in range(20)]
    out += [None, b"two\nlines", b"\xff\xfe not UTF-8", b'{"a":1}', b"", b"cr\r"]
    out += [f"line {i}".encode() for i in range(20, 40)]
    return out


def bytes_values() -> list[bytes | None]:
    out: list[bytes | None] = [bytes([i, 0, 255]) * (i % 4) for i in range(12)]
    out += [None, b'{"a":1}', b"", b"\xff\xfe"]
    out += [bytes([i]) for i in range(12, 20)]
    return out


STREAMS: dict[str, Callable[[], list[bytes | None]]] = {
    "json": json_values,
    "json-schemas": envelope_values,
    "avro": avro_values,
    "string": string_values,
    "bytes": bytes_values,
}


def keys(kind: str, count: int) -> list[bytes | None]:
    """Keys of every shape; text keys include two that are not UTF-8 (U+FFFD, never an error)."""
    out: list[bytes | None] = []
    for i in range(count):
        if i % 7 == 3:
            out.append(None)
        elif kind == "string" and i in (15, 45):
            out.append(b"\xffnot UTF-8")  # converts with a replacement character
        elif kind == "string":
            out.append(f"kö{i}".encode())
        else:
            out.append(b"\x00\xff" + bytes([i % 256]))
    return out


def headers(i: int) -> list[tuple[str, str | bytes | None]] | None:
    every: list[tuple[str, str | bytes | None]] = [
        ("trace", f"t{i}".encode()), ("bin", b"\xff\x00"), ("trace", None)
    ]
    return every[: i % 4] or None


# ------------------------------------------------------------------------------- the test


def expected_forms(fmt: str, value: str) -> tuple[str | None, str | None]:
    """``(form the batches offer, form the format uses)`` for the cheap run."""
    offered = {"json": "json", "avro": "avro"}.get(value)
    used = None
    if fmt in ("JSON", "JSON-GZIP") and offered == "json":
        used = "json"
    elif fmt == "PARQUET" and offered is not None:
        used = offered
    elif fmt == "AVRO" and offered == "json":
        used = "json"  # schemaless values: JSON lines parsed by Arrow, encoded column-wise
    elif fmt == "AVRO" and offered == "avro":
        used = "bodies"  # written as they came, checked without decoding them
    return offered, used


TEXT_ONLY = ("CSV", "CSV_WITHHEADERS", "TEXT", "BYTES")
"""Formats that encode text to UTF-8 themselves (AVRO, PARQUET check for lone surrogates)."""


@pytest.fixture
def small_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rows_module, "FREEZE_ROWS", FREEZE)


CALLS = {
    "polls": ((50, 7, 1, 100, 13), ()),
    "polls+rooms": ((64, 200), (3, 1, 40)),
}


@pytest.mark.parametrize("calls", list(CALLS))
@pytest.mark.parametrize("key", ["bytes", "string"])
@pytest.mark.parametrize("value", list(STREAMS))
@pytest.mark.parametrize("fmt", list(SETTINGS))
def test_cheap_forms_write_what_the_per_record_path_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_freeze: None,
    fmt: str, value: str, key: str, calls: str,
) -> None:
    settings = SETTINGS[fmt]
    values = STREAMS[value]()
    items = messages(values, keys(key, len(values)), headers)
    poll_sizes, rooms = CALLS[calls]

    def value_conv() -> Converter:
        return value_converter(value, REGISTRY)

    def key_conv() -> Converter:
        return key_converter(key)

    per_record, cheap = builders(value_conv, key_conv)
    with forms_seen(monkeypatch) as seen:
        reference = sink(tmp_path / "per-record", settings, per_record, items, poll_sizes, rooms)
        assert (seen.json_served, seen.avro_served, seen.decoded) == (0, 0, 0)
        converted = seen.converted
        seen.reset()
        outcome = sink(tmp_path / "cheap", settings, cheap, items, poll_sizes, rooms)
    assert_same(reference, outcome)
    assert reference.files or reference.errors

    offered, used = expected_forms(fmt, value)
    if used == "json":
        assert seen.json_served > 0
    if used == "avro":
        assert seen.avro_served > 0 and seen.decoded > 0
    if used is not None:  # the form saved work: fewer records were converted one by one
        assert seen.converted < converted
    else:
        assert seen.converted == converted
    if used != "json" and fmt != "JSON" and fmt != "JSON-GZIP":
        assert seen.json_asked == 0, "a format that cannot use the joined JSON text asked for it"
    if used != "avro":
        assert seen.decoded == 0, "Avro columns decoded for nothing"
    if not fmt.startswith("PARQUET"):
        assert seen.avro_asked == 0, "a format that cannot use Avro columns asked for them"
    if offered is None:
        assert (seen.json_served, seen.avro_served) == (0, 0)


def test_the_streams_hold_what_they_say(tmp_path: Path, small_freeze: None) -> None:
    """The odd records really take other paths: each stream has errors of the stages it names."""
    seen: dict[str, Outcome] = {}
    for value in STREAMS:
        values = STREAMS[value]()
        items = messages(values, keys("string", len(values)), headers)
        per_record, _ = builders(partial(value_converter, value, REGISTRY), partial(key_converter, "string"))
        seen[value] = sink(tmp_path / value, SETTINGS["PARQUET"], per_record, items)
    for outcome in seen.values():  # String keys never fail, not even those that are not UTF-8
        assert "KEY_CONVERTER" not in {stage for _, stage, _ in outcome.errors}
    stages = {v: {(stage, kind) for _, stage, kind in o.errors} for v, o in seen.items()}
    assert ("VALUE_CONVERTER", "ConversionError") in stages["json"]
    assert ("TASK_PUT", "RecordFormatError") in stages["json"]  # the tombstone, the surrogate
    assert ("VALUE_CONVERTER", "ConversionError") in stages["avro"]
    assert len(seen["avro"].files) >= 5  # several schemas: several files
    assert len(seen["json"].files) >= 3  # a new field and a retyped one roll the file


@pytest.mark.parametrize("fmt", TEXT_ONLY)
def test_a_lone_surrogate_is_a_record_error_in_text_formats(tmp_path: Path, fmt: str) -> None:
    """``json.loads`` turns ``"\\ud800"`` into a str no UTF-8 encoder takes. AVRO and PARQUET
    refuse such a record (RecordFormatError, the records around it are written); CSV, TEXT and
    BYTES must too, not fail the task with a UnicodeEncodeError. (Both paths alike: per record.)"""
    if fmt in ("TEXT", "BYTES"):
        values: list[bytes | None] = [b'"a"', b'"\\ud800"', b'"c"']
    else:
        values = [b'{"id":1,"s":"a"}', b'{"id":2,"s":"\\ud800"}', b'{"id":3,"s":"c"}']
    per_record, _ = builders(lambda: value_converter("json"))
    outcome = sink(tmp_path, SETTINGS[fmt], per_record, messages(values))
    assert outcome.errors == [(1, "TASK_PUT", "RecordFormatError")]
    assert outcome.failed is None
    written = b"".join(f["bytes"] for f in outcome.files)
    assert written.count(b"a") == 1 and written.count(b"c") == 1


@settings(
    max_examples=60, deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    fmt=st.sampled_from([f for f in SETTINGS if f != "BYTES"]),
    value=st.sampled_from(list(STREAMS)),
    key=st.sampled_from(["bytes", "string"]),
    poll_sizes=st.lists(st.integers(1, 80), min_size=1, max_size=5),
    rooms=st.lists(st.integers(1, 80), max_size=4),
    start=st.integers(0, 60),
)
def test_any_polls_and_slices_of_the_streams_give_the_per_record_files(
    tmp_path_factory: pytest.TempPathFactory, small_freeze: None,
    fmt: str, value: str, key: str, poll_sizes: list[int], rooms: list[int], start: int,
) -> None:
    """The streams above from any point on, in any consumer polls and flush.count slices (BYTES,
    one file per record, is left to the fixed cases: it makes hundreds of files per example)."""
    values = STREAMS[value]()[start:]
    items = messages(values, keys(key, len(values)), headers)
    per_record, cheap = builders(partial(value_converter, value, REGISTRY), partial(key_converter, key))
    directory = tmp_path_factory.mktemp("any")
    reference = sink(directory / "per-record", SETTINGS[fmt], per_record, items, poll_sizes, rooms)
    outcome = sink(directory / "cheap", SETTINGS[fmt], cheap, items, poll_sizes, rooms)
    assert_same(reference, outcome)
