"""The consuming thread's C loops (sink/records/_scan.c, formats/_wire.c) against their Python
versions, on messages of every shape the loops branch on: errors, partition changes (None
included), timestamps of each type (not available, create time, log-append time; negative and
64-bit values), tombstones, short values and differing wire headers; and where the Avro
pass-through's blocks close."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from formats import avro_wire
from sink.records import scan

_stamps = st.tuples(st.sampled_from([0, 1, 2]), st.integers(-(2**63), 2**63 - 1))


@st.composite
def _messages(draw: Any) -> list[Message]:
    count = draw(st.integers(0, 40))
    out = []
    for i in range(count):
        kwargs: dict[str, Any] = {"topic": "t", "offset": i, "timestamp": draw(_stamps)}
        partition = draw(st.sampled_from([None, 0, 1, 7]))
        if partition is not None:
            kwargs["partition"] = partition
        if draw(st.integers(0, 9)) == 0:
            kwargs["error"] = KafkaError(KafkaError._PARTITION_EOF)
        out.append(Message(**kwargs))
    return out


def test_the_c_loops_are_built_and_read_message_fields_in_place() -> None:
    """setup.py builds both modules on a machine with a C compiler (this one, and CI's), and the
    probes find where this client's Message keeps each field the loops read."""
    assert scan.NATIVE
    assert scan.TIMESTAMPS_IN_PLACE
    assert {"error", "partition", "timestamp", "value"} == scan.IN_PLACE
    assert avro_wire._joined_bodies is avro_wire._joined_bodies_c


@settings(max_examples=300, deadline=None)
@given(_messages(), st.data())
def test_message_loops_agree_with_python(messages: list[Message], data: Any) -> None:
    for msg in messages:
        if data.draw(st.booleans()):
            msg.set_value(data.draw(st.one_of(st.none(), st.binary(max_size=8))))
    assert scan.values(messages) == scan.values_py(messages) == [m.value() for m in messages]
    assert scan.first_error(messages) == scan.first_error_py(messages)
    assert scan.partition_cuts(messages) == scan.partition_cuts_py(messages)
    start = data.draw(st.integers(0, len(messages)))
    stop = data.draw(st.integers(start, len(messages)))
    assert scan.timestamp_range(messages, start, stop) == scan.timestamp_range_py(messages, start, stop)


def test_timestamp_range_leaves_out_messages_without_one() -> None:
    messages = [Message(timestamp=(1, 50)), Message(timestamp=(0, -1)), Message(timestamp=(2, 10))]
    assert scan.timestamp_range(messages, 0, 3) == (10, 50)
    assert scan.timestamp_range(messages, 1, 2) == (None, None)
    assert scan.timestamp_range(messages, 1, 1) == (None, None)
    with pytest.raises(IndexError):
        scan.timestamp_range(messages, 2, 4)


class _Lookalike:
    """Not a confluent_kafka.Message: the C loops ask it through Python."""

    def __init__(self, partition: int, stamp: tuple[int, int], error: object = None) -> None:
        self._p, self._t, self._e = partition, stamp, error

    def partition(self) -> int:
        return self._p

    def timestamp(self) -> tuple[int, int]:
        return self._t

    def error(self) -> object:
        return self._e

    def value(self) -> bytes:
        return b"v%d" % self._p


def test_other_objects_go_through_their_methods() -> None:
    mixed: list[Any] = [
        Message(partition=1, timestamp=(1, 5)), _Lookalike(1, (1, 3)), _Lookalike(2, (1, 9), error="x"),
    ]
    assert scan.values(mixed) == [None, b"v1", b"v2"]
    assert scan.first_error(mixed) == 2
    assert scan.partition_cuts(mixed) == [2, 3]
    assert scan.timestamp_range(mixed, 0, 3) == (3, 9)


def test_values_survive_a_value_method_that_empties_the_list() -> None:
    """A Python object's value() runs Python code, which may change the list being read: an
    error, not a read past its end."""
    messages: list[Any] = []

    class Emptying:
        def value(self) -> bytes:
            messages.clear()
            return b"x"

    messages.extend([Emptying(), Emptying()])
    with pytest.raises(RuntimeError, match="list changed"):
        scan.values(messages)


@pytest.mark.parametrize("loop", ["partition_cuts", "timestamp_range"])
def test_the_loops_survive_a_method_that_empties_the_list(loop: str) -> None:
    """partition() and timestamp() of a Python object run Python code too: the C loops hold each
    message while it answers and stop with an error once the list no longer reaches the next one,
    instead of reading past its end."""
    messages: list[Any] = []

    class Emptying:
        def partition(self) -> int:
            messages.clear()
            return 0

        def timestamp(self) -> tuple[int, int]:
            messages.clear()
            return (1, 5)

    messages.extend([Emptying(), Emptying(), Emptying()])
    with pytest.raises(RuntimeError, match="list changed"):
        if loop == "partition_cuts":
            scan.partition_cuts(messages)
        else:
            scan.timestamp_range(messages, 0, 3)


_values = st.lists(
    st.one_of(
        st.none(),
        st.binary(max_size=12),
        st.builds(lambda body: b"\x00\x00\x00\x00\x07" + body, st.binary(max_size=20)),
    ),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_values)
def test_join_agrees_with_python(values: list[bytes | None]) -> None:
    got, want = scan.join(values, b"\x00" * 8), scan.join_py(values, b"\x00" * 8)
    if want is None:
        assert got is None
        return
    assert got is not None
    assert got[0] == want[0] == b"".join([*values, b"\x00" * 8])  # type: ignore[list-item]
    assert got[1].tolist() == want[1].tolist()
    assert got[2].tolist() == want[2].tolist()
    assert [got[0][a:b] for a, b in zip(got[1], got[2], strict=True)] == values


@settings(max_examples=300, deadline=None)
@given(_values, st.sampled_from([0, 1, 5]))
def test_same_header_agrees_with_python(values: list[bytes | None], header: int) -> None:
    firsts = {v[:header] for v in values if v is not None}
    want = bool(values) and None not in values and len(firsts) == 1 and all(
        len(v) >= header for v in values  # type: ignore[arg-type]
    )
    assert scan.same_header(values, header) is scan.same_header_py(values, header) is want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(min_size=5, max_size=30), max_size=30), st.data())
def test_block_cuts_agree_with_python(values: list[bytes], data: Any) -> None:
    """Where the pass-through closes its blocks: after each record that takes the open block to
    the block size, counted from what the block held before (the C loop and the numpy one)."""
    block = data.draw(st.integers(1, 60))
    open_size = data.draw(st.integers(0, block - 1))  # a full block was written out already
    first = data.draw(st.integers(0, len(values)))
    last = data.draw(st.integers(first, len(values)))
    part = avro_wire.WireValues(values, first, last)
    got = avro_wire.block_cuts(part, open_size, block)
    assert got == avro_wire._block_cuts_py(values[first:last], open_size, block)
    assert got == avro_wire.block_cuts(values[first:last], open_size, block)
    cuts, left = got
    held, start = open_size, 0  # the rule, record by record
    for cut in cuts:
        held += sum(len(v) - 5 for v in values[first + start : first + cut])
        assert held >= block
        assert held - (len(values[first + cut - 1]) - 5) < block
        held, start = 0, cut
    assert left == held + sum(len(v) - 5 for v in values[first + start : last])
    assert left < block


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(min_size=5, max_size=30), max_size=30), st.data())
def test_bodies_agree_with_python(values: list[bytes], data: Any) -> None:
    first = data.draw(st.integers(0, len(values)))
    last = data.draw(st.integers(first, len(values)))
    assert avro_wire._joined_bodies_c(values, first, last) == b"".join(v[5:] for v in values[first:last])
    assert avro_wire._joined_bodies_py(values, first, last) == b"".join(v[5:] for v in values[first:last])


def test_bodies_refuse_a_value_shorter_than_its_header() -> None:
    with pytest.raises(ValueError, match="value 1"):
        avro_wire._joined_bodies_c([b"\x00" * 6, b"\x00"], 0, 2)
