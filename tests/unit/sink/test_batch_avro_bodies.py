"""``RecordBatch.avro_bodies``: the Confluent Avro values of one schema id, for STOREAS AVRO to
write through. Built the way the runtime builds batches (``BatchBuilder`` over real messages and
the real AvroConverter, its registry a stub); what the form holds is compared with what the
per-record converter gives for the same messages.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import fastavro
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sink.records.avro_values as avro_values
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import flat_fields
from kcql.errors import RecordError
from sink.records.converters import ByteArrayConverter, RecordConverter, StringConverter
from sink.records.intake import BatchBuilder
from sink.records.record import SinkRecord
from tests.unit.formats.test_avro_columns import flat_cases
from tests.unit.sink.consumed import messages, wire
from tests.unit.sink.test_batch import FLAT, NESTED, _cuts, avro_batch, chain, reading


def decoded(values: Sequence[bytes], writer: Any) -> list[Any]:
    """The bodies read with fastavro (header skipped), as an independent check of the form."""
    parsed = fastavro.parse_schema(writer)
    out = []
    for value in values:
        assert value[:5] == b"\x00\x00\x00\x00\x07"
        out.append(fastavro.schemaless_reader(io.BytesIO(value[5:]), parsed, None))
    return out


def test_bodies_are_the_values_as_consumed_and_the_writer_schema() -> None:
    (batch,), registry = avro_batch()
    bodies = batch.avro_bodies()
    assert bodies is not None
    values, writer = bodies
    records = list(batch.records())
    assert writer == FLAT and writer is records[0].value_schema  # the converter's own object
    assert decoded(values, writer) == [r.value for r in records] == [reading(i) for i in range(12)]
    assert registry.asked == [7]


@settings(max_examples=60, deadline=None)
@given(cuts=_cuts)
def test_bodies_of_any_slice_chain_stay_aligned(cuts: list[tuple[int, int]]) -> None:
    (batch,), _ = avro_batch()
    part, lo, hi = chain(batch, cuts)
    values, _ = part.avro_bodies()
    assert decoded(values, FLAT) == [reading(i) for i in range(lo, hi)]


def test_no_bodies_where_the_values_are_not_decoded_column_by_column() -> None:
    """A nested record, a string, a union with null (which could decode to a null value: a
    tombstone only the per-record path sees): bodies are only offered where every one of them
    was checked by decoding it (``avro_columns``), which takes flat records only."""
    cases: list[tuple[Any, Any]] = [
        (NESTED, {"inner": {"x": 1}}),
        ("string", "text"),
        (["null", FLAT], reading(1)),
    ]
    for schema, value in cases:
        (batch,), _ = avro_batch(values=[wire(7, schema, value)] * 3, schemas={7: schema})
        assert batch.avro_columns() is None
        assert batch.avro_bodies() is None


@pytest.mark.parametrize("damage", ["truncated", "trailing", "wrong-id"])
def test_one_bad_body_anywhere_in_the_run_leaves_the_whole_run_to_the_per_record_path(damage: str) -> None:
    values: list[bytes | None] = [wire(7, FLAT, reading(i)) for i in range(12)]
    good = values[6]
    assert good is not None
    wrong = {"type": "record", "name": "W", "fields": [{"name": "s", "type": "string"}]}
    values[6] = {
        "truncated": good[:-1],
        "trailing": good + b"\x00",  # fastavro would ignore the byte; the file must not hold it
        "wrong-id": b"\x00\x00\x00\x00\x07" + wire(1, wrong, {"s": "x" * 40})[5:],
    }[damage]
    (batch,), _ = avro_batch(values=values)
    assert batch.avro_bodies() is None
    assert batch.slice(0, 3).avro_bodies() is None  # decided once per consumed run


def test_no_bodies_for_tombstones_foreign_payloads_or_mixed_ids() -> None:
    other = {**FLAT, "name": "Other"}
    values: list[bytes | None] = [wire(7, FLAT, reading(0)), None, b"not avro", wire(8, other, reading(1))]
    batches, _ = avro_batch(values=values, schemas={7: FLAT, 8: other})
    assert [len(b) for b in batches] == [1, 2, 1]  # the tombstone and the foreign payload: one run
    assert [b.avro_bodies() is not None for b in batches] == [True, False, True]
    assert batches[2].avro_bodies()[1] == other


def test_registry_down_gives_no_bodies() -> None:
    (batch,), registry = avro_batch()
    registry.down = True
    assert batch.avro_bodies() is None


def test_a_key_that_is_not_utf8_keeps_the_bodies() -> None:
    """A String key converts whatever its bytes (replacement characters), so it never costs the
    values their pass-through."""
    keys: list[bytes | None] = [b"k%d" % i for i in range(12)]
    keys[6] = b"\xfe"
    (batch,), _ = avro_batch(key=StringConverter(), keys=keys)
    assert decoded(batch.avro_bodies()[0], FLAT) == [reading(i) for i in range(12)]
    assert decoded(batch.slice(4, 8).avro_bodies()[0], FLAT) == [reading(i) for i in range(4, 8)]


def test_mapped_batches_have_no_bodies() -> None:
    """A projection's records are not the values as consumed, even when it keeps every field."""
    (batch,), _ = avro_batch()
    assert batch.mapped(lambda r: r).avro_bodies() is None


class _Identity:
    """Transforms that leave every record as it is: the batches still hold transformed records."""

    drops_all = False

    def for_topic(self, topic: str) -> _Identity:
        return self

    def __len__(self) -> int:
        return 1

    def apply_batch(self, records: list[SinkRecord]) -> tuple[list[SinkRecord], dict[int, RecordError]]:
        return records, {}


def test_transformed_batches_have_no_bodies() -> None:
    from tests.unit.sink.consumed import avro_converter

    converter, _ = avro_converter({7: FLAT})
    msgs = messages([wire(7, FLAT, reading(i)) for i in range(4)])
    builder = BatchBuilder(RecordConverter(ByteArrayConverter(), converter), transforms=_Identity())  # type: ignore[arg-type]
    (batch,) = builder.build("t", 0, msgs)
    assert batch.avro_bodies() is None
    assert [r.value for r in batch.records()] == [reading(i) for i in range(4)]


def test_no_bodies_without_cheap_forms() -> None:
    from tests.unit.sink.consumed import avro_converter

    converter, _ = avro_converter({7: FLAT})
    msgs = messages([wire(7, FLAT, reading(i)) for i in range(4)])
    builder = BatchBuilder(RecordConverter(ByteArrayConverter(), converter), cheap_forms=False)
    (batch,) = builder.build("t", 0, msgs)
    assert batch.avro_bodies() is None


# ------------------------------------------------------- the check: exactly what decodes cleanly


@settings(max_examples=300, deadline=None)
@given(case=flat_cases(), data=st.data())
def test_check_values_agrees_with_the_column_decoder(
    case: tuple[dict[str, Any], list[dict[str, Any]]], data: Any
) -> None:
    """On any flat schema and rows, whole or damaged (bytes cut, added, flipped anywhere):
    ``check_values`` says yes exactly when ``decode_values`` decodes."""
    schema, rows = case
    values = [wire(7, schema, row) for row in rows]
    damage = data.draw(st.sampled_from(["none", "cut", "add", "flip", "non-utf8"]))
    if damage != "none":
        i = data.draw(st.integers(0, len(values) - 1))
        body = bytearray(values[i])
        at = data.draw(st.integers(5, max(5, len(body) - 1)))
        if damage == "cut" and len(body) > 5:
            del body[at]
        elif damage == "add":
            body.insert(at, data.draw(st.integers(0, 255)))
        elif damage == "flip" and len(body) > 5:
            body[at] ^= data.draw(st.integers(1, 255))
        elif damage == "non-utf8" and len(body) > 5:
            body[at] = data.draw(st.sampled_from([0x80, 0xC0, 0xED, 0xFF]))
        values[i] = bytes(body)
    fields = flat_fields(schema)
    assert fields is not None
    decoded_ok = avro_values.decode_values(values, fields, avro_to_arrow(schema)) is not None
    assert avro_values.check_values(values, fields) is decoded_ok


def test_check_values_spots_text_that_is_not_utf8_among_non_ascii_text() -> None:
    schema = {"type": "record", "name": "T", "fields": [{"name": "s", "type": ["null", "string"]}]}
    fields = flat_fields(schema)
    assert fields is not None
    good = [wire(7, schema, {"s": text}) for text in ("ascii", None, "é\U0001f600", "")]
    assert avro_values.check_values(good, fields)
    surrogate = good[2].replace("é".encode(), b"\xed\xa0")  # a lone surrogate's bytes: not UTF-8
    assert not avro_values.check_values([*good, surrogate], fields)
    assert avro_values.decode_values([*good, surrogate], fields, avro_to_arrow(schema)) is None
