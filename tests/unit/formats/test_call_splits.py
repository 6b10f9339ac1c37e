"""AVRO and PARQUET files do not depend on how records were split into ``write`` calls.

Consumer batch sizes, the runtime's fast path and replays after a crash all hand a file the same
records in different calls. The files (where they roll, their schema, their rows) and which
records are rejected must be the same whatever the split, and a rejection must name a record of
the call it is raised from. Files are read back with pyarrow and fastavro, not our readers.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from formats import FormatSettings, RecordFormatError, get_format
from kcql.model import StoreFormat
from sink.records.record import SinkRecord
from tests.unit.formats.records import append

FORMATS = [StoreFormat.PARQUET, StoreFormat.AVRO]



def record(offset: int, text: bytes) -> SinkRecord:
    """A record as the schemaless JsonConverter makes it (parsed value + the raw text)."""
    return SinkRecord("t", 0, offset, 1000 + offset, None, json.loads(text), (), None, None, text)


def read(path: Path, fmt: StoreFormat) -> tuple[list[str], list[dict[str, Any]]]:
    if fmt is StoreFormat.PARQUET:
        table = pq.read_table(path)
        return table.column_names, table.to_pylist()
    with path.open("rb") as handle:
        reader = fastavro.reader(handle)
        rows = list(reader)
        return [f["name"] for f in reader.writer_schema["fields"]], rows


def write_split(
    directory: Path, fmt: StoreFormat, records: Sequence[SinkRecord], sizes: Sequence[int]
) -> tuple[list[tuple[list[str], list[dict[str, Any]]]], list[int]]:
    """Write ``records`` as the sink core does, in calls of ``sizes`` (cycled): a new file where
    ``write`` stops early, a rejected record skipped. Returns the files read back and the
    offsets of the rejected records."""
    directory.mkdir(parents=True, exist_ok=True)
    file_format = get_format(FormatSettings(fmt))
    paths: list[Path] = []
    rejected: list[int] = []

    def new_writer() -> Any:
        paths.append(directory / f"{len(paths)}.{file_format.extension}")
        return file_format.open(paths[-1])

    writer = new_writer()
    position, call = 0, 0
    while position < len(records):
        size = sizes[call % len(sizes)]
        call += 1
        chunk = records[position : position + size]
        while chunk:
            try:
                written = append(writer, chunk)
            except RecordFormatError as exc:
                assert exc.record is chunk[exc.index], "the error names a record of another call"
                rejected.append(exc.record.offset)
                chunk = chunk[exc.index + 1 :]
                continue
            if written < len(chunk):
                assert written or writer.record_count, "an empty writer refused a record"
                writer.close()
                writer = new_writer()
            chunk = chunk[written:]
        position += size
    writer.close()
    return [read(p, fmt) for p in paths], rejected


def texts(rows: Sequence[dict[str, Any]]) -> list[bytes]:
    return [json.dumps(r).encode() for r in rows]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.value)
def test_the_schema_freezes_at_the_same_row_whatever_the_calls(tmp_path: Path, fmt: StoreFormat) -> None:
    """A new field after the 1000th row rolls the file: one big call used to widen the schema."""
    rows = [{"id": i, "name": f"n{i}"} for i in range(1500)]
    for i in range(1050, 1500):
        rows[i]["extra"] = i
    records = [record(i, t) for i, t in enumerate(texts(rows))]
    one_call = write_split(tmp_path / "one", fmt, records, [1500])
    sliced = write_split(tmp_path / "sliced", fmt, records, [1, 2, 4, 8, 16, 32, 64, 128, 256, 512])
    assert one_call == sliced
    files, rejected = one_call
    assert rejected == []
    assert [columns for columns, _ in files] == [["id", "name"], ["id", "name", "extra"]]
    assert [len(file_rows) for _, file_rows in files] == [1050, 450]


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.value)
@pytest.mark.parametrize("at", [3, 999, 1000, 1200])
@pytest.mark.parametrize("escape", [b"\\ud800", b"\\udc00x", b"\xed\xa0\x80"], ids=["high", "low", "utf8"])
def test_a_lone_surrogate_is_rejected_in_its_own_call(
    tmp_path: Path, fmt: StoreFormat, at: int, escape: bytes
) -> None:
    """Before and after the freeze, in small and large calls: only that record is rejected."""
    values = texts([{"id": i, "name": f"n{i}"} for i in range(1300)])
    values[at] = b'{"id":%d,"name":"a' % at + escape + b'"}'
    records = [record(i, t) for i, t in enumerate(values)]
    expected = None
    for sizes in ([1300], [7], [100, 1, 3], [1000, 300]):
        outcome = write_split(tmp_path / f"{len(sizes)}-{sizes[0]}", fmt, records, sizes)
        files, rejected = outcome
        assert rejected == [at]
        assert [r["id"] for _, file_rows in files for r in file_rows] == [i for i in range(1300) if i != at]
        assert expected is None or outcome == expected
        expected = outcome


@pytest.mark.parametrize("fmt", FORMATS, ids=lambda f: f.value)
@pytest.mark.parametrize("big", [2**53 + 1, -(2**60) - 3, 2**63 - 1])
@pytest.mark.parametrize("first", ["float", "int"])
def test_an_integer_beyond_2_53_in_a_double_column_is_rounded(
    tmp_path: Path, fmt: StoreFormat, big: int, first: str
) -> None:
    """Whether the column became a double before or after the integer arrived, in any call."""
    rows: list[dict[str, Any]] = [{"id": i, "x": float(i) + 0.5} for i in range(1300)]
    rows[0 if first == "int" else 1100]["x"] = big
    records = [record(i, t) for i, t in enumerate(texts(rows))]
    expected = None
    for sizes in ([1300], [3], [1000, 5, 100]):
        outcome = write_split(tmp_path / f"{first}-{len(sizes)}-{sizes[0]}", fmt, records, sizes)
        files, rejected = outcome
        assert rejected == []
        values = [r["x"] for _, file_rows in files for r in file_rows]
        assert len(values) == 1300
        assert values[0 if first == "int" else 1100] == float(big)
        assert all(type(v) is float for v in values)
        assert expected is None or outcome == expected
        expected = outcome


_scalars = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=4),
    st.booleans(),
    st.none(),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    rows=st.lists(
        # (min_size=1: a Parquet file of only {} rows has no column to hold them, a separate issue)
        st.dictionaries(st.sampled_from(["a", "b", "c"]), _scalars, min_size=1, max_size=3),
        min_size=1,
        max_size=40,
    ),
    sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    fmt=st.sampled_from(FORMATS),
)
def test_any_split_gives_the_files_of_one_call(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch,
    rows: list[dict[str, Any]], sizes: list[int], fmt: StoreFormat,
) -> None:
    """Arbitrary flat schemaless records (types that merge, roll or fail) with a freeze after 10 rows."""
    import formats._rows as rows_module

    monkeypatch.setattr(rows_module, "FREEZE_ROWS", 10)
    records = [record(i, t) for i, t in enumerate(texts(rows))]
    one_call = write_split(tmp_path_factory.mktemp("one"), fmt, records, [len(records)])
    sliced = write_split(tmp_path_factory.mktemp("sliced"), fmt, records, sizes)
    assert json.dumps(one_call, default=repr) == json.dumps(sliced, default=repr)
