"""sink/records/avro_block.py: which runs
 of Confluent Avro messages become one Arrow block, and what it carries.

A block may only be built when every message is one the per-record path would turn into a row of
the same flat schema; everything else (a tombstone, another wire header, a non-flat schema, a
key the StringConverter rejects, a body that does not decode cleanly) must give ``None`` so the
per-record path decides. An accepted block's batch must equal what fastavro + ``from_pylist``
give, and every slice the task takes (``tail(done).head(room)``) must keep rows, messages,
offsets and timestamps aligned.
"""

from __future__ import annotations

import io
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import flat_fields
from sink.records.avro_block import AvroBlock, avro_block

FLAT: dict[str, Any] = {
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
FLAT_COPY: dict[str, Any] = {**FLAT, "fields": [dict(f) for f in FLAT["fields"]]}
"""Registered under another id: equal to FLAT, but a different registry entry."""
EVOLVED: dict[str, Any] = {
    **FLAT,
    "fields": [*FLAT["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
NESTED: dict[str, Any] = {
    "type": "record",
    "name": "Outer",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}},
    ],
}
WITH_TIMESTAMP: dict[str, Any] = {
    "type": "record",
    "name": "Stamped",
    "fields": [{"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}],
}

REGISTRY: dict[int, Any] = {
    7: FLAT,
    8: FLAT_COPY,
    9: EVOLVED,
    10: NESTED,
    11: WITH_TIMESTAMP,
    0x01020304: FLAT,
    0xFFFFFFFF: FLAT,
}


class StubConverter:
    """What avro_block asks the AvroConverter: ``(writer schema, flat fields, Arrow schema)`` per id.

    Mirrors :meth:`sink.records.converters.AvroConverter.columns` (None for a non-flat schema, the
    registry's error for an unknown id) and records which ids were asked for.
    """

    def __init__(self, schemas: dict[int, Any] | None = None) -> None:
        self.schemas = REGISTRY if schemas is None else schemas
        self.asked: list[int] = []

    def columns(self, schema_id: int) -> tuple[Any, Any, pa.Schema] | None:
        self.asked.append(schema_id)
        if schema_id not in self.schemas:
            raise ValueError(f"schema id {schema_id} is not in the Schema Registry")
        schema = self.schemas[schema_id]
        fields = flat_fields(schema)
        return None if fields is None else (schema, fields, avro_to_arrow(schema))


class RegistryDown:
    def columns(self, schema_id: int) -> Any:
        raise ConnectionError("Schema Registry unreachable")


def body(schema: Any, record: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def wire(schema_id: int, schema: Any, record: dict[str, Any]) -> bytes:
    """Confluent wire format: magic byte 0, the schema id (4 bytes, big-endian), the Avro body."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body(schema, record)


def reading(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "station": None if i % 4 == 0 else f"stätion-{i}\U0001f600",
        "value": None if i % 5 == 0 else i / 7,
        "ok": i % 2 == 0,
        "raw": bytes([i % 256]) * (i % 3),
        "n": -i,
    }


ROWS = [reading(i) for i in range(12)]


def messages(
    values: list[bytes | None],
    keys: list[bytes | None] | None = None,
    timestamps: list[tuple[int, int]] | None = None,
    first_offset: int = 100,
    partition: int = 3,
) -> list[Message]:
    keys = keys if keys is not None else [f"k{i}".encode() for i in range(len(values))]
    timestamps = timestamps or [(1, 1_700_000_000_000 + 10 * i) for i in range(len(values))]
    return [
        Message(topic="readings", partition=partition, offset=first_offset + i, key=k, value=v, timestamp=ts)
        for i, (k, v, ts) in enumerate(zip(keys, values, timestamps, strict=True))
    ]


def reference(values: list[bytes], schema: Any) -> pa.RecordBatch:
    """The per-record path: fastavro per body (after the 5-byte header), then from_pylist."""
    parsed = fastavro.parse_schema(schema)
    rows = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None) for v in values]
    return pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))


def good_values(schema_id: int = 7, rows: list[dict[str, Any]] = ROWS) -> list[bytes | None]:
    return [wire(schema_id, REGISTRY[schema_id], r) for r in rows]


def assert_aligned(block: AvroBlock, values: list[bytes], schema: Any) -> None:
    """Rows, messages and offsets of ``block`` belong together."""
    assert block.batch.num_rows == len(block.messages) == len(block)
    assert [m.value() for m in block.messages] == values
    assert block.batch.equals(reference(values, schema))
    if len(block):
        assert block.first_offset == block.messages[0].offset()
        assert block.last_offset == block.messages[-1].offset()


# ---------------------------------------------------------------------------------- accepted


@pytest.mark.parametrize("check_keys", [False, True])
def test_a_flat_run_becomes_one_block_of_the_per_record_rows(check_keys: bool) -> None:
    converter = StubConverter()
    values = good_values()
    block = avro_block("readings", 3, messages(values), check_keys, converter)
    assert block is not None
    assert (block.topic, block.partition, len(block)) == ("readings", 3, len(ROWS))
    assert (block.first_offset, block.last_offset) == (100, 100 + len(ROWS) - 1)
    assert block.schema is FLAT  # the writer schema object itself: Parquet's evolution check sees it
    assert block.batch.schema.equals(avro_to_arrow(FLAT))
    assert block.batch.to_pylist() == ROWS
    assert_aligned(block, values, FLAT)
    assert converter.asked == [7]  # one registry question per run, not per message


@pytest.mark.parametrize("schema_id", [0x01020304, 0xFFFFFFFF])
def test_the_schema_id_is_the_big_endian_unsigned_header(schema_id: int) -> None:
    converter = StubConverter()
    block = avro_block("readings", 3, messages(good_values(schema_id)), False, converter)
    assert block is not None and converter.asked == [schema_id]


def test_one_message_and_keys_that_are_text_or_null() -> None:
    values = good_values()[:3]
    keys: list[bytes | None] = [None, "ключ-é".encode(), b""]
    block = avro_block("readings", 3, messages(values, keys), True, StubConverter())
    assert block is not None and block.batch.to_pylist() == ROWS[:3]
    single = avro_block("readings", 3, messages(values[:1]), True, StubConverter())
    assert single is not None and len(single) == 1 and single.first_offset == single.last_offset == 100


def test_any_key_bytes_are_fine_without_the_key_check() -> None:
    values = good_values()[:3]
    keys: list[bytes | None] = [b"\xff\xfe", "é".encode()[:1], b"\x00"]
    assert avro_block("readings", 3, messages(values, keys), False, StubConverter()) is not None


def test_write_into_hands_the_batch_and_the_writer_schema_to_the_format() -> None:
    block = avro_block("readings", 3, messages(good_values()), False, StubConverter())
    assert block is not None
    calls: list[tuple[pa.RecordBatch, Any]] = []

    class Writer:
        def __init__(self, answer: bool) -> None:
            self.answer = answer

        def write_batch(self, batch: pa.RecordBatch, schema: Any) -> bool:
            calls.append((batch, schema))
            return self.answer

    assert block.write_into(Writer(True)) is True  # type: ignore[arg-type]
    assert block.tail(4).head(3).write_into(Writer(False)) is False  # type: ignore[arg-type]
    assert calls[0][0] is block.batch and calls[0][1] is FLAT
    assert calls[1][0].to_pylist() == ROWS[4:7] and calls[1][1] is FLAT


# ---------------------------------------------------------------------------------- refused


def field_bytes(name: str, value: Any) -> bytes:
    """One field of FLAT as Avro bytes (a record body is its fields' bytes, in order)."""
    field = next(f for f in FLAT["fields"] if f["name"] == name)
    return body({"type": "record", "name": "One", "fields": [field]}, {name: value})


def spoil(row: dict[str, Any], name: str, replacement: bytes) -> bytes:
    """The wire value of ``row`` (schema id 7) with field ``name`` encoded as ``replacement``."""
    parts = [
        replacement if f["name"] == name else field_bytes(f["name"], row[f["name"]]) for f in FLAT["fields"]
    ]
    assert b"".join(field_bytes(f["name"], row[f["name"]]) for f in FLAT["fields"]) == body(FLAT, row)
    return b"\x00\x00\x00\x00\x07" + b"".join(parts)


def _replace(values: list[bytes | None], at: int, value: bytes | None) -> list[bytes | None]:
    return [*values[:at], value, *values[at + 1 :]]


_GOOD = good_values()
_SPOILED = {
    "tombstone-first": _replace(_GOOD, 0, None),
    "tombstone-middle": _replace(_GOOD, 5, None),
    "tombstone-last": _replace(_GOOD, len(_GOOD) - 1, None),
    "all-tombstones": [None, None],
    "another-schema-id": _replace(_GOOD, 5, wire(9, EVOLVED, {**ROWS[5], "note": "x"})),
    "an-equal-schema-under-another-id": _replace(_GOOD, 5, wire(8, FLAT_COPY, ROWS[5])),
    "wrong-magic-byte-middle": _replace(_GOOD, 5, b"\x01" + _GOOD[5][1:]),  # type: ignore[index]
    "wrong-magic-byte-everywhere": [b"\x01" + v[1:] for v in _GOOD],  # type: ignore[index]
    "shorter-than-a-header": _replace(_GOOD, 5, b"\x00\x00\x00"),
    "empty-value": _replace(_GOOD, 5, b""),
    "header-only": _replace(_GOOD, 5, b"\x00\x00\x00\x00\x07"),
    "truncated-body": _replace(_GOOD, 5, _GOOD[5][:-1]),  # type: ignore[index]
    "truncated-last-body": _replace(_GOOD, len(_GOOD) - 1, _GOOD[-1][:-3]),  # type: ignore[index]
    "a-byte-left-over": _replace(_GOOD, 5, _GOOD[5] + b"\x00"),  # type: ignore[operator]
    "invalid-utf-8-string": _replace(_GOOD, 5, spoil(ROWS[5], "station", b"\x02" + b"\x08st\xff\xfe")),
    "union-branch-2": _replace(
        _GOOD, 5, spoil(ROWS[5], "station", b"\x04" + field_bytes("station", "x")[1:])
    ),
    "bool-byte-2": _replace(_GOOD, 4, spoil(ROWS[4], "ok", b"\x02")),
    "int-out-of-range": _replace(_GOOD, 5, spoil(ROWS[5], "n", body("long", 2**31))),  # type: ignore[arg-type]
}


@pytest.mark.parametrize("spoiled", list(_SPOILED.values()), ids=list(_SPOILED))
@pytest.mark.parametrize("check_keys", [False, True])
def test_runs_the_per_record_path_must_decide_are_refused(
    spoiled: list[bytes | None], check_keys: bool
) -> None:
    assert avro_block("readings", 3, messages(spoiled), check_keys, StubConverter()) is None


def test_the_spoiled_bodies_are_what_their_names_say() -> None:
    """Guards the table above: each hand-made body is damaged exactly where intended."""
    parsed = fastavro.parse_schema(FLAT)

    def read(value: bytes) -> tuple[Any, bytes]:
        stream = io.BytesIO(value[5:])
        return fastavro.schemaless_reader(stream, parsed, None), stream.read()

    with pytest.raises(UnicodeDecodeError):
        read(_SPOILED["invalid-utf-8-string"][5])  # type: ignore[arg-type]
    with pytest.raises(IndexError):
        read(_SPOILED["union-branch-2"][5])  # type: ignore[arg-type]
    row, rest = read(_SPOILED["int-out-of-range"][5])  # type: ignore[arg-type]
    assert row["n"] == 2**31 and rest == b""  # fastavro reads it; Arrow's int32 column will not take it
    row, rest = read(_SPOILED["bool-byte-2"][4])  # type: ignore[arg-type]
    assert row == {**ROWS[4], "ok": True} and rest == b""  # fastavro reads any non-zero byte as True
    row, rest = read(_SPOILED["a-byte-left-over"][5])  # type: ignore[arg-type]
    assert row == ROWS[5] and rest == b"\x00"  # fastavro ignores the byte; the block must not


def test_non_flat_schemas_unknown_ids_and_registry_errors_are_refused() -> None:
    nested = [wire(10, NESTED, {"id": i, "inner": {"x": i}}) for i in range(3)]
    assert avro_block("readings", 3, messages(nested), False, StubConverter()) is None
    stamped = [wire(11, WITH_TIMESTAMP, {"at": 1_700_000_000_000 + i}) for i in range(3)]
    assert avro_block("readings", 3, messages(stamped), False, StubConverter()) is None
    unknown = [b"\x00\x00\x00\x00\x63" + body(FLAT, r) for r in ROWS[:2]]
    assert avro_block("readings", 3, messages(unknown), False, StubConverter()) is None
    assert avro_block("readings", 3, messages(good_values()), False, RegistryDown()) is None


@pytest.mark.parametrize(
    "bad_key",
    [b"\xff", b"\xc3", b"\xed\xa0\x80", b"ok\x80", b"\xc0\xaf", b"\xf4\x90\x80\x80"],
)
def test_a_key_the_string_converter_rejects_refuses_the_run_only_when_keys_are_checked(
    bad_key: bytes,
) -> None:
    values = good_values()
    keys = [f"k{i}".encode() for i in range(len(values))]
    keys[6] = bad_key
    with pytest.raises(UnicodeDecodeError):
        bad_key.decode("utf-8")  # what the StringConverter does
    assert avro_block("readings", 3, messages(values, keys), True, StubConverter()) is None
    assert avro_block("readings", 3, messages(values, keys), False, StubConverter()) is not None


def test_halves_of_one_character_in_two_keys_are_not_text() -> None:
    values = good_values()[:2]
    e_acute = "é".encode()
    keys: list[bytes | None] = [e_acute[:1], e_acute[1:]]
    assert avro_block("readings", 3, messages(values, keys), True, StubConverter()) is None


# ------------------------------------------------------------------------------- as a property

_kinds = st.sampled_from(
    ["good", "good", "good", "tombstone", "magic", "other-id", "truncated", "extra", "short"]
)


@settings(max_examples=200, deadline=None)
@given(
    kinds=st.lists(_kinds, min_size=1, max_size=10),
    bad_key_at=st.none() | st.integers(0, 9),
    check=st.booleans(),
)
def test_a_block_is_built_only_from_messages_the_per_record_path_would_write_alike(
    kinds: list[str], bad_key_at: int | None, check: bool
) -> None:
    values: list[bytes | None] = []
    for i, kind in enumerate(kinds):
        good = wire(7, FLAT, reading(i))
        values.append(
            {
                "good": good,
                "tombstone": None,
                "magic": b"\x02" + good[1:],
                "other-id": wire(9, EVOLVED, {**reading(i), "note": None}),
                "truncated": good[:-1],
                "extra": good + b"\x01",
                "short": good[:4],
            }[kind]
        )
    keys: list[bytes | None] = [f"k{i}".encode() for i in range(len(values))]
    key_ok = True
    if bad_key_at is not None and bad_key_at < len(keys):
        keys[bad_key_at] = b"\xfe"
        key_ok = not check
    block = avro_block("readings", 3, messages(values, keys), check, StubConverter())
    one_schema = set(kinds) in ({"good"}, {"other-id"})  # one wire header, every body clean
    assert (block is not None) == (one_schema and key_ok)
    if block is not None:
        schema = FLAT if kinds[0] == "good" else EVOLVED
        assert block.schema is schema
        assert_aligned(block, values, schema)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- head and tail


@settings(max_examples=100, deadline=None)
@given(size=st.integers(1, 12), done=st.integers(-2, 14), room=st.integers(1, 14))
def test_slices_keep_rows_messages_and_offsets_aligned(size: int, done: int, room: int) -> None:
    values = good_values()[:size]
    block = avro_block("readings", 3, messages(values), False, StubConverter())
    assert block is not None
    head, tail = block.head(room), block.tail(done)
    assert_aligned(head, values[:room], FLAT)  # type: ignore[arg-type]
    assert_aligned(tail, values[max(done, 0) :], FLAT)  # type: ignore[arg-type]
    # what put_block takes from a block: the messages after ``done``, at most ``room`` of them
    chunk = block.tail(done).head(room)
    expected = values[max(done, 0) :][:room]
    assert_aligned(chunk, expected, FLAT)  # type: ignore[arg-type]
    for part in (head, tail, chunk):
        assert isinstance(part, AvroBlock)
        assert part.schema is FLAT and (part.topic, part.partition) == ("readings", 3)
    if room >= size:
        assert head is block
    if done <= 0:
        assert tail is block


def test_slices_of_slices_stay_aligned() -> None:
    values = good_values()
    block = avro_block("readings", 3, messages(values), False, StubConverter())
    assert block is not None
    part = block.tail(2).head(8).tail(3).head(4)
    assert_aligned(part, values[5:9], FLAT)  # type: ignore[arg-type]
    assert (part.first_offset, part.last_offset) == (105, 108)
    assert part.timestamps() == (1_700_000_000_050, 1_700_000_000_080)


# ------------------------------------------------------------------------------- timestamps


def per_record_timestamps(stamps: list[tuple[int, int]]) -> tuple[int | None, int | None]:
    """What the per-record path accounts: SinkRecord.timestamp is ``ts if type else None``."""
    present = [ts for kind, ts in stamps if kind]
    return (min(present), max(present)) if present else (None, None)


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        ([(1, 30), (1, 10), (1, 20)], (10, 30)),  # create time, out of order
        ([(2, 5), (2, 9)], (5, 9)),  # log append time
        ([(0, 0), (0, -1)], (None, None)),  # no timestamps at all
        ([(0, 0), (1, 50), (2, 70)], (50, 70)),  # mixed: only those with a type count
        ([(2, 10), (1, 50)], (10, 50)),  # types differ: order by value, not by type
        ([(1, 50), (0, 999)], (50, 50)),  # a type-0 value is ignored even when larger
        ([(1, -5), (1, 3)], (-5, 3)),
    ],
)
def test_timestamps_are_what_the_per_record_path_accounts(
    stamps: list[tuple[int, int]], expected: tuple[int | None, int | None]
) -> None:
    values = good_values()[: len(stamps)]
    block = avro_block("readings", 3, messages(values, timestamps=stamps), False, StubConverter())
    assert block is not None
    assert block.timestamps() == expected == per_record_timestamps(stamps)


@settings(max_examples=200, deadline=None)
@given(
    stamps=st.lists(
        st.tuples(st.sampled_from([0, 1, 2]), st.integers(-(2**40), 2**42)), min_size=1, max_size=12
    ),
    cut=st.integers(0, 12),
)
def test_timestamps_of_any_block_and_its_slices(stamps: list[tuple[int, int]], cut: int) -> None:
    values = good_values()[: len(stamps)]
    block = avro_block("readings", 3, messages(values, timestamps=stamps), False, StubConverter())
    assert block is not None
    assert block.timestamps() == per_record_timestamps(stamps)
    if 0 < cut < len(stamps):
        assert block.head(cut).timestamps() == per_record_timestamps(stamps[:cut])
        assert block.tail(cut).timestamps() == per_record_timestamps(stamps[cut:])
