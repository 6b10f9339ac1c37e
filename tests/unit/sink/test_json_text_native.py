"""sink/records/_json_text.c against the Python versions it replaces (sink/records/json_text.py),
and STOREAS JSON checking its lines ahead on the helper thread with it.

test_json_text.py holds whichever version is in use to ``json.loads``; here the C join and check
must give the Python versions' answers on the same values: framed or not, valid or damaged.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from formats import FormatSettings, get_format
from kcql.errors import RecordError
from kcql.model import StoreFormat
from sink.records import json_text
from sink.records.intake import BatchBuilder
from tests.unit.formats.sinking import messages
from tests.unit.sink.test_json_text import _mutated, _objects, _values, framed, loads_verdict

JSON = FormatSettings(format=StoreFormat.JSON)


def test_the_c_module_is_built() -> None:
    """setup.py builds it on a machine with a C compiler (this one, and CI's)."""
    assert json_text.NATIVE


@settings(max_examples=500, deadline=None)
@given(st.lists(_values, max_size=10))
def test_the_join_is_the_python_join(values: list[bytes | None]) -> None:
    assert json_text._joined(values) == json_text._joined_py(values)


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(_objects, _mutated()), min_size=1, max_size=6))
def test_the_check_is_the_python_check(values: list[bytes]) -> None:
    values = [v for v in values if framed(v)]
    if not values:
        return
    data = b"\n".join(values)
    want = json_text.valid_lines_py(values, data)
    event("valid" if want else "refused")
    assert json_text.valid_text(data, len(values)) is want
    assert json_text.valid_text(data, len(values), release=True) is want


def test_a_line_count_that_differs_is_refused() -> None:
    data = b'{"a":1}\n{"b":2}'
    assert json_text.valid_text(data, 2)
    assert not json_text.valid_text(data, 1)
    assert not json_text.valid_text(data, 3)
    assert not json_text.valid_text(b'{"a":1}\n', 1)  # an empty last line is no document


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


# ------------------------------------------------------------------- STOREAS JSON, checked ahead


def _builder(executor: ThreadPoolExecutor | None) -> BatchBuilder:
    from sink.records.converters import ByteArrayConverter, JsonConverter, RecordConverter

    return BatchBuilder(RecordConverter(ByteArrayConverter(), JsonConverter(False)), executor=executor)


def test_json_checks_its_lines_ahead_on_the_helper_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[str] = []
    check = json_text.valid_text

    def spy(data: bytes, count: int, *, release: bool = False) -> bool:
        threads.append(threading.current_thread().name)
        return check(data, count, release=release)

    monkeypatch.setattr(json_text, "valid_text", spy)
    values: list[bytes | None] = [b'{"id":%d,"name":"n%d"}' % (i, i) for i in range(50)]
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        (batch,) = _builder(executor).build("t", 0, messages(values))
        writer = get_format(JSON).open(tmp_path / "out.json")
        assert writer.prefetch(batch)
        assert writer.append(batch) == len(values)
        writer.close()
    assert threads == ["ahead_0"]  # checked once, there
    assert (tmp_path / "out.json").read_bytes() == b"\n".join(values) + b"\n"  # type: ignore[arg-type]


def test_a_line_the_check_ahead_refuses_goes_through_the_per_record_path(tmp_path: Path) -> None:
    values: list[bytes | None] = [b'{"id":1}', b'{"id":2,}', b'{"id":3}']  # the second is no JSON
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        (batch,) = _builder(executor).build("t", 0, messages(values))
        writer = get_format(JSON).open(tmp_path / "out.json")
        assert writer.prefetch(batch)
        with pytest.raises(RecordError) as caught:
            writer.append(batch)
        writer.close()
    assert getattr(caught.value, "index", None) == 1
    assert (tmp_path / "out.json").read_bytes() == b'{"id":1}\n'  # the records before it


def test_no_check_ahead_without_a_helper_thread_or_the_c_module(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values: list[bytes | None] = [b'{"id":1}', b'{"id":2}']
    (alone,) = _builder(None).build("t", 0, messages(values))
    assert not get_format(JSON).open(tmp_path / "a.json").prefetch(alone)
    monkeypatch.setattr(json_text, "NATIVE", False)
    with ThreadPoolExecutor(max_workers=1) as executor:
        (batch,) = _builder(executor).build("t", 0, messages(values))
        assert not get_format(JSON).open(tmp_path / "b.json").prefetch(batch)
