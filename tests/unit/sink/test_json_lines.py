"""json_lines (sink/records/json_lines.py): which runs of messages become one block of JSON lines.

A block skips the per-record path, so it may only be built when every message in the run would
be written by that path as its value text unchanged: each value a one-line ``{...}`` text (no
tombstone, no line break, no carriage return, nothing around the braces) and, when keys go
through the UTF-8 StringConverter, every key decodable. The rule is tested case by case, as a
property over arbitrary bytes, and against the per-record converter and JSON writer themselves.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from confluent_kafka import Message
from hypothesis import event, given, settings
from hypothesis import strategies as st

from formats import FormatSettings, get_format
from kcql.model import StoreFormat
from sink.records.converters import ConversionError, JsonConverter, RecordConverter, StringConverter
from sink.records.json_lines import JsonLines, json_lines

GOOD = b'{"id":1,"name":"a"}'


def messages(
    values: list[bytes | None],
    keys: list[bytes | None] | None = None,
    stamps: list[tuple[int, int]] | None = None,
    first: int = 5,
) -> list[Message]:
    keys = keys if keys is not None else [None] * len(values)
    stamps = stamps if stamps is not None else [(1, 1_000 + i) for i in range(len(values))]
    return [
        Message(topic="t", partition=3, offset=first + i, key=k, value=v, timestamp=ts)
        for i, (k, v, ts) in enumerate(zip(keys, values, stamps, strict=True))
    ]


def one_line_object(value: bytes | None) -> bool:
    """The per-value rule, written independently of json_lines' separator counting."""
    return (
        value is not None
        and value.startswith(b"{")
        and value.endswith(b"}")
        and b"\n" not in value
        and b"\r" not in value
    )


def utf8(key: bytes | None) -> bool:
    if key is None:
        return True
    try:
        key.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def expected_timestamps(msgs: list[Message]) -> tuple[int | None, int | None]:
    """Min/max over messages whose timestamp type is not 0 (TIMESTAMP_NOT_AVAILABLE)."""
    values = [ts for kind, ts in (m.timestamp() for m in msgs) if kind != 0]
    return (min(values), max(values)) if values else (None, None)


# ------------------------------------------------------------------------------------- accepted


def test_a_run_of_one_line_objects_is_one_block() -> None:
    values = [GOOD, b"{}", b'{"s":"\\n \\r \\u2028 \xc3\xa9","n":[1,{"x":null}]}', b'{ "spaced" : true }']
    block = json_lines("t", 3, messages(values), check_keys=False)
    assert isinstance(block, JsonLines)
    assert block.data == b"\n".join(values)
    assert (block.topic, block.partition, len(block)) == ("t", 3, 4)
    assert (block.first_offset, block.last_offset) == (5, 8)
    assert block.timestamps() == (1_000, 1_003)
    assert [m.offset() for m in block.messages] == [5, 6, 7, 8]


def test_a_single_message_is_a_block_of_one() -> None:
    block = json_lines("t", 3, messages([GOOD]), check_keys=True)
    assert block is not None
    assert (block.data, len(block), block.first_offset, block.last_offset) == (GOOD, 1, 5, 5)


def test_malformed_json_inside_the_braces_is_still_a_block() -> None:
    # JSON -> JSON writes such a text through unparsed on the per-record path too (documented);
    # for Parquet, the format's own parser refuses it and the per-record path decides
    assert json_lines("t", 0, messages([b'{"a": }', b"{not json}"]), check_keys=False) is not None


# ------------------------------------------------------------------------------------- rejected


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(None, id="tombstone"),
        pytest.param(b'{"a":\n1}', id="newline-inside"),
        pytest.param(b'{"a":1}\n', id="trailing-newline"),
        pytest.param(b'\n{"a":1}', id="leading-newline"),
        pytest.param(b'{"a":1,\r"b":2}', id="carriage-return-inside"),
        pytest.param(b'{"a":1}\r', id="trailing-carriage-return"),
        pytest.param(b'{"a":1}\r\n', id="crlf"),
        pytest.param(b"[1,2]", id="array"),
        pytest.param(b'[{"a":1}]', id="array-of-object"),
        pytest.param(b"1", id="scalar-number"),
        pytest.param(b'"text"', id="scalar-string"),
        pytest.param(b"null", id="json-null"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"a":1} ', id="trailing-space"),
        pytest.param(b' {"a":1}', id="leading-space"),
        pytest.param(b'{"a":1}\t', id="trailing-tab"),
        pytest.param(b"\xef\xbb\xbf{}", id="utf8-bom"),
        pytest.param(b"{", id="open-brace"),
        pytest.param(b"}", id="close-brace"),
        pytest.param(b"}{", id="braces-reversed"),
        pytest.param(b"not json", id="text"),
    ],
)
@pytest.mark.parametrize("where", ["alone", "first", "middle", "last"])
def test_a_run_with_any_value_the_per_record_path_must_see_is_refused(bad: bytes | None, where: str) -> None:
    values = {
        "alone": [bad],
        "first": [bad, GOOD, GOOD],
        "middle": [GOOD, bad, GOOD],
        "last": [GOOD, GOOD, bad],
    }[where]
    assert json_lines("t", 0, messages(values), check_keys=False) is None
    assert json_lines("t", 0, messages(values), check_keys=True) is None


def test_values_that_only_look_right_once_joined_are_refused() -> None:
    # "{" + "}" joined is "{\n}"; "{}" + "}\n{" style tricks must not pass as separators
    assert json_lines("t", 0, messages([b"{", b"}"]), check_keys=False) is None
    assert json_lines("t", 0, messages([b"{}", b"", b"{}"]), check_keys=False) is None
    assert json_lines("t", 0, messages([b'{"a":1}\n{"b":2}']), check_keys=False) is None
    assert json_lines("t", 0, messages([b'{"a":1}\n{', b'"b":2}']), check_keys=False) is None


# ----------------------------------------------------------------------------------------- keys


def test_an_invalid_utf8_key_refuses_the_run_only_when_keys_are_checked() -> None:
    keys = [b"ok", b"\xff\xfe not utf-8", None]
    values = [GOOD, GOOD, GOOD]
    assert json_lines("t", 0, messages(values, keys), check_keys=True) is None
    block = json_lines("t", 0, messages(values, keys), check_keys=False)
    assert block is not None and block.data == b"\n".join(values)


@pytest.mark.parametrize(
    "bad_key",
    [
        pytest.param(b"\xff", id="ff"),
        pytest.param(b"\xc3", id="truncated-2-byte"),
        pytest.param(b"\xe2\x82", id="truncated-3-byte"),
        pytest.param(b"\xc0\xaf", id="overlong"),
        pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
        pytest.param(b"\xf4\x90\x80\x80", id="beyond-u10ffff"),
    ],
)
def test_every_kind_of_undecodable_key_is_caught(bad_key: bytes) -> None:
    with pytest.raises(UnicodeDecodeError):
        bad_key.decode("utf-8")  # the StringConverter would reject it
    assert json_lines("t", 0, messages([GOOD, GOOD], [b"k", bad_key]), check_keys=True) is None


def test_halves_of_one_character_in_two_keys_do_not_decode_as_one() -> None:
    euro = "€".encode()
    split = [euro[:1], euro[1:]]
    assert json_lines("t", 0, messages([GOOD, GOOD], split), check_keys=True) is None
    assert json_lines("t", 0, messages([GOOD, GOOD], [euro[:2], euro[2:]]), check_keys=True) is None


def test_null_empty_and_multibyte_keys_pass() -> None:
    keys = [None, b"", "é€😀".encode(), None]
    assert json_lines("t", 0, messages([GOOD] * 4, keys), check_keys=True) is not None
    assert json_lines("t", 0, messages([GOOD] * 2, [None, None]), check_keys=True) is not None


# ------------------------------------------------------------------------------------ head/tail


def test_head_and_tail_split_the_block_at_any_point() -> None:
    values = [b'{"i":%d}' % i for i in range(6)]
    block = json_lines("t", 3, messages(values), check_keys=False)
    assert block is not None
    for n in range(1, 6):
        head, tail = block.head(n), block.tail(n)
        assert isinstance(head, JsonLines) and isinstance(tail, JsonLines)
        assert head.data == b"\n".join(values[:n]) and tail.data == b"\n".join(values[n:])
        assert (len(head), len(tail)) == (n, 6 - n)
        assert (head.first_offset, head.last_offset) == (5, 4 + n)
        assert (tail.first_offset, tail.last_offset) == (5 + n, 10)
        assert head.data + b"\n" + tail.data == block.data
        assert (head.topic, head.partition, tail.topic, tail.partition) == ("t", 3, "t", 3)
    assert block.head(6) is block and block.head(100) is block
    assert block.tail(0) is block and block.tail(-1) is block
    # the task splits a block with tail(done).head(room)
    middle = block.tail(2).head(3)
    assert (middle.data, middle.first_offset, middle.last_offset) == (b"\n".join(values[2:5]), 7, 9)


def test_head_and_tail_carry_their_own_timestamps() -> None:
    stamps = [(1, 500), (1, 100), (1, 900), (1, 300)]
    block = json_lines("t", 0, messages([GOOD] * 4, stamps=stamps), check_keys=False)
    assert block is not None
    assert block.timestamps() == (100, 900)
    assert block.head(2).timestamps() == (100, 500)
    assert block.tail(2).timestamps() == (300, 900)
    assert block.tail(3).timestamps() == (300, 300)


# ----------------------------------------------------------------------------------- timestamps


@pytest.mark.parametrize(
    ("stamps", "expected"),
    [
        pytest.param([(1, 7), (1, 3), (1, 5)], (3, 7), id="create-time"),
        pytest.param([(2, 7), (2, 3)], (3, 7), id="log-append-time"),
        pytest.param([(0, -1), (0, -1)], (None, None), id="none-available"),
        pytest.param([(0, -1)], (None, None), id="one-without"),
        pytest.param([(0, 0), (1, 50), (2, 70)], (50, 70), id="mixed-with-type-0"),
        pytest.param([(0, 10**15), (1, 50)], (50, 50), id="type-0-value-ignored"),
        pytest.param([(2, 10), (1, 90)], (10, 90), id="create-and-log-append"),
        pytest.param([(1, 90), (2, 10), (0, 5)], (10, 90), id="all-three"),
        pytest.param([(1, 0), (1, 0)], (0, 0), id="epoch-zero"),
    ],
)
def test_timestamps_are_min_max_over_messages_that_have_one(
    stamps: list[tuple[int, int]], expected: tuple[int | None, int | None]
) -> None:
    block = json_lines("t", 0, messages([GOOD] * len(stamps), stamps=stamps), check_keys=False)
    assert block is not None
    assert block.timestamps() == expected


def test_timestamps_match_what_the_per_record_converter_gives() -> None:
    stamps = [(0, -1), (1, 40), (2, 20), (1, 60), (0, -1)]
    msgs = messages([GOOD] * len(stamps), stamps=stamps)
    block = json_lines("t", 0, msgs, check_keys=False)
    assert block is not None
    converter = RecordConverter(StringConverter(), JsonConverter(False))
    per_record = [r.timestamp for r in map(converter.convert, msgs) if r.timestamp is not None]
    assert block.timestamps() == (min(per_record), max(per_record))


# ------------------------------------------------------------------------------------- property

_interesting = st.sampled_from(
    [
        b"{",
        b"}",
        b"\n",
        b"\r",
        b" ",
        b"}\n{",
        b'"',
        b"[",
        b"]",
        b"\xff",
        b"\xc3\xa9",
        b"{}",
        b'{"a":1}',
    ]
)
_fragments = st.lists(st.one_of(_interesting, st.binary(max_size=3)), max_size=5).map(b"".join)
_framed = st.builds(lambda inner: b"{" + inner + b"}", _fragments)
_well_formed = st.sampled_from([GOOD, b"{}", b'{"x":"\\n"}', b'{"a":[1,{"b":2}]}'])
_clean = st.builds(lambda inner: b"{" + inner.replace(b"\n", b"").replace(b"\r", b"") + b"}", _fragments)
# clean one-line values are drawn most often, so that runs of several accepted values are common
_values = st.one_of(_clean, _clean, _clean, _clean, _framed, _well_formed, st.none(), _fragments)
_text_keys = st.text(max_size=3).map(str.encode)
_keys = st.one_of(
    st.none(), _text_keys, _text_keys, st.binary(max_size=4), st.sampled_from([b"\xff", b"\xe2\x82"])
)
_stamps = st.tuples(st.integers(0, 2), st.integers(-1, 10**13))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.tuples(_values, _keys, _stamps), min_size=1, max_size=8), st.booleans())
def test_a_block_is_built_exactly_when_every_message_satisfies_the_rule(
    items: list[tuple[bytes | None, bytes | None, tuple[int, int]]], check_keys: bool
) -> None:
    values = [v for v, _, _ in items]
    keys = [k for _, k, _ in items]
    msgs = messages(values, keys, [ts for _, _, ts in items])
    block = json_lines("t", 3, msgs, check_keys)
    expected = all(map(one_line_object, values)) and (not check_keys or all(map(utf8, keys)))
    assert (block is not None) == expected
    event(f"block of {len(msgs)}" if block is not None else "refused")
    if block is None:
        return
    assert block.data == b"\n".join(values)  # type: ignore[arg-type]
    assert len(block) == len(msgs)
    assert (block.first_offset, block.last_offset) == (5, 4 + len(msgs))
    assert block.timestamps() == expected_timestamps(msgs)
    for n in range(1, len(msgs)):
        assert block.head(n).data + b"\n" + block.tail(n).data == block.data
        assert block.head(n).timestamps() == expected_timestamps(msgs[:n])
        assert block.tail(n).timestamps() == expected_timestamps(msgs[n:])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_values, _keys), min_size=1, max_size=6))
def test_an_accepted_block_is_what_the_per_record_json_path_writes(
    items: list[tuple[bytes | None, bytes | None]],
) -> None:
    """For STOREAS JSON without envelope the runtime skips parsing one-line texts; a block must
    be byte for byte what the per-record converter + JsonWriter write for the same messages,
    and none of its messages may make the converter fail (which would be an error-policy case)."""
    msgs = messages([v for v, _ in items], [k for _, k in items])
    block = json_lines("t", 3, msgs, check_keys=True)
    if block is None:
        return
    converter = RecordConverter(StringConverter(), JsonConverter(False), parse_value=lambda _topic: False)
    try:
        records = [converter.convert(m) for m in msgs]
    except ConversionError as exc:
        pytest.fail(f"a block took a message the per-record path rejects: {exc}")
    with tempfile.TemporaryDirectory() as tmp:
        writer = get_format(FormatSettings(format=StoreFormat.JSON)).open(Path(tmp) / "f.json")
        assert writer.write(records) == len(records)
        writer.close()
        written = (Path(tmp) / "f.json").read_bytes()
    assert written == block.data + b"\n"
