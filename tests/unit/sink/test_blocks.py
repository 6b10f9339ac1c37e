"""Blocks (sink/records/blocks.py): which
 runs of messages may skip per-record conversion, and what they carry.

A block must be refused for every message the per-record path could treat differently, so the
acceptance rule is tested case by case and as a property over arbitrary byte strings.
"""

from __future__ import annotations

import io

import fastavro
import pyarrow as pa
import pytest
from confluent_kafka import Message
from hypothesis import given
from hypothesis import strategies as st

from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import flat_fields
from sink.records.avro_block import avro_block
from sink.records.blocks import keys_are_text
from sink.records.json_lines import json_lines


def msgs(
    values: list[bytes | None], keys: list[bytes | None] | None = None, ts_type: int = 1
) -> list[Message]:
    keys = keys or [None] * len(values)
    return [
        Message(topic="t", partition=2, offset=10 + i, key=k, value=v, timestamp=(ts_type, 1000 - i))
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]


def _one_line_object(value: bytes | None) -> bool:
    """The per-record rule a block's values must all satisfy (see sink.records.json_lines)."""
    return (
        value is not None
        and value[:1] == b"{"
        and value[-1:] == b"}"
        and b"\n" not in value
        and b"\r" not in value
    )


def test_json_lines_joins_values_and_carries_offsets_and_timestamps() -> None:
    values = [b'{"a":1}', b'{"a":2}', b'{"b":"x"}']
    block = json_lines("t", 2, msgs(values), check_keys=False)
    assert block is not None
    assert block.data == b'{"a":1}\n{"a":2}\n{"b":"x"}'
    assert (len(block), block.first_offset, block.last_offset) == (3, 10, 12)
    assert block.timestamps() == (998, 1000)
    head, tail = block.head(2), block.tail(2)
    assert (head.data, head.first_offset, head.last_offset) == (b'{"a":1}\n{"a":2}', 10, 11)
    assert (tail.data, tail.first_offset, tail.last_offset) == (b'{"b":"x"}', 12, 12)
    assert block.head(5) is block and block.tail(0) is block


@pytest.mark.parametrize(
    "bad",
    [
        None,
        b'{"a":\n1}',
        b'{"a":"\r"}',
        b"[1,2]",
        b"1",
        b"",
        b'{"a":1} ',
        b' {"a":1}',
        b"{",
        b"}",
        b"not json",
    ],
)
def test_json_lines_refuses_a_run_with_any_value_the_per_record_path_must_see(bad: bytes | None) -> None:
    assert json_lines("t", 2, msgs([b'{"a":1}', bad, b'{"a":3}']), check_keys=False) is None
    assert json_lines("t", 2, msgs([bad]), check_keys=False) is None


def test_keys_are_checked_only_for_text_keys() -> None:
    bad_key = [b"ok", b"\xff\xfe", None]
    values = [b"{}", b"{}", b"{}"]
    assert json_lines("t", 0, msgs(values, bad_key), check_keys=True) is None
    assert json_lines("t", 0, msgs(values, bad_key), check_keys=False) is not None
    # halves of one multi-byte character in two keys must not pass as one character
    split = "é".encode()
    assert not keys_are_text(msgs(values[:2], [split[:1], split[1:]]))
    assert keys_are_text(msgs(values, [None, None, None]))
    assert keys_are_text(msgs(values[:2], ["ü".encode(), b"x"]))


def test_timestamps_skip_records_without_one() -> None:
    assert json_lines("t", 0, msgs([b"{}", b"{}"], ts_type=0), False).timestamps() == (None, None)
    mixed = [
        Message(topic="t", partition=0, offset=0, value=b"{}", timestamp=(0, 0)),
        Message(topic="t", partition=0, offset=1, value=b"{}", timestamp=(1, 50)),
        Message(topic="t", partition=0, offset=2, value=b"{}", timestamp=(2, 70)),
    ]
    assert json_lines("t", 0, mixed, False).timestamps() == (50, 70)


_values = st.one_of(
    st.none(),
    st.binary(max_size=12),
    st.builds(lambda b: b"{" + b + b"}", st.binary(max_size=10)),
    st.sampled_from([b'{"a":1}', b"{}", b'{"x":"\\n"}', b'{"a":[1,{"b":2}]}']),
)


@given(st.lists(_values, min_size=1, max_size=8))
def test_a_block_is_built_exactly_when_every_value_is_a_one_line_object(values: list[bytes | None]) -> None:
    block = json_lines("t", 0, msgs(values), check_keys=False)
    assert (block is not None) == all(_one_line_object(v) for v in values)
    if block is not None:
        assert block.data.split(b"\n") == values


FLAT = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": "double"},
    ],
}
NESTED = {
    "type": "record",
    "name": "Outer",
    "fields": [
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}}
    ],
}


class StubRegistry:
    """What avro_block asks the AvroConverter: the writer schema's columns per schema id."""

    def __init__(self, schemas: dict[int, dict]) -> None:
        self.schemas = schemas

    def columns(self, schema_id: int):
        schema = self.schemas[schema_id]
        fields = flat_fields(schema)
        return None if fields is None else (schema, fields, avro_to_arrow(schema))


def wire(schema_id: int, schema: dict, record: dict) -> bytes:
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()


ROWS = [{"id": i, "name": None if i % 3 == 0 else f"n{i}é", "amount": i / 4} for i in range(7)]


def test_avro_block_decodes_a_flat_run_into_the_per_record_rows() -> None:
    registry = StubRegistry({7: FLAT})
    block = avro_block("t", 2, msgs([wire(7, FLAT, r) for r in ROWS]), False, registry)
    assert block is not None and block.schema is FLAT
    expected = pa.RecordBatch.from_pylist(ROWS, schema=avro_to_arrow(FLAT))
    assert block.batch.equals(expected)
    head, tail = block.head(3), block.tail(3)
    assert head.batch.to_pylist() == ROWS[:3] and tail.batch.to_pylist() == ROWS[3:]
    assert (head.last_offset, tail.first_offset) == (12, 13)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda vs: [*vs[:2], None, *vs[3:]],  # tombstone
        lambda vs: [*vs[:2], wire(8, FLAT, ROWS[2]), *vs[3:]],  # another schema id
        lambda vs: [*vs[:2], b"\x01" + vs[2][1:], *vs[3:]],  # wrong magic byte
        lambda vs: [*vs[:2], vs[2][:-1], *vs[3:]],  # a truncated body
        lambda vs: [*vs[:2], vs[2] + b"\x00", *vs[3:]],  # a byte left over
        lambda vs: [b"\x00\x00", *vs[1:]],  # shorter than a wire header
    ],
)
def test_avro_block_refuses_runs_the_per_record_path_must_decide(spoil) -> None:
    registry = StubRegistry({7: FLAT, 8: FLAT})
    values = spoil([wire(7, FLAT, r) for r in ROWS])
    assert avro_block("t", 2, msgs(values), False, registry) is None


def test_avro_block_refuses_nested_schemas_bad_keys_and_registry_errors() -> None:
    nested = [wire(9, NESTED, {"inner": {"x": i}}) for i in range(3)]
    assert avro_block("t", 0, msgs(nested), False, StubRegistry({9: NESTED})) is None
    values = [wire(7, FLAT, r) for r in ROWS[:2]]
    assert avro_block("t", 0, msgs(values, [b"\xff", b"k"]), True, StubRegistry({7: FLAT})) is None
    assert avro_block("t", 0, msgs(values, [b"\xff", b"k"]), False, StubRegistry({7: FLAT})) is not None

    class Down:
        def columns(self, schema_id: int):
            raise ConnectionError("registry unreachable")

    assert avro_block("t", 0, msgs(values), False, Down()) is None
