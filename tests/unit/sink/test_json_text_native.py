"""sink/records/_json_text.c against the Python versions it replaces (sink/records/json_text.py).

test_json_text.py holds whichever version is in use to ``json.loads``; here the C join and check
must give the Python versions' answers on the same values: framed or not, valid or damaged.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from sink.records import json_text
from tests.unit.sink.test_json_text import _mutated, _objects, _values, framed, loads_verdict


def test_the_c_module_is_built() -> None:
    """setup.py builds it on a machine with a C compiler (this one, and CI's)."""
    assert json_text.NATIVE


@settings(max_examples=500, deadline=None)
@given(st.lists(_values, max_size=10))
def test_the_join_is_the_python_join(values: list[bytes | None]) -> None:
    assert json_text._joined(values) == json_text._joined_py(values)


# 300 runs (up to 1,800 values, mostly damaged): the C and Python checks share the edge cases
# pinned below; 800 runs took 17 s of the suite and proved nothing more
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_objects, _mutated()), min_size=1, max_size=6))
def test_the_check_is_the_python_check(values: list[bytes]) -> None:
    values = [v for v in values if framed(v)]
    if not values:
        return
    data = b"\n".join(values)
    want = json_text.valid_lines_py(values, data)
    event("valid" if want else "refused")
    assert json_text.valid_text(data, len(values)) is want


def test_a_line_count_that_differs_is_refused() -> None:
    data = b'{"a":1}\n{"b":2}'
    assert json_text.valid_text(data, 2)
    assert not json_text.valid_text(data, 1)
    assert not json_text.valid_text(data, 3)
    assert not json_text.valid_text(b'{"a":1}\n', 1)  # an empty last line is no document


@pytest.mark.parametrize("width", [0, 1, 7, 8, 9, 15, 16, 17, 31, 40])
def test_a_string_left_open_at_a_line_end_is_refused_whatever_follows(width: int) -> None:
    """The C check reads strings 16 bytes at a time, past the end of a line (not of the data):
    a string still open at its line's end must be refused even when the next line would close it."""
    open_line = b'{"a":"' + b"x" * width + b"}"
    values = [open_line, b'{"b":"' + b"y" * width + b'"}', b'{"c":1}']
    data = b"\n".join(values)
    assert not json_text.valid_text(data, 3)
    assert json_text.valid_lines_py(values, data) is False
    closed = [b'{"a":"' + b"x" * width + b'"}', *values[1:]]
    assert json_text.valid_text(b"\n".join(closed), 3)


def test_nesting_deeper_than_the_c_check_goes_is_left_to_the_per_record_path() -> None:
    """The C check stops at 256 levels (json.loads takes about a thousand): refused, a deeper
    value only costs speed, the converter decides it."""
    inside = b'{"a":' + b"[" * 255 + b"]" * 255 + b"}"
    deeper = b'{"a":' + b"[" * 256 + b"]" * 256 + b"}"
    assert json_text.valid_text(inside, 1)
    assert loads_verdict(deeper) == "accepted"
    assert not json_text.valid_text(deeper, 1)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(b'{"a":"\\ud83d\\ude00"}', id="surrogate-pair"),
        pytest.param(b'{"a":"\\ud83d"}', id="high-alone"),
        pytest.param(b'{"a":"\\ude00\\ud83d"}', id="pair-reversed"),
        pytest.param(b'{"a":"\\ud83d\\u0041"}', id="high-then-not-low"),
        pytest.param(b'{"a":"12345678\\"9"}', id="escaped-quote-after-a-word"),
        pytest.param(b'{"a":"1234567\x1f"}', id="control-at-a-word-edge"),
        pytest.param('{"a":"12345678€"}'.encode(), id="multi-byte-after-a-word"),
        pytest.param(b'{"a":-0.0e+1,"b":[true,false,null],"c":{}}', id="all-the-kinds"),
        pytest.param(b'{"a":1} ', id="space-after"),
        pytest.param(b'{ "a" :\t1 }', id="spaces-and-tabs"),
    ],
)
def test_edges_as_the_python_check_decides(value: bytes) -> None:
    assert json_text.valid_text(value, 1) is json_text.valid_lines_py([value], value)
