"""Decoding committed files without Spark, and the ``cat`` record stream (offsets, --from-offset, follow)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from kcql.model import StoreFormat
from spark_reader.catalog import DataFile, view_specs
from spark_reader.records import FileDecodeError, read_table
from spark_reader.stream import iter_records, record_offsets
from tests.unit.spark_reader import lenses_data as ld


@pytest.mark.parametrize("fmt", list(StoreFormat))
def test_every_format_decodes_to_the_written_rows(tmp_path: Path, fmt: StoreFormat) -> None:
    p = ld.plan(fmt, "default")
    recs = ld.records(partitions=1, per_partition=4)
    keys = ld.write_with_sink_libs(p, recs, ld.local_put(tmp_path), tmp_path)
    tables = [read_table((tmp_path / k).read_bytes(), fmt) for k in keys]
    rows = [row for t in tables for row in t.to_pylist()]
    if fmt == StoreFormat.TEXT:
        assert [r["value"] for r in rows] == [r.value["name"] for r in recs]
    elif fmt == StoreFormat.BYTES:
        assert len(rows) == len(recs) and all(isinstance(r["value"], bytes) for r in rows)
    elif fmt == StoreFormat.CSV:
        assert [r["_c1"] for r in rows] == [r.value["name"] for r in recs]
    else:
        assert [int(r["id"]) for r in rows] == [r.value["id"] for r in recs]


def test_garbage_names_the_file() -> None:
    with pytest.raises(FileDecodeError, match=r"bkt/x\.avro as AVRO"):
        read_table(b"not avro", StoreFormat.AVRO, name="bkt/x.avro")
    with pytest.raises(FileDecodeError, match="as PARQUET"):
        read_table(b"PAR1\x00", StoreFormat.PARQUET)


def test_record_offsets() -> None:
    f = DataFile("k", 1, "t", 0, first_offset=None, last_offset=9)
    assert record_offsets(f, 3, [{}] * 3, envelope=False) == [7, 8, 9]
    gap = DataFile("k", 1, "t", 0, first_offset=0, last_offset=9)  # compacted: 3 records over 10 offsets
    assert record_offsets(gap, 3, [{}] * 3, envelope=False) == [None, None, 9]
    env = [{"metadata": {"offset": 5}}, {"metadata": {"offset": 12}}]
    assert record_offsets(gap, 2, env, envelope=True) == [5, 12]
    assert record_offsets(f, 3, [{}] * 3, envelope=False, contiguous=False) == [None, None, 9]


def _config(root: Path) -> dict:
    return {"connect.storage": "local", "connect.local.root": str(root)}


def test_cat_stream_is_offset_ordered_per_partition_and_skips_litter(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.AVRO, "values")
    recs = ld.records()
    ld.write_with_sink_libs(p, recs, ld.local_put(tmp_path / "bkt"), tmp_path)
    specs = view_specs(_config(tmp_path), plans=[p])
    out = list(iter_records(specs))
    assert len(out) == len(recs)
    assert sorted((r["partition"], r["value"]["id"]) for r in out) == sorted(
        (r.partition, r.value["id"]) for r in recs
    )
    for part in (0, 1):
        last_offsets = [r["offset"] for r in out if r["partition"] == part and r["offset"] is not None]
        assert last_offsets == sorted(last_offsets)  # PARTITIONBY without envelope: only each file's last
        assert len(last_offsets) == len({r["file"] for r in out if r["partition"] == part})


def test_cat_envelope_offsets_and_from_offset(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.JSON, "kv", envelope=True)
    recs = ld.records()
    ld.write_with_sink_libs(p, recs, ld.local_put(tmp_path / "bkt"), tmp_path)
    specs = view_specs(_config(tmp_path), plans=[p])
    out = list(iter_records(specs, from_offset=5))
    assert sorted((r["partition"], r["offset"]) for r in out) == [
        (pt, o) for pt in (0, 1) for o in range(5, 9)
    ]
    first = next(r for r in out if r["partition"] == 0 and r["offset"] == 5)
    assert first["key"] == "k5" and first["headers"] == {"h": "x1"} and first["value"]["id"] == 5
    assert first["timestamp"] == 1_700_000_000_005


def test_cat_follow_waits_for_new_files(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.PARQUET, "default")
    recs = ld.records(partitions=1, per_partition=12)
    put = ld.local_put(tmp_path / "bkt")
    ld.write_with_sink_libs(p, recs[:4], put, tmp_path, per_file=4)
    specs = view_specs(_config(tmp_path), plans=[p])

    def later() -> None:
        time.sleep(0.5)
        ld.write_with_sink_libs(p, recs[4:], put, tmp_path / "bkt", per_file=4)

    t = threading.Thread(target=later)
    t.start()
    out = list(iter_records(specs, follow=True, poll_interval=0.1, idle_timeout=2.0))
    t.join()
    assert [r["offset"] for r in out] == list(range(12))
    assert [r["value"]["id"] for r in out] == [r.value["id"] for r in recs]


def test_avro_values_arrow_cannot_type_become_text() -> None:
    import io
    import uuid

    import fastavro

    schema = {
        "type": "record",
        "name": "R",
        "fields": [
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "m", "type": ["null", "int", "string"]},
            {"name": "n", "type": "long"},
        ],
    }
    ids = [str(uuid.uuid4()), str(uuid.uuid4())]
    buf = io.BytesIO()
    fastavro.writer(
        buf, fastavro.parse_schema(schema), [{"u": ids[0], "m": 1, "n": 2}, {"u": ids[1], "m": "x", "n": 3}]
    )
    table = read_table(buf.getvalue(), StoreFormat.AVRO)
    assert table.to_pylist() == [{"u": ids[0], "m": "1", "n": 2}, {"u": ids[1], "m": "x", "n": 3}]


def test_json_lines_with_changing_types_and_primitives() -> None:
    table = read_table(b'{"a": 1}\n{"a": "x"}\n"plain"\n', StoreFormat.JSON)
    assert table.to_pylist() == [
        {"a": "1", "value": None},
        {"a": "x", "value": None},
        {"a": None, "value": "plain"},
    ]
    iso = read_table(b'{"t": "2024-01-01 00:00:00"}\n', StoreFormat.JSON)
    assert iso.to_pylist() == [{"t": "2024-01-01 00:00:00"}]  # strings stay strings, as Spark reads them
