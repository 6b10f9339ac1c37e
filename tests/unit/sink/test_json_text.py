"""sink/records/json_text.py: which runs of values get the joined JSON text, and which are valid.

:func:`json_runs` must cut a run exactly where values stop being framed one-line objects (each
``{`` ... ``}``, no line break, no carriage return, not a tombstone), whatever the values look
like once joined; :func:`valid_lines` must accept exactly what ``json.loads`` (the JSON converter)
accepts among framed values, except where it is documented to be stricter and the per-record
path then decides exactly (NaN/Infinity, lone surrogates, UTF-8 that only ``surrogatepass``
decodes). Both are checked case by case and as properties against independent oracles.
"""

from __future__ import annotations

import json
from itertools import groupby, pairwise
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st

from sink.records.json_text import json_runs, valid_lines

GOOD = b'{"id":1,"name":"a"}'


def framed(value: bytes | None) -> bool:
    """The per-value rule, written independently of json_runs' newline counting."""
    return (
        value is not None
        and value.startswith(b"{")
        and value.endswith(b"}")
        and b"\n" not in value
        and b"\r" not in value
    )


def reference_runs(values: list[bytes | None]) -> list[tuple[int, int, bytes | None]]:
    """Maximal runs of framed / not framed values, framed runs with their joined text."""
    runs, start = [], 0
    for is_framed, group in groupby(values, key=framed):
        stop = start + len(list(group))
        part = values[start:stop]
        runs.append((start, stop, b"\n".join(part) if is_framed else None))  # type: ignore[arg-type]
        start = stop
    return runs


def check(values: list[bytes]) -> bool:
    return valid_lines(values, b"\n".join(values))


def _has_surrogate(doc: Any) -> bool:
    if isinstance(doc, str):
        return any("\ud800" <= ch <= "\udfff" for ch in doc)
    if isinstance(doc, dict):
        return any(_has_surrogate(k) or _has_surrogate(v) for k, v in doc.items())
    if isinstance(doc, list):
        return any(map(_has_surrogate, doc))
    return False


def loads_verdict(value: bytes) -> str:
    """What the JSON converter (``json.loads``) makes of ``value``: ``rejected``, ``accepted``, or
    ``lenient`` (accepted, but only by Python's extensions that valid_lines documents it refuses:
    NaN/Infinity, lone surrogates escaped or ``surrogatepass``-decoded)."""
    constants: list[str] = []
    try:
        doc = json.loads(value, parse_constant=lambda c: constants.append(c) or float(c))
    except (ValueError, RecursionError):  # what the converter turns into a ConversionError
        return "rejected"
    if constants or _has_surrogate(doc):
        return "lenient"
    return "accepted"


# ------------------------------------------------------------------------------------- json_runs


def test_no_values_no_runs() -> None:
    assert json_runs([]) == []


def test_a_run_of_framed_values_is_one_run_with_the_joined_text() -> None:
    values: list[bytes | None] = [
        GOOD, b"{}", '{"s":"\\n \\r \\u2028 é","n":[1,{"x":null}]}'.encode(), b'{ "spaced" : true }',
    ]
    assert json_runs(values) == [(0, 4, b"\n".join(values))]  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(None, id="tombstone"),
        pytest.param(b'{"a":\n1}', id="newline-inside"),
        pytest.param(b'{"a":1}\n', id="trailing-newline"),
        pytest.param(b'\n{"a":1}', id="leading-newline"),
        pytest.param(b'{"a":1,\r"b":2}', id="carriage-return-inside"),
        pytest.param(b'{"a":1}\r', id="trailing-carriage-return"),
        pytest.param(b'{"a":1}\r\n', id="crlf"),
        pytest.param(b"[1,2]", id="array"),
        pytest.param(b"1", id="scalar-number"),
        pytest.param(b'"text"', id="scalar-string"),
        pytest.param(b"null", id="json-null"),
        pytest.param(b"", id="empty"),
        pytest.param(b'{"a":1} ', id="trailing-space"),
        pytest.param(b' {"a":1}', id="leading-space"),
        pytest.param(b"\xef\xbb\xbf{}", id="utf8-bom"),
        pytest.param(b"{", id="open-brace"),
        pytest.param(b"}", id="close-brace"),
        pytest.param(b"}{", id="braces-reversed"),
        pytest.param(b"not json", id="text"),
    ],
)
@pytest.mark.parametrize("where", ["alone", "first", "middle", "last", "twice"])
def test_a_value_that_is_not_framed_cuts_the_run_around_it(odd: bytes | None, where: str) -> None:
    values: list[bytes | None] = {
        "alone": [odd],
        "first": [odd, GOOD, GOOD],
        "middle": [GOOD, odd, GOOD],
        "last": [GOOD, GOOD, odd],
        "twice": [GOOD, odd, odd, GOOD, odd],
    }[where]
    expected = {
        "alone": [(0, 1, None)],
        "first": [(0, 1, None), (1, 3, GOOD + b"\n" + GOOD)],
        "middle": [(0, 1, GOOD), (1, 2, None), (2, 3, GOOD)],
        "last": [(0, 2, GOOD + b"\n" + GOOD), (2, 3, None)],
        "twice": [(0, 1, GOOD), (1, 3, None), (3, 4, GOOD), (4, 5, None)],
    }[where]
    assert json_runs(values) == expected


@pytest.mark.parametrize(
    "values",
    [
        pytest.param([b"{", b"}"], id="braces-split-in-two"),
        pytest.param([b"{}", b"", b"{}"], id="an-empty-value-between"),
        pytest.param([b"{}", b"}\n{", b"{}"], id="a-separator-inside-a-value"),
        pytest.param([b'{"a":1}\n{"b":2}'], id="two-lines-in-one-value"),
        pytest.param([b'{"a":1}\n{', b'"b":2}'], id="a-line-across-two-values"),
        pytest.param([b'{"a":1}', b'{"b":2}\n', b"{}"], id="trailing-newline-mid-run"),
        pytest.param([b"{}\r", b"{}"], id="cr-before-the-separator"),
        pytest.param([b"{}", b"\r{}"], id="cr-after-the-separator"),
        pytest.param([b"{\n", b"}"], id="newline-then-close"),
        pytest.param([b"{}", None, b"{}"], id="tombstone-between"),
    ],
)
def test_values_that_only_look_right_once_joined_are_cut_as_each_value_is(values: list[bytes | None]) -> None:
    assert json_runs(values) == reference_runs(values)


_interesting = st.sampled_from(
    [b"{", b"}", b"\n", b"\r", b" ", b"}\n{", b'"', b"[", b"]", b"\xff", b"\xc3\xa9", b"{}", b'{"a":1}', b""]
)
_fragments = st.lists(st.one_of(_interesting, st.binary(max_size=3)), max_size=5).map(b"".join)
_framed = st.builds(lambda inner: b"{" + inner + b"}", _fragments)
_clean = st.builds(lambda inner: b"{" + inner.replace(b"\n", b"").replace(b"\r", b"") + b"}", _fragments)
# clean one-line values are drawn most often, so that runs of several framed values are common
_values = st.one_of(_clean, _clean, _clean, _framed, st.none(), _fragments)


@settings(max_examples=500, deadline=None)
@given(st.lists(_values, max_size=10))
def test_json_runs_are_the_maximal_runs_of_framed_values(values: list[bytes | None]) -> None:
    runs = json_runs(values)
    assert runs == reference_runs(values)
    # the runs tile the values, alternate, and a framed run's text is its values joined
    bounds = [0, *(stop for _, stop, _ in runs)] if values else [0]
    assert [start for start, _, _ in runs] == bounds[:-1] and bounds[-1] == len(values)
    for (_, _, a), (_, _, b) in pairwise(runs):
        assert (a is None) != (b is None)
    for start, stop, text in runs:
        if text is not None:
            assert text.split(b"\n") == values[start:stop]
    event("one run" if len(runs) == 1 else "several runs")


# ----------------------------------------------------------------------------------- valid_lines


@pytest.mark.parametrize(
    "value",
    [
        GOOD,
        b"{}",
        b'{ "spaced" : [ 1 , 2 ] }',
        b'{"nested":{"a":[{"b":null}],"t":true,"f":false}}',
        b'{"n":-0,"e":1E5,"f":-1.5e-3,"big":1e400,"int":123456789012345678901234567890}',
        b'{"dup":1,"dup":2}',
        b'{"esc":"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e9"}',
        b'{"pair":"\\ud83d\\ude00"}',
        '{"raw":"é€😀 \u2028 \x7f"}'.encode(),
        b'{"tab":1,\t"after":2}',
    ],
)
def test_valid_json_objects_are_valid_lines(value: bytes) -> None:
    assert loads_verdict(value) == "accepted"
    assert check([value]) is True
    assert check([GOOD, value, GOOD]) is True


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b'{"a": }', id="missing-value"),
        pytest.param(b"{not json}", id="bare-word"),
        pytest.param(b'{"a":1,}', id="trailing-comma"),
        pytest.param(b"{'a':1}", id="single-quotes"),
        pytest.param(b'{"a":01}', id="leading-zero"),
        pytest.param(b'{"a":1.}', id="bare-dot"),
        pytest.param(b'{"a":+1}', id="plus-sign"),
        pytest.param(b'{"a":"\\x"}', id="bad-escape"),
        pytest.param(b'{"a":"\\u12"}', id="short-unicode-escape"),
        pytest.param(b'{"a":"\x01"}', id="control-character-in-string"),
        pytest.param(b'{"a":"\t"}', id="raw-tab-in-string"),
        pytest.param(b'{"a":1,\x0c"b":2}', id="form-feed-as-whitespace"),
        pytest.param(b'{"a":1\xc2\xa0}', id="nbsp-as-whitespace"),
        pytest.param(b'{"a":True}', id="python-true"),
        pytest.param(b"{1:2}", id="number-key"),
        pytest.param(b'{"a":1}{"b":2}', id="two-documents"),
        pytest.param(b'{"a":1},{"b":2}', id="two-documents-comma"),
        pytest.param(b'{"a":1} {"b":2}', id="two-documents-space"),
        pytest.param(b'{"a":[1}', id="unbalanced"),
        pytest.param(b'{"a":"}', id="unterminated-string"),
        pytest.param(b'{"a":"\xff"}', id="invalid-utf8-ff"),
        pytest.param(b'{"a":"\xc3"}', id="invalid-utf8-truncated"),
        pytest.param(b'{"a":"\xc0\xaf"}', id="invalid-utf8-overlong"),
        pytest.param(b'{"a":"\xf4\x90\x80\x80"}', id="invalid-utf8-beyond-u10ffff"),
        pytest.param(b'{"\xff":1}', id="invalid-utf8-in-a-key"),
        pytest.param(b'{"a":1}\x00}', id="nul-after-a-document"),
    ],
)
def test_what_json_loads_rejects_is_never_valid(value: bytes) -> None:
    assert loads_verdict(value) == "rejected"
    assert check([value]) is False
    assert check([GOOD, value]) is False
    assert check([value, GOOD]) is False
    assert check([GOOD, value, GOOD]) is False


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b'{"a":NaN}', id="nan"),
        pytest.param(b'{"a":-NaN}', id="minus-nan"),
        pytest.param(b'{"a":Infinity}', id="infinity"),
        pytest.param(b'{"a":-Infinity}', id="minus-infinity"),
        pytest.param(b'{"a":"\\ud800"}', id="lone-high-surrogate-escape"),
        pytest.param(b'{"a":"\\udc00x"}', id="lone-low-surrogate-escape"),
        pytest.param(b'{"a":"\xed\xa0\x80"}', id="utf8-encoded-surrogate"),
        pytest.param(b'{"a":"\xed\xa0\xbd\xed\xb8\x80"}', id="cesu8-surrogate-pair"),
    ],
)
def test_python_only_extensions_are_documented_as_left_to_the_per_record_path(value: bytes) -> None:
    """json.loads takes these, or rejects them (-NaN); valid_lines refuses them all, and the
    per-record path (the converter itself) then decides each exactly."""
    assert loads_verdict(value) in ("lenient", "rejected")
    assert check([value]) is False


def test_an_integer_json_loads_refuses_is_not_valid() -> None:
    """Python refuses to convert integers longer than sys.get_int_max_str_digits() (4300) digits,
    so the JSON converter rejects such a value; valid_lines must not pass it (it would be written
    through by the JSON format where the per-record path reports a record error)."""
    limit = 4300
    at_limit = b'{"a":' + b"1" * limit + b"}"
    beyond = b'{"a":' + b"1" * (limit + 1) + b"}"
    assert loads_verdict(at_limit) == "accepted" and check([at_limit]) is True
    assert loads_verdict(beyond) == "rejected"
    assert check([beyond]) is False


def test_a_value_nested_too_deep_for_json_loads_is_not_valid_and_raises_nothing() -> None:
    """json.loads raises RecursionError (the converter reports a record error); valid_lines must
    answer False, not raise: an exception that is not a RecordError stops the whole task."""
    deep = b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}"
    assert loads_verdict(deep) == "rejected"
    assert check([GOOD, deep]) is False


def test_a_value_hiding_two_documents_or_half_of_one_is_caught_across_the_join() -> None:
    # each half alone is invalid, joined they would be one valid object
    assert check([b'{"a":"}', b'{"}']) is False
    # a value with two documents beside one that has none cannot balance the count
    assert check([b'{"a":1},{"b":2}', b'{"c":3}']) is False
    # the slices of the joined array line up with the values only when each value is one document
    assert check([b'{"a":"},{"}', b'{"b":1}']) is True
    assert check([b'{"a":"}', b'{"}', b'{"b":1}']) is False


def test_invalid_utf8_is_found_in_any_value_of_the_run() -> None:
    values = [GOOD, '{"é":"€"}'.encode(), b'{"a":"\xe2\x82"}', GOOD]
    assert check(values) is False
    assert check(values[:2]) is True
    assert check(values[3:]) is True


# ------------------------------------------------------------------------------ as properties

_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=6),
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=8,
)
_objects = st.builds(
    lambda doc, ascii_only, compact: json.dumps(
        doc, ensure_ascii=ascii_only, separators=(",", ":") if compact else (", ", ": ")
    ).encode(),
    st.dictionaries(st.text(max_size=5), _json_values, max_size=4),
    st.booleans(),
    st.booleans(),
)
_snippets = st.sampled_from(
    [
        b'"', b"\\", b"\\u", b"\\ud800", b"\\udc00", b"\\ud83d\\ude00", b"NaN", b"-Infinity", b"-", b"0",
        b"01", b".", b"e", b"E+", b",", b":", b"{", b"}", b"[", b"]", b" ", b"\t", b"\x00", b"\x1f", b"\x7f",
        b"\x0c", b"\xff", b"\xc3", b"\xc3\xa9", b"\xed\xa0\x80", b"\xe2\x82\xac", b"true", b"null", b"}{",
        b"},{", b'"x"', b'"k":1', b"1e999",
    ]
)


@st.composite
def _mutated(draw: st.DrawFn) -> bytes:
    """A valid object with a few interior bytes replaced, inserted or deleted (kept framed)."""
    value = draw(_objects)
    for _ in range(draw(st.integers(0, 3))):
        inner = value[1:-1]
        at = draw(st.integers(0, len(inner)))
        cut = draw(st.integers(0, min(3, len(inner) - at)))
        snippet = draw(st.one_of(_snippets, st.binary(max_size=2)))
        value = b"{" + inner[:at] + snippet + inner[at + cut :] + b"}"
    return value.replace(b"\n", b" ").replace(b"\r", b" ")


# 600 examples: the mutations cover every snippet class many times over; 1,500 took 10 s and found
# nothing 600 do not (the @example cases below always run)
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_mutated())
@example(b'{"a":1e999}')
@example(b'{"a":"\\ud83d\\ude00"}')
def test_valid_lines_agrees_with_json_loads_on_any_framed_value(value: bytes) -> None:
    assume(framed(value))
    verdict = loads_verdict(value)
    event(verdict)
    ok = check([value])
    if verdict == "rejected":
        assert ok is False, "valid_lines accepted a value json.loads rejects"
    elif verdict == "accepted":
        assert ok is True, "valid_lines refused a value json.loads accepts (not a documented case)"
    else:
        assert ok is False, "NaN/Infinity/lone surrogates are documented as left to the per-record path"


# 250 runs of up to 6 values: each value is also checked on its own above (600 examples)
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_objects, _mutated()), min_size=1, max_size=6))
def test_a_run_is_valid_exactly_when_every_value_is(values: list[bytes]) -> None:
    values = [v for v in values if framed(v)]
    assume(values)
    expected = all(loads_verdict(v) == "accepted" for v in values)
    event("valid run" if expected else "invalid run")
    assert check(values) is expected


# strings rich in the characters that make a comma look like a separator between objects
_tricky_text = st.text(alphabet='{},"ab', max_size=8)


@st.composite
def _resplit(draw: st.DrawFn) -> tuple[list[bytes], list[bytes]]:
    """Valid objects joined by commas, then cut again at some ``},{`` commas, in strings or not."""
    docs = draw(
        st.lists(
            st.dictionaries(st.sampled_from(["a", "b", "},{"]), _tricky_text, min_size=1, max_size=2),
            min_size=1, max_size=4,
        )
    )
    objects = [json.dumps(d, separators=(",", ":")).encode() for d in docs]
    text = b",".join(objects)
    cuts = [i for i in range(1, len(text) - 1) if text[i] == ord(",") and text[i - 1 : i + 2] == b"},{"]
    chosen = sorted(draw(st.sets(st.sampled_from(cuts)))) if cuts else []
    pieces, start = [], 0
    for cut in chosen:
        pieces.append(text[start:cut])
        start = cut + 1
    pieces.append(text[start:])
    return objects, pieces


@settings(max_examples=500, deadline=None)
@given(_resplit())
def test_values_cut_from_one_joined_array_are_valid_only_when_cut_between_documents(
    case: tuple[list[bytes], list[bytes]],
) -> None:
    objects, pieces = case
    expected = all(loads_verdict(p) == "accepted" for p in pieces)
    event("cut between documents" if pieces == objects else "cut elsewhere")
    assert check(pieces) is expected
    if pieces == objects:
        assert expected
