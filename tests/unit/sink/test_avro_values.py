"""sink/records/avro_values.py: runs of Confluent Avro values by schema id, and their decoding.

:func:`avro_runs` must cut a partition's values exactly where the wire header changes: a run of
one schema id (magic byte 0, a big-endian unsigned 4-byte id) may be decoded column by column;
tombstones and foreign payloads (another magic byte, shorter than a header) form runs that go
record by record. :func:`decode_values` must give the rows fastavro gives, or None.
"""

from __future__ import annotations

import io
from itertools import groupby
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import flat_fields
from sink.records.avro_values import avro_runs, decode_values, join_values
from tests.unit.sink.consumed import wire

FLAT: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "station", "type": ["null", "string"], "default": None},
        {"name": "value", "type": "double"},
    ],
}


def reading(i: int) -> dict[str, Any]:
    return {"id": i, "station": None if i % 3 == 0 else f"stätion-{i}", "value": i / 4}


def header_id(value: bytes | None) -> int | None:
    """The schema id of a value, read independently: None unless it has a magic-0 wire header."""
    if value is None or len(value) < 5 or value[:1] != b"\x00":
        return None
    return int(value[1:5].hex(), 16)


def reference_runs(values: list[bytes | None]) -> list[tuple[int, int, int | None]]:
    runs, start = [], 0
    for schema_id, group in groupby(values, key=header_id):
        stop = start + len(list(group))
        runs.append((start, stop, schema_id))
        start = stop
    return runs


def good(schema_id: int, i: int) -> bytes:
    return wire(schema_id, FLAT, reading(i))


# ------------------------------------------------------------------------------------ avro_runs


def test_no_values_no_runs() -> None:
    assert avro_runs([]) == []


def test_one_schema_id_is_one_run() -> None:
    assert avro_runs([good(7, i) for i in range(5)]) == [(0, 5, 7)]
    assert avro_runs([good(7, 0)]) == [(0, 1, 7)]


@pytest.mark.parametrize(
    "schema_id", [0, 1, 0x7F, 0x80, 0xFF, 0x0100, 0x01020304, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF]
)
def test_the_schema_id_is_the_big_endian_unsigned_header(schema_id: int) -> None:
    values: list[bytes | None] = [good(schema_id, i) for i in range(3)]
    assert avro_runs(values) == [(0, 3, schema_id)]
    # and on the slow path (a tombstone elsewhere), the same id
    assert avro_runs([None, *values]) == [(0, 1, None), (1, 4, schema_id)]


def test_runs_are_cut_where_the_schema_id_changes() -> None:
    values: list[bytes | None] = [good(7, 0), good(7, 1), good(8, 2), good(7, 3), good(0x0700, 4)]
    assert avro_runs(values) == [(0, 2, 7), (2, 3, 8), (3, 4, 7), (4, 5, 0x0700)]


@pytest.mark.parametrize(
    ("odd", "what"),
    [
        (None, "tombstone"),
        (b"", "empty"),
        (b"\x00\x00\x00", "shorter than a header"),
        (b"\x00\x00\x00\x00", "one byte short of a header"),
        (b"\x01\x00\x00\x00\x07" + b"\x02", "another magic byte"),
        (b'{"json":1}', "JSON text"),
        (b"\xff" * 10, "random bytes"),
    ],
)
def test_tombstones_and_foreign_payloads_form_runs_of_their_own(odd: bytes | None, what: str) -> None:
    values: list[bytes | None] = [good(7, 0), odd, odd, good(7, 1), odd]
    assert avro_runs(values) == [(0, 1, 7), (1, 3, None), (3, 4, 7), (4, 5, None)], what
    assert avro_runs([odd, odd]) == [(0, 2, None)], what


def test_tombstones_and_foreign_payloads_next_to_each_other_are_one_run() -> None:
    values: list[bytes | None] = [None, b"\x01junk", b"ab", None, good(9, 0)]
    assert avro_runs(values) == [(0, 4, None), (4, 5, 9)]


def test_a_header_alone_is_a_run_of_its_id() -> None:
    """Five bytes are a header with an empty body: its run is decoded or left to the per-record
    path later, when the body does not decode (decode_values gives None)."""
    assert avro_runs([b"\x00\x00\x00\x00\x07"]) == [(0, 1, 7)]


_kinds = st.sampled_from(["id7", "id7", "id7", "id8", "big-id", "tombstone", "magic", "short", "empty"])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_kinds, st.integers(0, 50)), max_size=12))
def test_avro_runs_are_the_maximal_runs_of_one_wire_header(items: list[tuple[str, int]]) -> None:
    values: list[bytes | None] = []
    for kind, i in items:
        values.append(
            {
                "id7": lambda i: good(7, i),
                "id8": lambda i: good(8, i),
                "big-id": lambda i: good(0xFFFFFF07, i),
                "tombstone": lambda i: None,
                "magic": lambda i: b"\x02" + good(7, i)[1:],
                "short": lambda i: good(7, i)[: i % 5],
                "empty": lambda i: b"",
            }[kind](i)
        )
    runs = avro_runs(values)
    assert runs == reference_runs(values)
    event("one run" if len(runs) == 1 else "several runs")


# -------------------------------------------------------------------------------- decode_values


def per_record(values: list[bytes], schema: Any) -> pa.RecordBatch:
    parsed = fastavro.parse_schema(schema)
    rows = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None) for v in values]
    return pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))


@pytest.mark.parametrize("joined", [False, True], ids=["list", "joined"])
def test_decode_values_gives_the_per_record_rows(joined: bool) -> None:
    """From a list of values, or from the run's values joined once (``Joined``: decoded where
    they lie, in the buffer the check and the pass-through share)."""
    values = [good(7, i) for i in range(9)]
    fields = flat_fields(FLAT)
    assert fields is not None
    batch = decode_values(join_values(values) if joined else values, fields, avro_to_arrow(FLAT))
    assert batch is not None
    assert batch.equals(per_record(values, FLAT))
    assert batch.to_pylist() == [reading(i) for i in range(9)]


@pytest.mark.parametrize(
    "spoil",
    [
        pytest.param(lambda v: v[:-1], id="truncated-body"),
        pytest.param(lambda v: v + b"\x00", id="a-byte-left-over"),
        pytest.param(lambda v: v[:5], id="header-only"),
    ],
)
@pytest.mark.parametrize("joined", [False, True], ids=["list", "joined"])
def test_decode_values_refuses_a_body_that_does_not_decode_cleanly(spoil: Any, joined: bool) -> None:
    values = [good(7, i) for i in range(5)]
    values[2] = spoil(values[2])
    fields = flat_fields(FLAT)
    assert fields is not None
    assert decode_values(join_values(values) if joined else values, fields, avro_to_arrow(FLAT)) is None


# ------------------------------------------------------------- check_joined: its shortcuts

MIXED: dict[str, Any] = {
    "type": "record",
    "name": "Mixed",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "blob", "type": "bytes"},
        {"name": "amount", "type": "double"},
        {"name": "note", "type": ["null", "string"]},
        {"name": "ratio", "type": "float"},
        {"name": "text", "type": "string"},
    ],
}


def mixed(i: int, text: str = "plain") -> dict[str, Any]:
    return {"id": -(2**62) if i % 2 else i * 1000, "blob": bytes([0xFF, 0x80, i % 256]),
            "amount": -1.5e300 * (i + 1), "note": None if i % 3 == 0 else "n" * 70,
            "ratio": -0.1 * i, "text": text}


@pytest.mark.parametrize("schema_id", [7, 0x80, 0xFFFFFFFF])  # header bytes >= 0x80 are no text
def test_check_joined_takes_ascii_text_among_bytes_numbers_and_long_lengths(schema_id: int) -> None:
    from sink.records.avro_values import check_joined, join_values

    values = [wire(schema_id, MIXED, mixed(i)) for i in range(40)]
    fields = flat_fields(MIXED)
    assert fields is not None
    assert check_joined(join_values(values), fields)
    assert decode_values(values, fields, avro_to_arrow(MIXED)) is not None


@pytest.mark.parametrize(
    ("text", "ok"), [("é€😀", True), ("\x7f", True), (None, False)],
)
def test_check_joined_decodes_only_text_holding_bytes_above_ascii(text: str | None, ok: bool) -> None:
    from sink.records.avro_values import check_joined, join_values

    fields = flat_fields(MIXED)
    assert fields is not None
    values = [wire(7, MIXED, mixed(i)) for i in range(10)]
    if text is None:  # a lone continuation byte in the last string of one record
        spoiled = bytearray(wire(7, MIXED, mixed(3, "abc")))
        spoiled[-1] = 0x80
        values[3] = bytes(spoiled)
    else:
        values[5] = wire(7, MIXED, mixed(5, text))
    assert check_joined(join_values(values), fields) is ok
    assert (decode_values(values, fields, avro_to_arrow(MIXED)) is not None) is ok


def test_check_joined_measures_long_varints_as_the_decoder_reads_them() -> None:
    from sink.records.avro_values import check_joined, join_values

    schema = {"type": "record", "name": "L", "fields": [{"name": "n", "type": "long"}]}
    fields = flat_fields(schema)
    assert fields is not None
    extremes = [wire(7, schema, {"n": n}) for n in (0, -1, 2**63 - 1, -(2**63), 300_000)]
    assert check_joined(join_values(extremes), fields)
    eleven = b"\x00\x00\x00\x00\x07" + b"\xff" * 10 + b"\x01"  # a varint longer than 10 bytes
    beyond = b"\x00\x00\x00\x00\x07" + b"\xff" * 9 + b"\x02"  # a tenth byte above 1
    for bad in (eleven, beyond):
        assert not check_joined(join_values([*extremes, bad]), fields)
        assert decode_values([*extremes, bad], fields, avro_to_arrow(schema)) is None
