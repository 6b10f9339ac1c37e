"""CSV (read back with the csv module), TEXT and BYTES."""

from __future__ import annotations

import base64
import csv
import json
from pathlib import Path

import pytest

from formats import FormatSettings, RecordFormatError, get_format
from formats.base import FormatError
from kcql.model import StoreFormat
from tests.unit.formats.records import append, orders, record, write_rolling


def _csv_rows(path: Path) -> list[list[str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.reader(fh))


@pytest.mark.parametrize("fmt", [StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS])
def test_csv_round_trip(tmp_path: Path, fmt: StoreFormat) -> None:
    paths = write_rolling(tmp_path, FormatSettings(format=fmt), orders(3))
    assert len(paths) == 1 and paths[0].suffix == ".csv"
    rows = _csv_rows(paths[0])
    header = ["id", "name", "price", "created", "day", "note", "address", "tags", "attrs"]
    if fmt is StoreFormat.CSV_WITHHEADERS:
        assert rows.pop(0) == header
    assert len(rows) == 3
    first = dict(zip(header, rows[0], strict=True))
    assert first["name"] == 'ördér-0 ✓, "quoted"'  # comma and quotes survive quoting
    assert first["note"] == "note 0\nsecond line"  # so does a newline
    assert first["price"] == "12.34"
    assert first["created"] == "2024-03-01T12:30:45.123Z"
    assert first["day"] == "2024-03-01"
    assert json.loads(first["address"]) == {"street": "0 Main St", "zip": "12345"}
    assert json.loads(first["attrs"]) == {"k": 0}
    assert dict(zip(header, rows[1], strict=True))["note"] == ""  # null -> empty cell


def test_csv_schemaless_dicts_bytes_and_booleans(tmp_path: Path) -> None:
    recs = [
        record(0, {"a": True, "b": b"\x00\x01", "c": None}),
        record(1, {"a": False, "b": b"", "c": 1.5}),
        record(2, {"x": 1}),  # different keys: new file (NONE)
    ]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.CSV_WITHHEADERS), recs)
    assert [_csv_rows(p) for p in paths] == [
        [["a", "b", "c"], ["true", base64.b64encode(b"\x00\x01").decode(), ""], ["false", "", "1.5"]],
        [["x"], ["1"]],
    ]


def test_csv_schemaless_subset_stays_in_file_under_backward(tmp_path: Path) -> None:
    recs = [record(0, {"a": 1, "b": 2}), record(1, {"a": 3}), record(2, {"c": 4})]
    settings = FormatSettings(format=StoreFormat.CSV, schema_compatibility="BACKWARD")
    paths = write_rolling(tmp_path, settings, recs)
    assert [_csv_rows(p) for p in paths] == [[["1", "2"], ["3", ""]], [["4"]]]


@pytest.mark.parametrize("value", [None, "text", 5, [1]])
def test_csv_needs_a_struct(tmp_path: Path, value: object) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.CSV)).open(tmp_path / "x.csv")
    with pytest.raises(RecordFormatError, match=r"needs a struct value.*offset 4"):
        append(writer, [record(4, value)])
    writer.abort()


def test_text(tmp_path: Path) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.TEXT))
    assert fmt.extension == "text"
    path = tmp_path / "x.text"
    writer = fmt.open(path)
    assert append(writer, [record(0, "héllo, wörld"), record(1, ""), record(2, "tab\there")]) == 3
    with pytest.raises(RecordFormatError, match="only for output of kafka string values") as info:
        append(writer, [record(3, "ok"), record(4, {"a": 1})])
    assert info.value.index == 1
    with pytest.raises(RecordFormatError, match="line break"):
        append(writer, [record(5, "two\nlines")])
    with pytest.raises(RecordFormatError, match="tombstone"):
        append(writer, [record(6, None)])
    assert writer.record_count == 4
    writer.close()
    assert path.read_text(encoding="utf-8") == "héllo, wörld\n\ntab\there\nok\n"


def test_bytes_one_record_per_file(tmp_path: Path) -> None:
    payload = bytes(range(256)) + b"\n\r\x00"
    recs = [record(0, payload), record(1, None), record(2, "strïng"), record(3, bytearray(b"\xff"))]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.BYTES), recs)
    assert [p.suffix for p in paths] == [".bytes"] * 4
    assert [p.read_bytes() for p in paths] == [payload, b"", "strïng".encode(), b"\xff"]


def test_bytes_rejects_structured_values(tmp_path: Path) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.BYTES)).open(tmp_path / "x.bytes")
    with pytest.raises(RecordFormatError, match="byte-array value"):
        append(writer, [record(0, {"a": 1})])
    writer.abort()


@pytest.mark.parametrize("fmt", [StoreFormat.CSV, StoreFormat.TEXT, StoreFormat.BYTES])
def test_uncompressed_only(fmt: StoreFormat) -> None:
    with pytest.raises(FormatError, match="supported: UNCOMPRESSED"):
        get_format(FormatSettings(format=fmt, codec="GZIP"))


def test_csv_nullable_record_schema_keeps_one_file(tmp_path: Path) -> None:
    schema = ["null", {"type": "record", "name": "R", "fields": [{"name": "a", "type": "long"}]}]
    recs = [record(i, {"a": i}, schema=schema) for i in range(3)]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.CSV_WITHHEADERS), recs)
    assert [_csv_rows(p) for p in paths] == [[["a"], ["0"], ["1"], ["2"]]]


def test_csv_uuid_and_time_cells(tmp_path: Path) -> None:
    import uuid
    from datetime import time

    ident = uuid.UUID(int=1)
    paths = write_rolling(
        tmp_path, FormatSettings(format=StoreFormat.CSV), [record(0, {"u": ident, "t": time(1, 2, 3)})]
    )
    assert _csv_rows(paths[0]) == [[str(ident), "01:02:03"]]
