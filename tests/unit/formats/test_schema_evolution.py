"""Schema changes: which records go to which file, per schema.compatibility, read back independently."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest

from formats import FormatSettings
from formats.schema_evolution import Decision, SchemaEvolution, can_read
from kcql.model import StoreFormat
from sink.records.record import SinkRecord
from tests.unit.formats.records import record, write_rolling

V1 = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"}],
}
V2_ADDED = {
    "type": "record",
    "name": "User",
    "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}],
}
V3_REMOVED = {"type": "record", "name": "User", "fields": [{"name": "id", "type": "long"}]}
V4_CHANGED = {
    "type": "record",
    "name": "User",
    "fields": [{"name": "id", "type": "string"}, {"name": "name", "type": "string"}],
}


def _stream() -> list[SinkRecord]:
    # each record carries its own copy of the schema: equal schemas must compare equal, not by identity
    def rec(offset: int, schema: dict[str, Any], value: dict[str, Any]) -> SinkRecord:
        return record(offset, value, schema=json.loads(json.dumps(schema)))

    return [
        rec(0, V1, {"id": 0, "name": "a"}),
        rec(1, V1, {"id": 1, "name": "b"}),
        rec(2, V2_ADDED, {"id": 2, "name": "c", "email": "c@x"}),  # field added (newer)
        rec(3, V1, {"id": 3, "name": "d"}),  # older again (a v1 producer still running)
        rec(4, V2_ADDED, {"id": 4, "name": "e", "email": None}),
        rec(5, V3_REMOVED, {"id": 5}),  # field removed
        rec(6, V4_CHANGED, {"id": "six", "name": "f"}),  # type changed
    ]


EXPECTED = {
    "NONE": [[0, 1], [2], [3], [4], [5], [6]],
    # older records are projected onto the newer file schema; newer, removed or changed roll
    "BACKWARD": [[0, 1], [2, 3, 4], [5], [6]],
    "FULL": [[0, 1], [2, 3, 4], [5], [6]],
    # newer records are projected onto the older file schema (Confluent drops their new fields)
    "FORWARD": [[0, 1, 2, 3, 4], [5], [6]],
}


_OFFSET_BY_NAME = {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 6}


def _csv_id(text: str) -> Any:
    return int(text) if text.isdigit() else text


def _ids_avro(path: Path) -> list[Any]:
    with path.open("rb") as fh:
        return list(fastavro.reader(fh))


@pytest.mark.parametrize("mode", list(EXPECTED))
@pytest.mark.parametrize("fmt", [StoreFormat.AVRO, StoreFormat.PARQUET, StoreFormat.CSV_WITHHEADERS])
def test_expected_files(tmp_path: Path, mode: str, fmt: StoreFormat) -> None:
    paths = write_rolling(tmp_path, FormatSettings(format=fmt, schema_compatibility=mode), _stream(), batch=3)
    if fmt is StoreFormat.AVRO:
        files = [_ids_avro(p) for p in paths]
    elif fmt is StoreFormat.PARQUET:
        files = [pq.read_table(p).to_pylist() for p in paths]
    else:
        with_headers = []
        for p in paths:
            with p.open(newline="", encoding="utf-8") as fh:
                with_headers.append(list(csv.DictReader(fh)))
        files = [
            [{**r, "id": int(r["id"]) if r["id"].isdigit() else r["id"]} for r in f] for f in with_headers
        ]
    offsets = [
        [{"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 6}.get(r.get("name"), 5) for r in f] for f in files
    ]
    assert offsets == EXPECTED[mode]
    if mode == "BACKWARD":
        projected = files[1]
        assert projected[1]["id"] == 3
        assert projected[1]["email"] in (None, "")  # the older record got the default (CSV: empty)
        assert projected[0]["email"] == "c@x"
    if mode == "FORWARD":
        assert all("email" not in r for r in files[0])  # the older file schema has no email column
    assert files[-1][0]["id"] == "six"


def test_json_text_and_bytes_never_roll(tmp_path: Path) -> None:
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.JSON), _stream())
    assert len(paths) == 1
    assert len(paths[0].read_text().splitlines()) == 7


def test_versions_decide_direction_when_present() -> None:
    old = {**V2_ADDED, "connect.version": 1}
    new = {**V1, "connect.version": 2}  # a newer version that removed a field with a default...
    evo = SchemaEvolution("BACKWARD")
    assert evo.decide(old) is Decision.SAME
    assert evo.decide(new) is Decision.ROLL  # ...is newer: BACKWARD rolls forward
    evo = SchemaEvolution("BACKWARD")
    evo.decide(new)
    assert evo.decide(old) is Decision.PROJECT  # older version, readable by the file's schema


def test_decisions_are_cached_per_schema_object() -> None:
    evo = SchemaEvolution("NONE")
    evo.decide(V1)
    other = json.loads(json.dumps(V2_ADDED))
    assert evo.decide(other) is Decision.ROLL
    assert evo._cache[id(other)][1] is Decision.ROLL


def _enum(*symbols: str) -> dict[str, Any]:
    return {"type": "enum", "name": "E", "symbols": list(symbols)}


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        (V2_ADDED, V1, True),  # added field with a default
        (V1, V2_ADDED, True),  # extra writer field is skipped
        (V1, V3_REMOVED, False),  # name has no default
        (V4_CHANGED, V1, False),  # long -> string is not a promotion
        ({"type": "array", "items": "double"}, {"type": "array", "items": "int"}, True),
        (["null", "long"], "int", True),
        ("int", ["null", "int"], False),
        (
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            {"type": "enum", "name": "E", "symbols": ["A"]},
            True,
        ),
        (
            {"type": "enum", "name": "E", "symbols": ["A"]},
            {"type": "enum", "name": "E", "symbols": ["A", "B"]},
            False,
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 2},
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            True,
        ),
        (
            {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 3},
            {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2},
            False,
        ),
    ],
)
def test_can_read(reader: Any, writer: Any, ok: bool) -> None:
    assert can_read(reader, writer) is ok
