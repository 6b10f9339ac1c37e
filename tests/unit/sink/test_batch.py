"""sink/records/batch.py: RecordBatch, what a batch knows without converting, its forms and its slices.

Batches are built the way the runtime builds them (``BatchBuilder`` over real
``confluent_kafka.Message`` objects) or from converted records (``RecordBatch.of``). Everything a
batch says about its records (offsets, timestamps, the joined JSON text, the Avro columns) is
compared with what the per-record converter gives for the same messages, for whole batches,
slices and slices of slices.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from typing import Any

import pytest
from confluent_kafka import Message
from hypothesis import given, settings
from hypothesis import strategies as st

import sink.records.avro_values as avro_values
from sink.records.batch import RecordBatch, batches_of
from sink.records.converters import (
    ByteArrayConverter,
    ConversionError,
    Converter,
    JsonConverter,
    RecordConverter,
    StringConverter,
)
from sink.records.intake import BatchBuilder
from sink.records.record import SinkRecord
from tests.unit.sink.consumed import avro_converter, blocked_in_wait, messages, until, wire

GOOD = b'{"id":1,"name":"a"}'


class Counting(RecordConverter):
    """The per-record converter, counting conversions per offset."""

    def __init__(self, key: Converter, value: Converter) -> None:
        super().__init__(key, value)
        self.calls: Counter[int] = Counter()

    def convert(self, msg: Any) -> SinkRecord:
        self.calls[msg.offset()] += 1
        return super().convert(msg)


def build(
    msgs: Sequence[Message], key: Converter | None = None, value: Converter | None = None, **kw: Any
) -> list[RecordBatch]:
    converter = RecordConverter(key or ByteArrayConverter(), value or JsonConverter(False))
    return BatchBuilder(converter, **kw).build(msgs[0].topic() or "", msgs[0].partition() or 0, msgs)


def one(msgs: Sequence[Message], key: Converter | None = None, value: Converter | None = None,
        **kw: Any) -> RecordBatch:
    batches = build(msgs, key, value, **kw)
    assert len(batches) == 1
    return batches[0]


def raw(msgs: Sequence[Message]) -> RecordBatch:
    """One batch of any messages, per-record only (bytes in, bytes out: nothing can fail)."""
    return one(msgs, ByteArrayConverter(), ByteArrayConverter())


def converted(msgs: Sequence[Message]) -> list[SinkRecord]:
    return [RecordConverter(ByteArrayConverter(), ByteArrayConverter()).convert(m) for m in msgs]


def per_record_timestamps(msgs: Sequence[Message]) -> tuple[int | None, int | None]:
    """What a file name gets from the per-record path: min/max of ``SinkRecord.timestamp``."""
    stamps = [r.timestamp for r in converted(msgs) if r.timestamp is not None]
    return (min(stamps), max(stamps)) if stamps else (None, None)


def chain(batch: RecordBatch, cuts: Sequence[tuple[int, int]]) -> tuple[RecordBatch, int, int]:
    """``batch`` sliced by each ``(start, stop)`` in turn (clamped to be non-empty); the result and
    where it sits in ``batch``."""
    lo, hi = 0, len(batch)
    for start, stop in cuts:
        n = len(batch)
        start = start % n
        stop = start + 1 + (stop % (n - start))
        batch = batch.slice(start, stop)
        lo, hi = lo + start, lo + stop
    assert len(batch) == hi - lo
    return batch, lo, hi


_cuts = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 40)), max_size=3)


# --------------------------------------------------------------------------------------- offsets

GAPS = [5, 7, 8, 12, 20, 21, 40]
"""Offsets of a compacted topic: a batch's records need not be consecutive offsets."""


@pytest.mark.parametrize("kind", ["messages", "records"])
def test_offsets_of_a_batch_with_gaps_and_of_its_slices(kind: str) -> None:
    msgs = messages([b"v"] * len(GAPS), offsets=GAPS)
    batch = raw(msgs) if kind == "messages" else RecordBatch.of(converted(msgs))
    assert (len(batch), batch.first_offset, batch.last_offset) == (7, 5, 40)
    assert [batch.offset_at(i) for i in range(7)] == GAPS
    assert [batch.offset_at(-i) for i in range(1, 8)] == GAPS[::-1]
    part = batch.slice(2, 6)
    assert (len(part), part.first_offset, part.last_offset) == (4, 8, 21)
    assert [part.offset_at(i) for i in range(4)] == GAPS[2:6]
    assert part.offset_at(-1) == 21
    inner = part.slice(1, 3)
    assert (len(inner), inner.first_offset, inner.last_offset) == (2, 12, 20)
    assert [inner.index_of(o) for o in (12, 20)] == [0, 1]
    assert (batch.topic, batch.partition, part.topic, inner.partition) == ("t", 0, "t", 0)


@pytest.mark.parametrize("kind", ["messages", "records"])
def test_index_of_finds_only_the_batchs_own_offsets(kind: str) -> None:
    msgs = messages([b"v"] * len(GAPS), offsets=GAPS)
    batch = raw(msgs) if kind == "messages" else RecordBatch.of(converted(msgs))
    assert [batch.index_of(o) for o in GAPS] == list(range(7))
    for missing in (0, 4, 6, 9, 13, 39, 41, 10**12):
        with pytest.raises(ValueError, match=str(missing)):
            batch.index_of(missing)
    part = batch.slice(2, 5)  # offsets 8, 12, 20
    assert [part.index_of(o) for o in (8, 12, 20)] == [0, 1, 2]
    for outside in (5, 7, 21, 40):  # in the batch it was sliced from, not in the slice
        with pytest.raises(ValueError):
            part.index_of(outside)


@pytest.mark.parametrize("kind", ["messages", "records"])
def test_count_through_counts_the_prefix_at_or_below_an_offset(kind: str) -> None:
    msgs = messages([b"v"] * len(GAPS), offsets=GAPS)
    batch = raw(msgs) if kind == "messages" else RecordBatch.of(converted(msgs))
    expected = {-1: 0, 4: 0, 5: 1, 6: 1, 7: 2, 8: 3, 11: 3, 12: 4, 39: 6, 40: 7, 10**12: 7}
    assert {o: batch.count_through(o) for o in expected} == expected
    part = batch.slice(2, 5)  # offsets 8, 12, 20
    assert {o: part.count_through(o) for o in (0, 7, 8, 12, 19, 20, 21, 40)} == {
        0: 0, 7: 0, 8: 1, 12: 2, 19: 2, 20: 3, 21: 3, 40: 3,
    }


@settings(max_examples=200, deadline=None)
@given(
    offsets=st.lists(st.integers(0, 10**6), min_size=1, max_size=12, unique=True).map(sorted),
    cuts=_cuts,
    probe=st.lists(st.integers(-1, 10**6 + 1), max_size=5),
    records=st.booleans(),
)
def test_offsets_of_any_slice_chain(offsets: list[int], cuts: list[tuple[int, int]], probe: list[int],
                                    records: bool) -> None:
    msgs = messages([b"v"] * len(offsets), offsets=offsets)
    batch = RecordBatch.of(converted(msgs)) if records else raw(msgs)
    part, lo, hi = chain(batch, cuts)
    own = offsets[lo:hi]
    assert (part.first_offset, part.last_offset) == (own[0], own[-1])
    assert [part.offset_at(i) for i in range(len(part))] == own
    for offset in [*own, *probe]:
        assert part.count_through(offset) == sum(1 for o in own if o <= offset)
        if offset in own:
            assert part.index_of(offset) == own.index(offset)
        else:
            with pytest.raises(ValueError):
                part.index_of(offset)


# ------------------------------------------------------------------------------------ timestamps


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        pytest.param([(1, 7), (1, 3), (1, 5)], (3, 7), id="create-time-out-of-order"),
        pytest.param([(2, 7), (2, 3)], (3, 7), id="log-append-time"),
        pytest.param([(0, -1), (0, -1)], (None, None), id="none-available"),
        pytest.param([(0, 0)], (None, None), id="one-without"),
        pytest.param([(0, 0), (1, 50), (2, 70)], (50, 70), id="mixed-with-type-0"),
        pytest.param([(0, 10**15), (1, 50)], (50, 50), id="a-type-0-value-is-ignored-even-when-larger"),
        pytest.param([(1, 50), (0, -(10**15))], (50, 50), id="a-type-0-value-is-ignored-even-when-smaller"),
        pytest.param([(2, 10), (1, 90)], (10, 90), id="types-differ-order-by-value"),
        pytest.param([(1, 90), (2, 10), (0, 5)], (10, 90), id="all-three"),
        pytest.param([(1, 0), (1, 0)], (0, 0), id="epoch-zero"),
        pytest.param([(1, -5), (1, 3)], (-5, 3), id="negative"),
    ],
)
def test_timestamps_are_what_the_per_record_converter_gives(
    stamps: list[tuple[int, int]], expected: tuple[int | None, int | None]
) -> None:
    msgs = messages([GOOD] * len(stamps), stamps=stamps)
    assert per_record_timestamps(msgs) == expected
    assert one(msgs).timestamps() == expected  # a JSON-lines batch
    assert raw(msgs).timestamps() == expected  # a per-record batch
    assert RecordBatch.of(converted(msgs)).timestamps() == expected


def test_messages_without_a_timestamp_at_all() -> None:
    msgs = [Message(topic="t", partition=0, offset=i, value=GOOD) for i in range(3)]  # timestamp (0, 0)
    assert one(msgs).timestamps() == (None, None) == per_record_timestamps(msgs)


@settings(max_examples=300, deadline=None)
@given(
    stamps=st.lists(st.tuples(st.sampled_from([0, 1, 2]), st.integers(-(2**40), 2**42)), min_size=1,
                    max_size=12),
    cuts=_cuts,
)
def test_timestamps_of_any_batch_and_slice_chain(
    stamps: list[tuple[int, int]], cuts: list[tuple[int, int]]
) -> None:
    msgs = messages([GOOD] * len(stamps), stamps=stamps)
    for batch in (one(msgs), RecordBatch.of(converted(msgs))):
        assert batch.timestamps() == per_record_timestamps(msgs)
        part, lo, hi = chain(batch, cuts)
        assert part.timestamps() == per_record_timestamps(msgs[lo:hi])


# --------------------------------------------------------------------------- nbytes and messages


def test_nbytes_counts_keys_and_values_as_consumed() -> None:
    values: list[bytes | None] = [b"abc", None, b"", "é".encode(), b"xy"]
    keys: list[bytes | None] = [b"k", b"key", None, b"", "€".encode()]
    batch = raw(messages(values, keys=keys))
    assert batch.nbytes() == 3 + 0 + 0 + 2 + 2 + 1 + 3 + 0 + 0 + 3
    assert batch.slice(1, 3).nbytes() == 3
    assert batch.slice(3).slice(1).nbytes() == 2 + 3
    assert RecordBatch.of(converted(messages([b"abc"]))).nbytes() == 0  # records: nothing consumed


def test_message_gives_the_consumed_message_of_a_position() -> None:
    msgs = messages([GOOD] * 5, first=10)
    batch = one(msgs)
    assert [batch.message(i) for i in range(5)] == msgs
    assert batch.slice(2).message(1) is msgs[3]
    assert RecordBatch.of(converted(msgs)).message(0) is None


# ------------------------------------------------------------------------------ the lazy view


def test_nothing_is_converted_until_a_record_is_read_and_each_is_converted_once() -> None:
    converter = Counting(ByteArrayConverter(), JsonConverter(False))
    msgs = messages([b'{"i":%d}' % i for i in range(6)])
    (batch,) = BatchBuilder(converter).build("t", 0, msgs)
    # what names files and places records needs no conversion
    batch.timestamps(), batch.first_offset, batch.last_offset, batch.nbytes(), batch.index_of(3)
    assert batch.json_lines() is not None
    assert converter.calls == Counter()
    view = batch.records()
    assert len(view) == 6 and converter.calls == Counter()
    assert view[2].value == {"i": 2}
    assert converter.calls == Counter({2: 1})
    first = list(batch.records())
    again = list(batch.records())
    assert [r.value for r in first] == [{"i": i} for i in range(6)]
    assert all(a is b for a, b in zip(first, again, strict=True))  # the same objects: cached
    assert converter.calls == Counter(dict.fromkeys(range(6), 1))


def test_slices_share_the_converted_records() -> None:
    converter = Counting(ByteArrayConverter(), JsonConverter(False))
    (batch,) = BatchBuilder(converter).build("t", 0, messages([b'{"i":%d}' % i for i in range(8)]))
    part = batch.slice(2, 6).slice(1)  # positions 3..5
    read = list(part.records())
    assert [r.offset for r in read] == [3, 4, 5]
    assert batch.records()[4] is read[1]
    assert batch.slice(4).records()[0] is read[1]
    list(batch.records())
    assert converter.calls == Counter(dict.fromkeys(range(8), 1))


def test_the_view_indexes_like_a_sequence() -> None:
    batch = one(messages([b'{"i":%d}' % i for i in range(5)]))
    view = batch.records()
    assert view[-1].offset == 4 and view[-5].offset == 0
    with pytest.raises(IndexError):
        view[5]
    with pytest.raises(IndexError):
        view[-6]
    assert [r.offset for r in view[1:3]] == [1, 2]
    assert [r.offset for r in view[3:][1:]] == [4]
    assert len(view[4:2]) == 0
    with pytest.raises(ValueError, match="step"):
        view[::2]


def _with_bad(at: int, n: int = 8, bad: bytes = b"not json") -> tuple[RecordBatch, list[Message]]:
    values = [b'{"i":%d}' % i for i in range(n)]
    values[at] = bad
    msgs = messages(values, first=100)
    return one(msgs, cheap_forms=False), msgs


def test_the_first_bad_record_raises_its_error_with_its_index_in_the_view_read() -> None:
    batch, _ = _with_bad(5)
    with pytest.raises(ConversionError) as raised:
        list(batch.records())
    assert (raised.value.index, raised.value.offset, raised.value.stage) == (5, 105, "VALUE_CONVERTER")
    with pytest.raises(ConversionError) as raised:
        batch.records()[5]
    assert raised.value.index == 5
    # relative to the view it was read from: a slice, a slice of a slice, a view of a view
    with pytest.raises(ConversionError) as raised:
        list(batch.slice(3).records())
    assert (raised.value.index, raised.value.offset) == (2, 105)
    with pytest.raises(ConversionError) as raised:
        list(batch.slice(1, 7).slice(2).records())
    assert (raised.value.index, raised.value.offset) == (2, 105)
    with pytest.raises(ConversionError) as raised:
        batch.records()[4:][1]
    assert (raised.value.index, raised.value.offset) == (1, 105)
    with pytest.raises(ConversionError) as raised:
        batch.slice(5).records()[-3]
    assert (raised.value.index, raised.value.offset) == (0, 105)


def test_records_before_and_after_a_bad_one_can_be_read() -> None:
    batch, _ = _with_bad(5)
    view = batch.records()
    assert [view[i].offset for i in range(5)] == [100, 101, 102, 103, 104]
    assert [r.value for r in batch.slice(6).records()] == [{"i": 6}, {"i": 7}]
    with pytest.raises(ConversionError):  # reading it again raises again: a failure is not cached
        view[5]


def test_a_key_that_is_not_utf8_converts_with_replacement_characters() -> None:
    """As Kafka's StringDeserializer does (``new String(data, encoding)``): never a record error."""
    msgs = messages([GOOD] * 3, keys=[b"a", b"\xff", b"c"], first=7)
    (batch,) = build(msgs, StringConverter())
    assert [r.key for r in batch.records()] == ["a", "\ufffd", "c"]


# -------------------------------------------------------------------------------- json_lines


@settings(max_examples=200, deadline=None)
@given(n=st.integers(1, 12), cuts=_cuts, checked=st.booleans())
def test_json_lines_of_any_slice_chain_is_its_values_joined(n: int, cuts: list[tuple[int, int]],
                                                           checked: bool) -> None:
    values = [b'{"i":%d,"s":"%s"}' % (i, b"x" * (i % 4)) for i in range(n)]
    batch = one(messages(values))
    assert batch.json_lines(checked=checked) == b"\n".join(values)
    part, lo, hi = chain(batch, cuts)
    assert part.json_lines(checked=checked) == b"\n".join(values[lo:hi])


def test_checked_text_leaves_out_exactly_the_slices_holding_an_invalid_value() -> None:
    values = [b'{"i":%d}' % i for i in range(8)]
    values[3] = b'{"i": }'  # framed, so in the run, but not JSON
    batch = one(messages(values))
    assert batch.json_lines() is None
    assert batch.json_lines(checked=False) == b"\n".join(values)  # framing only
    assert batch.slice(0, 3).json_lines() == b"\n".join(values[:3])
    assert batch.slice(4).json_lines() == b"\n".join(values[4:])
    assert batch.slice(4).slice(1, 3).json_lines() == b"\n".join(values[5:7])
    for start, stop in ((0, 4), (3, 4), (2, 8), (3, 8)):
        assert batch.slice(start, stop).json_lines() is None
        assert batch.slice(start, stop).json_lines(checked=False) == b"\n".join(values[start:stop])


def test_without_json_validation_checked_text_is_the_framed_text() -> None:
    """connect.json.validate=false: the user opted out of the check (the converter then passes
    framed text through unparsed as well)."""
    values = [GOOD, b'{"i": }', GOOD]
    batch = one(messages(values), check_json=False)
    assert batch.json_lines() == batch.json_lines(checked=False) == b"\n".join(values)


def test_batches_without_the_form_have_no_text() -> None:
    msgs = messages([GOOD] * 3)
    assert RecordBatch.of(converted(msgs)).json_lines() is None
    assert one(msgs, cheap_forms=False).json_lines() is None
    assert one(msgs, value=JsonConverter(True)).json_lines(checked=False) is None
    assert raw(msgs).json_lines(checked=False) is None


# ---------------------------------------------------------------------------------------- keys

_keys = st.one_of(
    st.none(), st.text(max_size=3).map(str.encode), st.binary(max_size=4),
    st.sampled_from([b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80", "\u20ac".encode()[:1]]),
)


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(_keys, min_size=1, max_size=8), cuts=_cuts)
def test_no_key_takes_a_cheap_form_away(keys: list[bytes | None], cuts: list[tuple[int, int]]) -> None:
    """Whatever the keys (truncated, overlong, encoded surrogates, halves of one character), a
    String key converts, so the JSON lines of every slice are its values; each record's key is
    its bytes decoded with replacement characters."""
    (batch,) = build(messages([GOOD] * len(keys), keys=keys), StringConverter())
    part, lo, hi = chain(batch, cuts)
    assert batch.json_lines() == b"\n".join([GOOD] * len(keys))
    assert part.json_lines() == b"\n".join([GOOD] * (hi - lo))
    expected = [None if k is None else k.decode("utf-8", "replace") for k in keys]
    assert [r.key for r in batch.records()] == expected


def test_null_empty_and_multibyte_keys_are_text() -> None:
    keys: list[bytes | None] = [None, b"", "\u00e9\u20ac\U0001f600".encode(), None]
    (batch,) = build(messages([GOOD] * 4, keys=keys), StringConverter())
    assert batch.json_lines() == b"\n".join([GOOD] * 4)
    assert [r.key for r in batch.records()] == [None, "", "\u00e9\u20ac\U0001f600", None]


# -------------------------------------------------------------------------------- avro_columns

FLAT: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "station", "type": ["null", "string"], "default": None},
        {"name": "value", "type": ["double", "null"]},
        {"name": "ok", "type": "boolean"},
    ],
}
NESTED: dict[str, Any] = {
    "type": "record",
    "name": "Outer",
    "fields": [
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}}
    ],
}


def reading(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "station": None if i % 4 == 0 else f"stätion-{i}",
        "value": None if i % 5 == 0 else i / 7,
        "ok": i % 2 == 0,
    }


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many values each decode_values call decoded."""
    calls: list[int] = []
    decode = avro_values.decode_values

    def counting(values: Any, fields: Any, schema: Any) -> Any:
        calls.append(len(values))
        return decode(values, fields, schema)

    monkeypatch.setattr(avro_values, "decode_values", counting)
    return calls


def avro_batch(n: int = 12, key: Converter | None = None, keys: Sequence[bytes | None] | None = None,
               schemas: dict[int, Any] | None = None, values: Sequence[bytes | None] | None = None) -> Any:
    converter, registry = avro_converter(schemas or {7: FLAT})
    values = values if values is not None else [wire(7, FLAT, reading(i)) for i in range(n)]
    msgs = messages(values, keys=keys)
    batches = BatchBuilder(RecordConverter(key or ByteArrayConverter(), converter)).build("t", 0, msgs)
    return batches, registry


def test_avro_columns_are_decoded_only_when_asked_and_once_per_consumed_run(decodes: list[int]) -> None:
    (batch,), registry = avro_batch()
    assert registry.asked == [] and decodes == []
    list(batch.records())  # the per-record view decodes each value itself
    assert decodes == []
    columns = batch.avro_columns()
    assert columns is not None and decodes == [12]
    for start, stop in ((0, 3), (3, 12), (5, 6)):
        assert batch.slice(start, stop).avro_columns() is not None
    assert batch.slice(2).slice(4, 6).avro_columns() is not None
    assert batch.avro_columns() is not None
    assert decodes == [12]
    assert registry.asked == [7]  # one registry question per schema id


def test_avro_columns_are_the_per_record_rows_and_the_writer_schema(decodes: list[int]) -> None:
    (batch,), _ = avro_batch()
    rows, schema = batch.avro_columns()
    records = list(batch.records())
    assert rows.to_pylist() == [r.value for r in records] == [reading(i) for i in range(12)]
    assert schema == FLAT and schema is records[0].value_schema


@settings(max_examples=100, deadline=None)
@given(cuts=_cuts)
def test_avro_columns_of_any_slice_chain_stay_aligned(cuts: list[tuple[int, int]]) -> None:
    (batch,), _ = avro_batch()
    part, lo, hi = chain(batch, cuts)
    rows, _ = part.avro_columns()
    assert rows.num_rows == len(part)
    assert rows.to_pylist() == [r.value for r in part.records()] == [reading(i) for i in range(lo, hi)]
    assert (part.first_offset, part.last_offset) == (lo, hi - 1)


def test_runs_without_columns() -> None:
    nested_values = [wire(9, NESTED, {"inner": {"x": i}}) for i in range(3)]
    (nested,), _ = avro_batch(values=nested_values, schemas={9: NESTED})
    assert nested.avro_columns() is None
    assert [r.value for r in nested.records()] == [{"inner": {"x": i}} for i in range(3)]
    values: list[bytes | None] = [wire(7, FLAT, reading(i)) for i in range(4)]
    values[2] = values[2][:-1]  # type: ignore[index]  # a truncated body: the per-record path decides
    (damaged,), _ = avro_batch(values=values)
    assert damaged.avro_columns() is None
    assert damaged.slice(0, 2).avro_columns() is None  # decoded once per run: no second try
    (down,), registry = avro_batch()
    registry.down = True
    assert down.avro_columns() is None
    with pytest.raises(ConversionError) as raised:
        down.records()[0]
    assert raised.value.transient  # the record may be fine: retried, never skipped


def test_a_key_that_is_not_utf8_keeps_the_columns() -> None:
    keys: list[bytes | None] = [b"k%d" % i for i in range(12)]
    keys[6] = b"\xfe"
    (batch,), _ = avro_batch(key=StringConverter(), keys=keys)
    assert batch.avro_columns()[0].to_pylist() == [reading(i) for i in range(12)]
    assert batch.records()[6].key == "\ufffd"


# ---------------------------------------------------------------------------- memo and ahead


def test_memo_computes_once_per_batch_and_key() -> None:
    batch = one(messages([GOOD] * 4))
    calls: list[tuple[str, int]] = []

    def compute(name: str) -> Callable[[RecordBatch], object]:
        def run(b: RecordBatch) -> object:
            calls.append((name, len(b)))
            return object()
        return run

    a = batch.memo("a", compute("a"))
    assert batch.memo("a", compute("again")) is a
    b = batch.memo("b", compute("b"))
    assert b is not a
    part = batch.slice(1)
    assert part.memo("a", compute("slice")) is not a  # a slice is a batch of its own
    assert part.memo("a", compute("slice again")) is part.memo("a", compute("x"))
    assert calls == [("a", 4), ("b", 4), ("slice", 3)]


def test_whole_is_the_consumed_batch_and_where_a_slice_starts_in_it() -> None:
    batch = one(messages([GOOD] * 8))
    assert batch.whole() == (batch, 0)
    whole, start = batch.slice(2, 7).slice(1, 4).whole()
    assert whole is batch and start == 3
    assert batch.slice(0) is batch and batch.slice(0, 99) is batch


def test_slice_refuses_empty_and_out_of_range() -> None:
    batch = one(messages([GOOD] * 4))
    for start, stop in ((4, None), (2, 2), (3, 1), (-1, 2), (5, 9)):
        with pytest.raises(ValueError):
            batch.slice(start, stop)
    assert len(batch.slice(3, 10)) == 1


def test_ahead_computes_on_the_batchs_helper_thread_and_memo_takes_its_result() -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="helper") as executor:
        batch = one(messages([GOOD] * 4), executor=executor)
        threads: list[str] = []

        def compute(b: RecordBatch) -> object:
            threads.append(threading.current_thread().name)
            return ("parsed", len(b))

        batch.ahead("k", compute)
        batch.ahead("k", compute)  # started once
        again = batch.memo("k", lambda b: pytest.fail("computed again on the caller's thread"))
        assert again == ("parsed", 4)
        assert batch.memo("k", compute) == ("parsed", 4)
        assert len(threads) == 1 and threads[0].startswith("helper")
        batch.memo("done", compute)
        batch.ahead("done", lambda b: pytest.fail("already computed"))
        assert batch.memo("done", compute) == ("parsed", 4)


class _Deferred(Executor):
    """An executor whose work runs only when the test says so."""

    def __init__(self) -> None:
        self.work: list[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]]] = []

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Future[Any]:
        future: Future[Any] = Future()
        self.work.append((future, fn, args))
        return future

    def run(self) -> None:
        for future, fn, args in self.work:
            future.set_result(fn(*args))


def test_memo_waits_for_what_ahead_started() -> None:
    executor = _Deferred()
    batch = one(messages([GOOD] * 3), executor=executor)
    computed: list[int] = []
    batch.ahead("k", lambda b: computed.append(len(b)) or "from ahead")
    assert len(executor.work) == 1 and computed == []
    got: list[object] = []
    reader = threading.Thread(target=lambda: got.append(batch.memo("k", lambda b: "computed again")))
    reader.start()
    future = executor.work[0][0]
    until(lambda: blocked_in_wait(future) or got, "memo waits for the helper's result")
    assert got == []
    executor.run()
    reader.join(10)
    assert got == ["from ahead"] and computed == [3]


def test_ahead_without_a_helper_thread_does_nothing() -> None:
    batch = one(messages([GOOD] * 3))
    batch.ahead("k", lambda b: pytest.fail("no helper thread: nothing may run"))
    assert batch.memo("k", lambda b: "here") == "here"


# ----------------------------------------------------------------------- batches of records


def test_of_and_batches_of() -> None:
    records = [*converted(messages([b"a", b"b"])), *converted(messages([b"c"], partition=1, first=9))]
    with pytest.raises(ValueError, match="at least one"):
        RecordBatch.of([])
    with pytest.raises(ValueError, match="one topic partition"):
        RecordBatch.of(records)
    batches = batches_of([*records, *converted(messages([b"d"], partition=0, first=5))])
    assert [(b.partition, b.first_offset, b.last_offset) for b in batches] == [
        (0, 0, 1), (1, 9, 9), (0, 5, 5),
    ]
    assert [r.value for r in batches[0].records()] == [b"a", b"b"]
    assert batches_of([]) == []
