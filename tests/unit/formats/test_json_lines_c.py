"""The C parser of flat JSON lines (formats/_json_lines.c) against Arrow's JSON reader: whatever
table it returns is the table Arrow's reader returns for the same text (schema, values, nulls),
and it returns one for ordinary lines (so the fast path is the one taken). Lines it is unsure of
(unknown or repeated keys, wrong types, a fraction in a long, escaped keys, lone surrogates,
invalid UTF-8) it leaves to Arrow's reader; that is checked by mutating valid lines."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats import json_lines_arrow
from formats.json_lines_arrow import LineParser, _json_lines, line_parse_options

_KINDS = ("long", "double", "string", "boolean")
_ASCII_NAME = "abcxyz_019 -"
_names = {  # json.dumps escapes a non-ASCII key under ensure_ascii, and the C parser takes no escaped key
    True: st.text(_ASCII_NAME, min_size=1, max_size=6),
    False: st.text(_ASCII_NAME + "é€😀", min_size=1, max_size=6),
}


def _values(kind: str) -> st.SearchStrategy[Any]:
    if kind == "long":
        return st.one_of(st.integers(-(2**63), 2**63 - 1), st.sampled_from([0, -1, 2**63 - 1, -(2**63)]))
    if kind == "double":
        # within 1e-99..1e99: a 3-digit exponent goes to Arrow's reader (test_long_decimals...)
        return st.one_of(
            st.floats(allow_nan=False, allow_infinity=False).filter(
                lambda x: x == 0 or 1e-99 < abs(x) < 1e99
            ),
            st.integers(-(2**60), 2**60),
            st.sampled_from([0.0, -0.0, 474.19, 1e-99, 1e98, 1.5e-05]),
        )
    if kind == "string":
        return st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
    return st.booleans()


@st.composite
def _block(draw: Any) -> tuple[dict[str, Any], list[bytes]]:
    ascii_only = draw(st.booleans())
    names = draw(st.lists(_names[ascii_only], min_size=1, max_size=6, unique=True))
    kinds = [draw(st.sampled_from(_KINDS)) for _ in names]
    avro = {"type": "record", "name": "r", "fields": [
        {"name": n, "type": ["null", k], "default": None} for n, k in zip(names, kinds, strict=True)
    ]}
    lines = []
    for _ in range(draw(st.integers(1, 8))):
        row = {}
        for name, kind in zip(names, kinds, strict=True):
            choice = draw(st.integers(0, 9))
            if choice == 0:
                continue  # missing: null
            row[name] = None if choice == 1 else draw(_values(kind))
        if draw(st.booleans()):
            order = draw(st.permutations(list(row)))
            row = {k: row[k] for k in order}
        spaced = draw(st.booleans())
        text = json.dumps(row, ensure_ascii=ascii_only,
                          separators=(" , ", " : ") if spaced else (",", ":"))
        lines.append(text.encode())
    return avro, lines


def _parser(avro: dict[str, Any]) -> LineParser:
    options = line_parse_options(avro)
    assert options is not None
    return LineParser(options, options.explicit_schema)


def _same_as_arrow(parser: LineParser, data: bytes) -> pa.Table | None:
    """The C parser's table for ``data`` (None when it leaves the text to Arrow's reader), held
    to Arrow's reader's table."""
    assert parser._fields is not None and _json_lines is not None
    parsed = _json_lines.parse(data, parser._fields)
    ours = None if parsed is None else parser._table(*parsed)
    theirs = parser.arrow(data)
    if ours is not None:
        assert theirs is not None, "parsed in C, refused by Arrow's reader"
        assert ours.schema.equals(theirs.schema)
        for a, b in zip(ours.columns, theirs.columns, strict=True):
            assert a.combine_chunks().equals(b.combine_chunks())  # neither reads NaN: equality holds
        ours.validate(full=True)
    return ours


def test_the_c_parser_is_built() -> None:
    assert json_lines_arrow._json_lines is not None


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_block())
def test_valid_lines_parse_in_c_as_arrow_reads_them(block: tuple[dict[str, Any], list[bytes]]) -> None:
    avro, lines = block
    parser = _parser(avro)
    table = _same_as_arrow(parser, b"\n".join(lines))
    assert table is not None, "ordinary lines went to Arrow's reader"
    assert table.num_rows == len(lines)


_MUTATIONS = [
    lambda s: s.replace("{", '{"zz_unknown": 1, ', 1),              # a field not in the schema
    lambda s: s.replace("}", ', "zz": 1}', 1),
    lambda s: s.replace(":", ": 1.0, \"dup\":", 1),
    lambda s: s.replace("1", "1.5", 1),                           # a fraction where a long may be
    lambda s: s.replace("1", "1e2", 1),
    lambda s: s.replace("0", "00", 1),                            # not JSON
    lambda s: s.replace("true", "1", 1),
    lambda s: s.replace('"', '"\\ud800', 2)[::1],                 # a lone surrogate
    lambda s: s.replace(": ", ": [1]", 1),
    lambda s: s.replace(":", ':{"a":1},"x":', 1),
    lambda s: s.replace("null", "nul", 1),
    lambda s: s.replace('"', '"\\u0041', 1),                      # an escaped key
    lambda s: s + " ",
    lambda s: s[:-1],
    lambda s: s.replace(",", ",,", 1),
    lambda s: s.replace("9", "99999999999999999999", 1),          # beyond int64
    lambda s: s.replace('"', '"\x01', 2),                         # a raw control character
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_block(), st.data())
def test_whatever_c_parses_arrow_reads_the_same(block: tuple[dict[str, Any], list[bytes]], data: Any) -> None:
    avro, lines = block
    i = data.draw(st.integers(0, len(lines) - 1))
    mutate = data.draw(st.sampled_from(_MUTATIONS))
    lines[i] = mutate(lines[i].decode()).encode()
    _same_as_arrow(_parser(avro), b"\n".join(lines))


@pytest.mark.parametrize(
    "line",
    [
        b'{"s": "caf\xc3\xa9 \\u00e9 \\ud83d\\ude00 \\" \\\\ \\/ \\b\\f\\n\\r\\t"}',
        b'{"s": "\xf0\x9f\x98\x80", "n": -9223372036854775808, "d": 1e400}',
        b'{"d": -0, "b": false}',
        b"{}",
    ],
)
def test_escapes_utf8_and_extremes(line: bytes) -> None:
    avro = {"type": "record", "name": "r", "fields": [
        {"name": "s", "type": ["null", "string"]}, {"name": "n", "type": ["null", "long"]},
        {"name": "d", "type": ["null", "double"]}, {"name": "b", "type": ["null", "boolean"]},
    ]}
    _same_as_arrow(_parser(avro), line)


_digits = st.text("0123456789", min_size=1, max_size=30).map(lambda d: d.lstrip("0") or "0")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.booleans(), _digits, _digits, st.integers(-340, 330)), min_size=1, max_size=5))
def test_long_decimals_round_as_arrow_rounds_them(numbers: list[tuple[bool, str, str, int]]) -> None:
    """Decimal texts with more digits than a double holds, near the ends of its range."""
    avro = {"type": "record", "name": "r", "fields": [{"name": "d", "type": ["null", "double"]}]}
    lines = [
        b'{"d": %s%s.%se%d}' % (b"-" if neg else b"", a.encode(), b.encode(), e) for neg, a, b, e in numbers
    ]
    _same_as_arrow(_parser(avro), b"\n".join(lines))


@pytest.mark.parametrize(
    "bad", [b'{"s": "\xc3"}', b'{"s": "\xed\xa0\x80"}', b'{"s": "\xc0\xaf"}', b'{"s": "\xf4\x90\x80\x80"}']
)
def test_invalid_utf8_is_left_to_arrow(bad: bytes) -> None:
    avro = {"type": "record", "name": "r", "fields": [{"name": "s", "type": ["null", "string"]}]}
    parser = _parser(avro)
    assert parser._fields is not None and _json_lines is not None
    assert _json_lines.parse(bad, parser._fields) is None
