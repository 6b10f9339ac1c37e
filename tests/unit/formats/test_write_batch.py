"""ParquetWriter.write_batch: an Avro block appended whole must give the file ``write`` gives, or nothing.

Every test writes the same records twice: once with ``write`` only (the per-record path), once
with some of them as Arrow batches decoded by :func:`formats.avro_columns.decode_columns` (what an
:class:`sink.records.avro_block.AvroBlock` hands the writer). The files are read back with
``pyarrow.parquet``. Wherever ``write_batch`` refuses, it must return False and leave the writer
exactly as it was: same ``record_count``, same ``bytes_written``, same file once closed.
"""

from __future__ import annotations

import io
import json
import math
import struct
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formats.parquet_format as parquet_format
from formats import FormatSettings, get_format
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import decode_columns, flat_fields
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.record import SinkRecord
from tests.unit.formats.records import record
from tests.unit.formats.test_avro_columns import flat_cases

READING: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "namespace": "test",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "station", "type": ["null", "string"], "default": None},
        {"name": "value", "type": ["double", "null"]},
        {"name": "ok", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "n", "type": "int"},
        {"name": "f", "type": ["null", "float"], "default": None},
    ],
}
EVOLVED: dict[str, Any] = {
    **READING,
    "fields": [*READING["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}


def reading(i: int) -> dict[str, Any]:
    return {
        "id": i,
        "station": None if i % 4 == 0 else f"stätion-{i}\U0001f600",
        "value": None if i % 5 == 0 else (math.nan if i % 11 == 0 else i / 7),
        "ok": i % 2 == 0,
        "raw": bytes([i % 256]) * (i % 3),
        "n": -i,
        "f": None if i % 3 == 0 else (-0.0 if i % 7 == 0 else i / 4),
    }


def avro_body(schema: Any, value: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), value)
    return out.getvalue()


class Topic:
    """Records as the AvroConverter makes them, and the same records' bodies for batches.

    Every record's ``value_schema`` is the one writer-schema object (the converter caches it per
    schema id), as is the schema handed to ``write_batch``.
    """

    def __init__(self, schema: Any, values: list[dict[str, Any]]) -> None:
        self.schema = schema
        self.values = values
        self.bodies = [avro_body(schema, v) for v in values]
        parsed = fastavro.parse_schema(schema)
        # the per-record path sees what fastavro reads back (e.g. float32-rounded floats)
        self.records = [
            record(i, fastavro.schemaless_reader(io.BytesIO(b), parsed, None), schema=schema, key=f"k{i}")
            for i, b in enumerate(self.bodies)
        ]

    def batch(self, start: int, stop: int) -> pa.RecordBatch:
        bodies = self.bodies[start:stop]
        lengths = np.array([len(b) for b in bodies], dtype=np.int64)
        ends = np.cumsum(lengths)
        fields = flat_fields(self.schema)
        assert fields is not None
        batch = decode_columns(b"".join(bodies), ends - lengths, ends, fields, avro_to_arrow(self.schema))
        assert batch is not None
        return batch


def parquet(settings: FormatSettings | None = None) -> Any:
    return get_format(settings or FormatSettings(format=StoreFormat.PARQUET))


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return "NaN" if math.isnan(value) else struct.pack("<d", value)  # keeps -0.0 apart from 0.0
    return value


def same_content(a: Path, b: Path) -> None:
    """Same Parquet schema (fields, types, nullability, metadata) and the same rows, in order."""
    ta, tb = pq.read_table(a), pq.read_table(b)
    assert ta.schema.equals(tb.schema, check_metadata=True)
    assert pq.read_metadata(a).num_rows == pq.read_metadata(b).num_rows
    rows_a = [{k: _cell(v) for k, v in row.items()} for row in ta.to_pylist()]
    rows_b = [{k: _cell(v) for k, v in row.items()} for row in tb.to_pylist()]
    assert rows_a == rows_b


def write_only(path: Path, records: list[SinkRecord], cuts: list[int], settings: Any = None) -> Path:
    """The per-record reference: ``write`` calls split at ``cuts`` (the calls the sink would make)."""
    writer = parquet(settings).open(path)
    for start, stop in zip([0, *cuts], [*cuts, len(records)], strict=True):
        if stop > start:
            assert writer.write(records[start:stop]) == stop - start
    writer.close()
    return path


# ---------------------------------------------------------------------------------- accepted


@pytest.mark.parametrize("compatibility", ["NONE", "BACKWARD", "FORWARD", "FULL"])
def test_write_then_batches_give_the_file_write_gives(tmp_path: Path, compatibility: str) -> None:
    topic = Topic(READING, [reading(i) for i in range(400)])
    settings = FormatSettings(format=StoreFormat.PARQUET, schema_compatibility=compatibility)
    cuts = [1, 70, 71, 200, 333]
    expected = write_only(tmp_path / "write.parquet", topic.records, cuts, settings)
    writer = parquet(settings).open(tmp_path / "batch.parquet")
    assert writer.write(topic.records[:1]) == 1  # a schema-given file fixes its schema at its first row
    sizes = []
    for start, stop in zip(cuts, [*cuts[1:], 400], strict=True):
        before = writer.record_count
        assert writer.write_batch(topic.batch(start, stop), READING)
        assert writer.record_count == before + stop - start
        sizes.append(writer.bytes_written)
    writer.close()
    same_content(expected, tmp_path / "batch.parquet")
    assert (tmp_path / "batch.parquet").read_bytes() == expected.read_bytes()
    assert sizes == sorted(sizes) and sizes[-1] > sizes[0]  # flush.size sees the batches


def test_bytes_written_grows_as_with_write(tmp_path: Path) -> None:
    """flush.size decides file boundaries from ``bytes_written``: a batch must count like the rows."""
    topic = Topic(READING, [reading(i) for i in range(300)])
    a = parquet().open(tmp_path / "a.parquet")
    b = parquet().open(tmp_path / "b.parquet")
    a.write(topic.records[:1])
    b.write(topic.records[:1])
    for start, stop in ((1, 100), (100, 164), (164, 300)):  # calls of 64 rows and more convert at once
        a.write(topic.records[start:stop])
        assert b.write_batch(topic.batch(start, stop), READING)
        assert (b.record_count, b.bytes_written) == (a.record_count, a.bytes_written)
    a.close()
    b.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=flat_cases(min_rows=2, max_rows=90), data=st.data())
def test_any_mix_of_write_and_write_batch_gives_the_file_write_gives(tmp_path_factory, case, data) -> None:
    schema, values = case
    topic = Topic(schema, values)
    count = len(values)
    cuts = sorted(set(data.draw(st.lists(st.integers(1, count - 1), max_size=6)))) if count > 1 else []
    as_batch = data.draw(st.lists(st.booleans(), min_size=len(cuts) + 1, max_size=len(cuts) + 1))
    directory = tmp_path_factory.mktemp("mix")
    expected = write_only(directory / "write.parquet", topic.records, cuts)
    writer = parquet().open(directory / "mixed.parquet")
    for use_batch, start, stop in zip(as_batch, [0, *cuts], [*cuts, count], strict=True):
        before = writer.record_count
        if use_batch and start > 0:  # the first call must be write: it fixes the file's schema
            assert writer.write_batch(topic.batch(start, stop), schema)
        else:
            assert writer.write(topic.records[start:stop]) == stop - start
        assert writer.record_count == before + stop - start
    writer.close()
    same_content(expected, directory / "mixed.parquet")
    # stronger than the promise, and true so far: the very same bytes (NaN payloads included)
    assert (directory / "mixed.parquet").read_bytes() == expected.read_bytes()


def test_small_writes_buffered_before_a_batch_stay_in_order(tmp_path: Path) -> None:
    """Calls under 64 rows are buffered unconverted; a batch must not overtake them."""
    topic = Topic(READING, [reading(i) for i in range(40)])
    cuts = [2, 5, 9, 12, 30, 33]
    expected = write_only(tmp_path / "write.parquet", topic.records, cuts)
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(topic.records[:2])
    writer.write(topic.records[2:5])  # buffered (small call)
    assert writer.write_batch(topic.batch(5, 9), READING)
    writer.write(topic.records[9:12])  # buffered again
    assert writer.write_batch(topic.batch(12, 30), READING)
    writer.write(topic.records[30:33])
    assert writer.write_batch(topic.batch(33, 40), READING)
    assert writer.record_count == 40
    writer.close()
    same_content(expected, tmp_path / "batch.parquet")
    assert [r["id"] for r in pq.read_table(tmp_path / "batch.parquet").to_pylist()] == list(range(40))


def test_batches_across_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_format, "_ROW_GROUP_ROWS", 50)
    topic = Topic(READING, [reading(i) for i in range(333)])
    cuts = [1, 80, 81, 260]
    expected = write_only(tmp_path / "write.parquet", topic.records, cuts)
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(topic.records[:1])
    for start, stop in zip(cuts, [*cuts[1:], 333], strict=True):
        assert writer.write_batch(topic.batch(start, stop), READING)
    writer.close()
    same_content(expected, tmp_path / "batch.parquet")
    assert pq.read_metadata(tmp_path / "batch.parquet").num_row_groups > 1


def test_an_equal_schema_object_from_another_lookup_is_the_same_schema(tmp_path: Path) -> None:
    """Records carry one schema object per registry id; an equal copy (another id, a re-fetch) is
    SAME for the per-record path too, so the batch goes in."""
    topic = Topic(READING, [reading(i) for i in range(20)])
    copy = json.loads(json.dumps(READING))
    assert copy is not READING
    expected = write_only(tmp_path / "write.parquet", topic.records, [1])
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(topic.records[:1])
    assert writer.write_batch(topic.batch(1, 20), copy)
    writer.close()
    same_content(expected, tmp_path / "batch.parquet")


# ---------------------------------------------------------------------------------- refused


def assert_refused(writer: Any, batch: pa.RecordBatch, schema: Any) -> None:
    count, size = writer.record_count, writer.bytes_written
    assert writer.write_batch(batch, schema) is False
    assert (writer.record_count, writer.bytes_written) == (count, size)


def test_refused_before_the_schema_is_fixed(tmp_path: Path) -> None:
    topic = Topic(READING, [reading(i) for i in range(10)])
    writer = parquet().open(tmp_path / "batch.parquet")
    assert_refused(writer, topic.batch(0, 10), READING)
    assert writer.record_count == 0
    # the per-record path then writes the same records: the refusal left no trace
    assert writer.write(topic.records) == 10
    writer.close()
    same_content(write_only(tmp_path / "write.parquet", topic.records, []), tmp_path / "batch.parquet")


@pytest.mark.parametrize(
    "envelope",
    [
        EnvelopeFields(key=True, value=True, headers=True, metadata=True),
        EnvelopeFields(key=False, value=True, headers=False, metadata=False),
    ],
    ids=["full-envelope", "value-only-envelope"],
)
def test_refused_with_an_envelope(tmp_path: Path, envelope: EnvelopeFields) -> None:
    topic = Topic(READING, [reading(i) for i in range(10)])
    settings = FormatSettings(format=StoreFormat.PARQUET, envelope=envelope)
    writer = parquet(settings).open(tmp_path / "batch.parquet")
    writer.write(topic.records[:3])
    assert_refused(writer, topic.batch(3, 10), READING)
    writer.write(topic.records[3:])
    writer.close()
    same_content(
        write_only(tmp_path / "write.parquet", topic.records, [3], settings), tmp_path / "batch.parquet"
    )


def test_refused_for_a_schemaless_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file of schemaless JSON values infers its schema. Even an Avro schema equal to the inferred
    one, with the same Arrow schema, is not it: the per-record path rolls to a new file there."""
    monkeypatch.setattr(parquet_format, "_FREEZE_ROWS", 5)
    inferred = {
        "type": "record",
        "name": "Value",
        "fields": [
            {"name": "id", "type": ["null", "long"], "default": None},
            {"name": "name", "type": ["null", "string"], "default": None},
        ],
    }
    topic = Topic(inferred, [{"id": i, "name": f"n{i}"} for i in range(10)])
    texts = [json.dumps(v).encode() for v in topic.values]
    schemaless = [record(i, json.loads(t), raw_value=t) for i, t in enumerate(texts)]
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(schemaless[:6])  # past _FREEZE_ROWS: the inferred schema is fixed
    assert writer.record_count == 6
    assert writer._schema.equals(topic.batch(6, 10).schema)  # only the schema's origin differs
    assert writer.write(topic.records[6:7]) == 0  # per record: a schema-given value starts a new file
    assert_refused(writer, topic.batch(6, 10), inferred)
    assert writer.write(schemaless[6:]) == 4
    writer.close()
    assert pq.read_table(tmp_path / "batch.parquet").to_pylist() == topic.values


@pytest.mark.parametrize("compatibility", ["NONE", "BACKWARD", "FORWARD", "FULL"])
@pytest.mark.parametrize(
    "other",
    [
        {**READING, "name": "Reading2"},
        {**READING, "namespace": "elsewhere"},
        {**READING, "doc": "the same fields, documented"},
        {**READING, "connect.version": 2},
        {**READING, "fields": [{**READING["fields"][0], "doc": "an id"}, *READING["fields"][1:]]},
    ],
    ids=["renamed", "namespace", "doc", "version", "field-doc"],
)
def test_refused_for_another_schema_with_the_same_columns(
    tmp_path: Path, compatibility: str, other: dict[str, Any]
) -> None:
    """Same Arrow schema, another Avro schema: the per-record path rolls (or projects) there, so
    the batch must be refused although its columns fit the file."""
    settings = FormatSettings(format=StoreFormat.PARQUET, schema_compatibility=compatibility)
    first = Topic(READING, [reading(i) for i in range(3)])
    second = Topic(other, [reading(i) for i in range(3, 8)])
    writer = parquet(settings).open(tmp_path / "batch.parquet")
    writer.write(first.records)
    batch = second.batch(0, 5)
    assert batch.schema.equals(writer._schema)
    assert_refused(writer, batch, other)
    assert writer.write(second.records) == 0  # per record: the first of them starts a new file
    writer.close()
    assert [r["id"] for r in pq.read_table(tmp_path / "batch.parquet").to_pylist()] == [0, 1, 2]


@pytest.mark.parametrize("compatibility", ["NONE", "BACKWARD", "FORWARD", "FULL"])
@pytest.mark.parametrize(
    ("file_schema", "batch_schema"),
    [(READING, EVOLVED), (EVOLVED, READING)],
    ids=["newer-batch", "older-batch"],
)
def test_refused_for_another_schema(
    tmp_path: Path, compatibility: str, file_schema: Any, batch_schema: Any
) -> None:
    """Another schema rolls the file (NONE) or projects the rows onto the file's schema (the
    compatibility modes): either way the per-record path must decide, so the batch is refused."""
    settings = FormatSettings(format=StoreFormat.PARQUET, schema_compatibility=compatibility)
    first = Topic(file_schema, [{**reading(i), "note": "n"} for i in range(5)])
    other = Topic(batch_schema, [{**reading(i), "note": "m"} for i in range(5, 12)])
    writer = parquet(settings).open(tmp_path / "batch.parquet")
    writer.write(first.records)
    assert_refused(writer, other.batch(0, 7), batch_schema)
    assert writer.write_batch(first.batch(0, 5), file_schema)  # its own schema still goes in
    writer.close()
    rows = pq.read_table(tmp_path / "batch.parquet").to_pylist()
    assert [r["id"] for r in rows] == [0, 1, 2, 3, 4] * 2


def test_refused_for_a_file_of_non_record_values(tmp_path: Path) -> None:
    """Values of a primitive schema are stored in one ``value`` column (wrapped)."""
    topic = Topic(READING, [reading(i) for i in range(4)])
    strings = [record(i, f"s{i}", schema="string") for i in range(3)]
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(strings)
    assert_refused(writer, topic.batch(0, 4), READING)
    assert_refused(writer, topic.batch(0, 4), "string")
    writer.close()
    assert pq.read_table(tmp_path / "batch.parquet").to_pylist() == [{"value": f"s{i}"} for i in range(3)]


def test_a_refusal_keeps_buffered_small_writes_buffered_and_in_order(tmp_path: Path) -> None:
    topic = Topic(READING, [reading(i) for i in range(12)])
    newer = Topic(EVOLVED, [{**reading(i), "note": None} for i in range(3)])
    writer = parquet().open(tmp_path / "batch.parquet")
    writer.write(topic.records[:2])
    writer.write(topic.records[2:4])  # buffered
    assert_refused(writer, newer.batch(0, 3), EVOLVED)
    assert writer.write_batch(topic.batch(4, 12), READING)
    writer.close()
    same_content(write_only(tmp_path / "write.parquet", topic.records, [2, 4]), tmp_path / "batch.parquet")
