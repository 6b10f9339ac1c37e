"""PARQUET: flat columns of mostly distinct values (text or numbers) are written plain, the rest
dictionary-encoded; the values read back (pyarrow) are the same either way."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from formats import FormatSettings
from formats.parquet_format import _dictionary_columns
from kcql.model import StoreFormat
from tests.unit.formats.sinking import builders, messages, sink
from tests.unit.formats.test_cheap_json_lines import dumps

PARQUET = FormatSettings(format=StoreFormat.PARQUET)


def _dictionary_encoded(path: Path) -> dict[str, bool]:
    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(0)
    return {
        group.column(i).path_in_schema: group.column(i).dictionary_page_offset is not None
        for i in range(group.num_columns)
    }


def test_distinct_values_are_plain_repeated_values_keep_their_dictionary(tmp_path: Path) -> None:
    from sink.records.converters import JsonConverter, StringConverter

    rows = [
        {"id": i, "country": ["DE", "FR", "UK"][i % 3], "pad": f"{i * 2654435761 % 2**32:08x}-{i}",
         "few": None if i % 2 else "x", "amount": i / 4, "level": i % 5}
        for i in range(3000)
    ]
    _, cheap = builders(lambda: JsonConverter(False), StringConverter)
    outcome = sink(tmp_path, PARQUET, cheap, messages([dumps(r) for r in rows]), poll_sizes=[700])
    (path,) = sorted(tmp_path.glob("*.parquet"))
    assert _dictionary_encoded(path) == {
        "id": False, "country": True, "pad": False, "few": True, "amount": False, "level": True,
    }
    assert outcome.files[0]["rows"][:2] == [
        {"id": 0, "country": "DE", "pad": "00000000-0", "few": "x", "amount": ("float", "0.0"), "level": 0},
        {"id": 1, "country": "FR", "pad": "9e3779b1-1", "few": None, "amount": ("float", "0.25"), "level": 1},
    ]
    assert pq.read_table(path).to_pylist() == rows


def test_the_decision() -> None:
    few = pa.table({"a": pa.array(["x", "y"] * 500), "n": pa.array([i % 10 for i in range(1000)])})
    assert _dictionary_columns(few) is True  # Arrow's default: every column
    text = pa.array([str(i) for i in range(1000)])
    many = pa.table({"a": text, "n": pa.array([i % 7 for i in range(1000)])})
    assert _dictionary_columns(many) == ["n"]
    numbers = pa.table({
        "id": pa.array(range(1000)), "x": pa.array([i / 3 for i in range(1000)]),
        "b": pa.array([True] * 1000),
        "t": pa.array([i % 3 for i in range(1000)], pa.timestamp("ms")), "a": pa.array(["x", "y"] * 500),
    })
    assert _dictionary_columns(numbers) == ["b", "t", "a"]
    only = pa.table({"a": pa.array([str(i) for i in range(1000)])})
    assert _dictionary_columns(only) is False
    small = pa.table({"a": pa.array([str(i) for i in range(100)])})  # too few rows to judge
    assert _dictionary_columns(small) is True
    nested = pa.table({"a": pa.array([str(i) for i in range(1000)]), "s": pa.array([{"x": 1}] * 1000)})
    assert _dictionary_columns(nested) is True
