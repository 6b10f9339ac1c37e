"""formats/_avro_flat.c against the numpy decoder and check it replaces (formats/avro_columns.py,
sink/records/avro_values.py).

The numpy versions are held to the per-record path by test_avro_columns.py and
test_avro_values.py, which run the C module where it is built; here the C module must give the
numpy versions' answer on the same bodies, clean or damaged: the same refusals, and the same
Arrow arrays, down to their buffers' sizes (which a file's bytes_written counts).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from formats import avro_columns
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import decode_bodies, decode_columns, decode_columns_py, field_codes, flat_fields
from sink.records import avro_values
from sink.records.avro_values import check_joined, check_joined_py, join_values
from tests.unit.formats.test_avro_columns import _damage, _record, assert_same_batch, encode, flat_cases

_HEADER = b"\x00\x00\x00\x00\x07"


def test_the_c_module_is_built() -> None:
    """setup.py builds it on a machine with a C compiler (this one, and CI's)."""
    assert avro_columns.NATIVE
    assert avro_columns.native() is not None


def _joined(bodies: list[bytes]) -> avro_values.Joined:
    return join_values([_HEADER + body for body in bodies])


def _both(schema: dict[str, Any], bodies: list[bytes]) -> tuple[Any, Any, bool, bool]:
    """The C answers (decoded batch, check) and the numpy ones. The C module reads the values
    joined (``check``/``decode``) and as a list where they lie (``check_values``/``decode_values``,
    what a sink's run uses): both ways must agree before the C answer is compared with numpy's."""
    fields = flat_fields(schema)
    assert fields is not None
    joined = _joined(bodies)
    arrow = avro_to_arrow(schema)
    c = decode_columns(joined.data, joined.starts, joined.ends, fields, arrow, padded=True, header=5)
    listed = decode_bodies(joined.values, fields, arrow, header=5)
    assert (c is None) == (listed is None)
    if c is not None:
        _assert_same_buffers(listed, c)
    native = avro_columns.native()
    c_ok = check_joined(joined, fields)  # the values as a list: check_values
    if native is not None:
        kinds, nulls = field_codes(fields)
        assert native.check(joined.data, joined.starts, joined.ends, 5, kinds, nulls) == c_ok
    py = decode_columns_py(joined.data, joined.starts + 5, joined.ends, fields, arrow, padded=True)
    return c, py, c_ok, check_joined_py(joined, fields)


def _assert_same_buffers(got: pa.RecordBatch, want: pa.RecordBatch) -> None:
    assert_same_batch(got, want)
    for name, a, b in zip(got.schema.names, got.columns, want.columns, strict=True):
        assert a.nbytes == b.nbytes, name
        assert [None if x is None else x.size for x in a.buffers()] == [
            None if x is None else x.size for x in b.buffers()
        ], name


@settings(max_examples=300, deadline=None)
@given(case=flat_cases(max_rows=30))
def test_clean_bodies_decode_as_numpy_does(case: tuple[dict[str, Any], list[dict]]) -> None:
    schema, rows = case
    c, py, c_ok, py_ok = _both(schema, [encode(schema, row) for row in rows])
    assert c is not None and py is not None
    _assert_same_buffers(c, py)
    assert c_ok and py_ok


@settings(max_examples=500, deadline=None)
@given(case=flat_cases(min_rows=1, max_rows=8), data=st.data())
def test_damaged_bodies_get_the_numpy_answer(case: tuple[dict[str, Any], list[dict]], data: Any) -> None:
    schema, rows = case
    bodies = [encode(schema, row) for row in rows]
    index = data.draw(st.integers(0, len(bodies) - 1))
    how, bodies[index] = _damage(data.draw, schema, rows[index], bodies[index])
    c, py, c_ok, py_ok = _both(schema, bodies)
    event(f"{how}: {'refused' if py is None else 'decoded'}")
    assert (c is None) == (py is None), how
    if c is not None:
        _assert_same_buffers(c, py)
    assert c_ok == py_ok == (py is not None), how


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(b"plain ascii, longer than one word of eight", id="ascii"),
        pytest.param("é\U0001f600\u2028\U0010ffff".encode(), id="multi-byte"),
        pytest.param(b"\xed\x9f\xbf\xee\x80\x80", id="around-the-surrogates"),
        pytest.param(b"\xed\xa0\x80", id="surrogate"),
        pytest.param(b"\xe0\x9f\xbf", id="overlong-3"),
        pytest.param(b"\xf0\x8f\xbf\xbf", id="overlong-4"),
        pytest.param(b"\xf4\x90\x80\x80", id="beyond-u10ffff"),
        pytest.param(b"\xc1\xbf", id="overlong-2"),
        pytest.param(b"abcdefg\xc3", id="cut-at-the-end"),
        pytest.param(b"abcdefgh\x80", id="continuation-alone-after-a-word"),
        pytest.param(b"\xf5\x80\x80\x80", id="f5"),
    ],
)
def test_utf8_edges_as_python_decides(text: bytes) -> None:
    """Each text as the last string of the data (the word-at-a-time ASCII test must not read past
    the buffer) and in the middle; valid exactly when Python's strict UTF-8 decoding says so."""
    schema = _record([{"name": "s", "type": "string"}, {"name": "n", "type": "long"}])
    body = encode("long", len(text)) + text + encode("long", 5)
    last = encode("long", len(text)) + text
    only = _record([{"name": "s", "type": "string"}])
    try:
        text.decode("utf-8")
        valid = True
    except UnicodeDecodeError:
        valid = False
    for sch, bodies in ((schema, [body, body]), (only, [last]), (only, [b"\x02a", last])):
        c, py, c_ok, py_ok = _both(sch, bodies)
        assert (c is not None) == (py is not None) == c_ok == py_ok == valid


def test_a_varint_may_not_run_past_its_body_into_the_next() -> None:
    """The C walk stops at a body's end; the numpy one reads on and then refuses: both refuse."""
    schema = _record([{"name": "a", "type": "long"}])
    c, py, c_ok, py_ok = _both(schema, [b"\x80", b"\x01"])  # \x80\x01 would be one varint
    assert c is None and py is None and not c_ok and not py_ok


def test_field_codes() -> None:
    fields = (("a", "boolean", -1), ("b", "int", 0), ("c", "string", 1), ("d", "bytes", -1))
    assert field_codes(fields) == (b"bisy", b"\x00\x01\x02\x00")


def test_the_c_module_refuses_unknown_field_codes() -> None:
    c = avro_columns.native()
    assert c is not None
    starts = ends = np.zeros(0, np.int64)
    with pytest.raises(ValueError, match="not known"):
        c.check(b"", starts, ends, 0, b"x", b"\x00")
    with pytest.raises(ValueError, match="not known"):
        c.decode(b"", starts, ends, 0, b"l", b"\x03")
    with pytest.raises(ValueError, match="one byte per field"):
        c.check(b"", starts, ends, 0, b"ll", b"\x00")
    with pytest.raises(ValueError, match="not known"):
        c.check_values([], 0, b"x", b"\x00")
    with pytest.raises(TypeError, match="value 1 is not bytes"):
        c.check_values([b"\x00", None], 0, b"l", b"\x00")
    with pytest.raises(TypeError, match="a list of bytes"):
        c.decode_values((b"\x00",), 0, b"l", b"\x00")


def test_without_the_c_module_the_numpy_versions_run(monkeypatch: pytest.MonkeyPatch) -> None:
    schema = _record([{"name": "a", "type": "long"}, {"name": "b", "type": ["null", "string"]}])
    bodies = [encode(schema, {"a": i, "b": None if i % 2 else "x"}) for i in range(5)]
    with_c = _both(schema, bodies)
    monkeypatch.setattr(avro_columns, "_native", None)
    without = _both(schema, bodies)
    assert with_c[2] and without[2]
    _assert_same_buffers(with_c[0], without[0])
