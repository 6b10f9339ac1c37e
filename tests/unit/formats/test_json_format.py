"""JSON lines: read back with gzip + json, never with our own code."""

from __future__ import annotations

import base64
import gzip
import json
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from formats import FormatSettings, RecordFormatError, extension_for, get_format
from formats.base import FormatError
from formats.json_values import dumps
from kcql.model import EnvelopeFields, StoreFormat
from tests.unit.formats.records import CREATED_MS, DAY_DAYS, append, order, orders, record


def _write(tmp_path: Path, records, **settings) -> tuple[Path, int]:
    fmt = get_format(FormatSettings(format=StoreFormat.JSON, **settings))
    path = tmp_path / f"out.{fmt.extension}"
    writer = fmt.open(path)
    n = append(writer, records)
    assert writer.record_count == n
    size = writer.bytes_written
    writer.close()
    assert writer.bytes_written == path.stat().st_size
    if settings.get("codec", "UNCOMPRESSED") == "UNCOMPRESSED":
        assert size == path.stat().st_size
    return path, n


def _lines(path: Path) -> list[str]:
    data = path.read_bytes()
    if path.suffix == ".gz":
        data = gzip.decompress(data)
    text = data.decode("utf-8")
    assert text.endswith("\n")
    return text[:-1].split("\n")


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
def test_values_only_round_trip(tmp_path: Path, codec: str) -> None:
    recs = orders(5)
    path, n = _write(tmp_path, recs, codec=codec)
    assert n == 5
    assert path.name == ("out.gz" if codec == "GZIP" else "out.json")
    rows = [json.loads(line, parse_float=Decimal) for line in _lines(path)]
    assert len(rows) == 5
    assert rows[0]["price"] == Decimal("12.34")  # a number, not a string
    assert isinstance(json.loads(_lines(path)[0])["price"], float)
    assert rows[0]["created"] == CREATED_MS
    assert rows[0]["day"] == DAY_DAYS
    assert rows[0]["name"] == 'ördér-0 ✓, "quoted"'
    assert rows[0]["note"] == "note 0\nsecond line"
    assert rows[1]["note"] is None
    assert rows[0]["address"] == {"street": "0 Main St", "zip": "12345"}
    assert rows[2]["tags"] == ["a", "b"]
    assert "key" not in rows[0]  # without the envelope only the value is written (Lenses)


def test_gzip_level_and_streaming_bytes(tmp_path: Path) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.JSON, codec="GZIP", level=9))
    path = tmp_path / "x.gz"
    writer = fmt.open(path)
    for i in range(0, 2000, 100):
        assert append(writer, [record(j, {"i": j, "pad": "x" * 50}) for j in range(i, i + 100)]) == 100
    writer.close()
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        assert [json.loads(line)["i"] for line in fh] == list(range(2000))


def test_raw_value_is_written_through(tmp_path: Path) -> None:
    raw = b'{"b": 1,   "a": 2.50}\n'  # spacing and key order kept exactly: no re-encode
    multi = b'{"x":\n 1}'
    recs = [
        record(0, {"b": 1, "a": 2.5}, raw_value=raw),
        record(1, {"x": 1}, raw_value=multi),
        record(2, None),
    ]
    path, _ = _write(tmp_path, recs)
    assert _lines(path) == ['{"b": 1,   "a": 2.50}', '{"x":1}', "null"]


def test_bytes_value_without_envelope_is_rejected_after_the_prefix(tmp_path: Path) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.JSON))
    path = tmp_path / "x.json"
    writer = fmt.open(path)
    with pytest.raises(RecordFormatError, match="Cannot currently write byte array as json") as info:
        append(writer, [record(7, {"a": 1}), record(8, b"\x00\x01")])
    assert info.value.index == 1
    assert "offset 8" in str(info.value)
    assert writer.record_count == 1
    writer.close()
    assert _lines(path) == ['{"a":1}']


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
def test_envelope(tmp_path: Path, codec: str) -> None:
    recs = [
        record(
            0,
            order(0),
            key={"id": 1},
            headers=(("trace-id", "t1"), ("n", 5), ("trace-id", "t2"), ("b", b"\x01")),
        ),
        record(1, None, key=b"\x00\xffk", timestamp=None),  # tombstone, byte key, no timestamp
        record(2, {"a": 1}, key=None, raw_value=b'{"a": 1}'),
    ]
    path, n = _write(tmp_path, recs, codec=codec, envelope=EnvelopeFields())
    assert n == 3
    rows = [json.loads(line, parse_float=Decimal) for line in _lines(path)]
    assert rows[0]["key"] == {"id": 1}
    assert rows[0]["value"]["price"] == Decimal("12.34")
    assert rows[0]["headers"] == {"trace-id": ["t1", "t2"], "n": 5, "b": base64.b64encode(b"\x01").decode()}
    assert rows[0]["metadata"] == {"timestamp": CREATED_MS, "topic": "orders", "partition": 0, "offset": 0}
    assert rows[1]["value"] is None
    assert base64.b64decode(rows[1]["key"]) == b"\x00\xffk"
    assert rows[1]["keyIsArray"] is True
    assert "timestamp" not in rows[1]["metadata"]
    assert rows[2] == {
        "key": None,
        "value": {"a": 1},
        "headers": {},
        "metadata": {"timestamp": CREATED_MS, "topic": "orders", "partition": 0, "offset": 2},
    }


def test_envelope_fields_subset_and_bytes_value(tmp_path: Path) -> None:
    fields = EnvelopeFields(key=False, headers=False, metadata=True)
    path, _ = _write(tmp_path, [record(3, b"\x00raw")], envelope=fields)
    row = json.loads(_lines(path)[0])
    assert set(row) == {"value", "valueIsArray", "metadata"}
    assert base64.b64decode(row["value"]) == b"\x00raw"


def test_unsupported_value_names_the_record(tmp_path: Path) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.JSON))
    writer = fmt.open(tmp_path / "x.json")
    with pytest.raises(RecordFormatError, match="offset 4"):
        append(writer, [record(4, {"x": object()})])
    writer.abort()


def test_extensions_and_codec_validation() -> None:
    assert extension_for(StoreFormat.JSON) == "json"
    assert extension_for(StoreFormat.JSON, "gzip") == "gz"
    assert get_format(FormatSettings(format=StoreFormat.JSON, codec="GZIP")).extension == "gz"
    with pytest.raises(FormatError, match="supported: UNCOMPRESSED, GZIP"):
        get_format(FormatSettings(format=StoreFormat.JSON, codec="SNAPPY"))
    with pytest.raises(FormatError, match="out of range"):
        get_format(FormatSettings(format=StoreFormat.JSON, codec="GZIP", level=12))


_leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.decimals(allow_nan=False, allow_infinity=False)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
_values = st.recursive(
    _leaves, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4)
)


def _numbers_as_decimals(value: object) -> object:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, int | Decimal):
        return Decimal(value)
    if isinstance(value, dict):
        return {k: _numbers_as_decimals(v) for k, v in value.items()}
    return [_numbers_as_decimals(v) for v in value]


@given(_values)
def test_dumps_is_one_line_of_json_with_decimals_as_exact_numbers(value: object) -> None:
    text = dumps(value)
    assert "\n" not in text and "\r" not in text
    parsed = json.loads(text, parse_float=Decimal, parse_int=Decimal)
    assert parsed == _numbers_as_decimals(value)
