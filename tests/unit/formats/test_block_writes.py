"""Blocks written by the formats (write_lines / write_batch) give the files the per-record path gives.

Each test writes the same records twice, once record by record (``write``) and once with the
block call wherever the writer accepts it, and compares what independent readers (pyarrow,
gzip + the json module) see. Wherever a block is refused, nothing may have been written.
"""

from __future__ import annotations

import gzip
import io
import json
import math
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
from formats import FormatError, FormatSettings, RecordFormatError, get_format
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import decode_columns, flat_fields
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.record import SinkRecord

# ---------------------------------------------------------------------------------------- helpers


def json_record(offset: int, text: bytes) -> SinkRecord:
    """A record as the schemaless JsonConverter makes it (parsed value + the raw text)."""
    return SinkRecord("t", 0, offset, 1000 + offset, None, json.loads(text), (), None, None, text)


def avro_record(offset: int, value: dict[str, Any], schema: Any) -> SinkRecord:
    return SinkRecord("t", 0, offset, 1000 + offset, None, value, (), None, schema, None)


def same_rows(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Row equality where NaN equals NaN."""

    def norm(v: Any) -> Any:
        return "NaN" if isinstance(v, float) and math.isnan(v) else v

    return [{k: norm(v) for k, v in r.items()} for r in a] == [{k: norm(v) for k, v in r.items()} for r in b]


def write_parquet(
    directory: Path, records: list[SinkRecord], block_from: int, block: Any = None
) -> tuple[list[pa.Table | str], int, list[int]]:
    """Write ``records`` into rolling Parquet files as the sink core does (a new file where
    ``write`` stops early): ``records[:block_from]`` in one ``write`` call, then chunks of up to 50,
    each tried with the block call first when ``block`` is given (``write`` when refused or when
    ``block`` is None, so both runs make the same sequence of calls). Returns the files' tables,
    how many records went in as blocks, and the offsets of records ``write`` rejected."""
    fmt = get_format(FormatSettings(format=StoreFormat.PARQUET))
    paths = [directory / "0.parquet"]
    writer = fmt.open(paths[-1])
    taken = 0
    index = 0
    skipped: list[int] = []
    files: list[pa.Table | str] = []
    while index < len(records):
        end = block_from if index < block_from else min(index + 50, len(records))
        chunk = records[index:end]
        if block is not None and index >= block_from:
            before = writer.record_count
            if block(writer, chunk):
                assert writer.record_count == before + len(chunk)
                taken += len(chunk)
                index = end
                continue
            assert writer.record_count == before  # a refused block writes nothing
        try:
            written = writer.write(chunk)
        except RecordFormatError as exc:  # the core skips it (errors.tolerance=all): so do we
            skipped.append(chunk[exc.index].offset)
            index += exc.index + 1
            continue
        index += written
        if written < len(chunk):  # the next record starts a new file
            files.append(finish(writer, paths[-1]))
            paths.append(directory / f"{len(paths)}.parquet")
            writer = fmt.open(paths[-1])
    files.append(finish(writer, paths[-1]))
    return files, taken, skipped


def finish(writer: Any, path: Path) -> pa.Table | str:
    """The file's table, or ``"discarded"`` when the writer fails the file at close (the core then
    replays its records: e.g. a JSON integer beyond 2**53 accepted into a double column)."""
    try:
        writer.close()
    except FormatError:
        return "discarded"
    return pq.read_table(path)


def lines_block(writer: Any, chunk: list[SinkRecord]) -> bool:
    return writer.write_lines(b"\n".join(r.raw_value for r in chunk), len(chunk))


# ------------------------------------------------------------------------------- JSON lines → JSON


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
def test_json_file_from_blocks_is_byte_identical(tmp_path: Path, codec: str) -> None:
    texts = [json.dumps({"id": i, "s": "é\u2028" * (i % 3)}, ensure_ascii=False).encode() for i in range(120)]
    records = [json_record(i, t) for i, t in enumerate(texts)]
    fmt = get_format(FormatSettings(format=StoreFormat.JSON, codec=codec))
    per_record, blocks = tmp_path / "a", tmp_path / "b"
    w = fmt.open(per_record)
    w.write(records)
    w.close()
    w = fmt.open(blocks)
    w.write(records[:7])
    assert w.write_lines(b"\n".join(texts[7:60]), 53) and w.write_lines(b"\n".join(texts[60:]), 60)
    assert w.record_count == 120
    w.close()
    assert per_record.read_bytes() == blocks.read_bytes()
    raw = gzip.decompress(blocks.read_bytes()) if codec == "GZIP" else blocks.read_bytes()
    assert [json.loads(line) for line in raw.splitlines()] == [json.loads(t) for t in texts]


def test_json_with_envelope_refuses_blocks(tmp_path: Path) -> None:
    envelope = EnvelopeFields(key=True, value=True, headers=True, metadata=True)
    w = get_format(FormatSettings(format=StoreFormat.JSON, envelope=envelope)).open(tmp_path / "e")
    assert not w.write_lines(b'{"a":1}', 1) and w.record_count == 0
    w.abort()


# ----------------------------------------------------------------------------- JSON lines → PARQUET

_names = st.sampled_from(["id", "name", "amount", "ok", "note", "ü"])
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=2**63, max_value=2**64),  # no Avro long: per-record path decides
    st.floats(allow_nan=True, allow_infinity=False),
    st.text(max_size=8),
)
_objects = st.dictionaries(_names, _scalars, max_size=5)
_base = {"id": 1, "name": "a", "amount": 1.5, "ok": True}


@pytest.fixture
def freeze_after_20(monkeypatch: pytest.MonkeyPatch) -> None:
    """Parquet fixes a schemaless file's schema after 1,000 rows; 20 keeps the examples small."""
    monkeypatch.setattr(parquet_format, "_FREEZE_ROWS", 20)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(later=st.lists(_objects, max_size=120), int_amounts=st.booleans())
def test_parquet_from_json_blocks_matches_per_record(
    tmp_path_factory, freeze_after_20, later, int_amounts
) -> None:
    first = [{**_base, "id": i, "amount": (i if int_amounts else i + 0.5)} for i in range(20)]
    tail = [{**_base, "id": -i, "amount": (i if int_amounts else i + 0.5)} for i in range(60)]
    texts = [json.dumps(v, separators=(",", ":"), ensure_ascii=False).encode() for v in first + later + tail]
    records = [json_record(i, t) for i, t in enumerate(texts)]
    a, _, a_skipped = write_parquet(tmp_path_factory.mktemp("a"), records, 20)
    b, taken, b_skipped = write_parquet(tmp_path_factory.mktemp("b"), records, 20, lines_block)
    assert a_skipped == b_skipped
    assert [getattr(t, "schema", t) for t in a] == [getattr(t, "schema", t) for t in b]  # same files
    for x, y in zip(a, b, strict=True):
        assert x == y if isinstance(x, str) else same_rows(x.to_pylist(), y.to_pylist())
    if not later:
        assert taken == 60  # nothing odd: every record after the first 20 went in as blocks


@pytest.mark.parametrize(
    "odd",
    [
        b'{"id":1,"name":"\\ud800","amount":1.5,"ok":true}',  # lone surrogate: Arrow rejects, Python keeps
        b'{"id":1,"name":"\xff","amount":1.5,"ok":true}',  # invalid UTF-8
        b'{"id":1,"name":"a","amount":1.5,"ok":true,"extra":1}',  # a new field: the per-record path rolls
        b'{"id":1.5,"name":"a","amount":1.5,"ok":true}',  # a double where the file has a long
        b'{"id":1,"name":"a","amount":1.5,"ok":1}',  # a number where the file has a boolean
        b'{"id":1,"id":2,"name":"a","amount":1.5,"ok":true}',  # a repeated key
        b'{"id":1,"name":"a","amount":1.5,"ok":true}{"id":2}',  # two documents on one line
    ],
)
def test_parquet_refuses_json_blocks_it_cannot_write_exactly(tmp_path: Path, odd: bytes) -> None:
    good = b'{"id":1,"name":"a","amount":1.5,"ok":true}'
    w = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "x.parquet")
    assert not w.write_lines(good, 1)  # schema not fixed yet
    w.write([json_record(i, good) for i in range(1000)])
    assert w.write_lines(good, 1) and w.record_count == 1001
    assert not w.write_lines(b"\n".join([good, odd, good]), 3)
    assert w.record_count == 1001
    w.close()
    assert pq.read_table(tmp_path / "x.parquet").num_rows == 1001


def test_parquet_json_blocks_need_a_flat_inferred_schema(tmp_path: Path) -> None:
    nested = b'{"id":1,"inner":{"x":1}}'
    w = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "n.parquet")
    w.write([json_record(i, nested) for i in range(1000)])
    assert not w.write_lines(nested, 1)
    w.close()
    always_null = b'{"id":1,"note":null}'
    w = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "z.parquet")
    w.write([json_record(i, always_null) for i in range(1000)])
    assert not w.write_lines(b'{"id":1,"note":"text"}', 1)  # per record: a new file (null -> string)
    w.close()


# ------------------------------------------------------------------------------- Avro → PARQUET

_AVRO_TYPES = ["boolean", "int", "long", "float", "double", "string", "bytes"]


@st.composite
def flat_schema_and_rows(draw: st.DrawFn) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    count = draw(st.integers(min_value=1, max_value=5))
    fields, makers = [], {}
    for i in range(count):
        kind = draw(st.sampled_from(_AVRO_TYPES))
        nullable = draw(st.sampled_from([None, "first", "last"]))
        ftype: Any = kind if nullable is None else (["null", kind] if nullable == "first" else [kind, "null"])
        fields.append({"name": f"f{i}", "type": ftype})
        value = {
            "boolean": st.booleans(),
            "int": st.integers(min_value=-(2**31), max_value=2**31 - 1),
            "long": st.integers(min_value=-(2**63), max_value=2**63 - 1),
            "float": st.floats(width=32, allow_nan=True),
            "double": st.floats(allow_nan=True),
            "string": st.text(max_size=6),
            "bytes": st.binary(max_size=6),
        }[kind]
        makers[f"f{i}"] = value if nullable is None else st.one_of(st.none(), value)
    rows = draw(st.lists(st.fixed_dictionaries(makers), min_size=1, max_size=40))
    return {"type": "record", "name": "R", "fields": fields}, rows


def bodies_of(schema: dict[str, Any], rows: list[dict[str, Any]]) -> list[bytes]:
    parsed = fastavro.parse_schema(schema)
    out = []
    for row in rows:
        buf = io.BytesIO()
        fastavro.schemaless_writer(buf, parsed, row)
        out.append(b"\x00\x00\x00\x00\x01" + buf.getvalue())
    return out


def columns_of(values: list[bytes], schema: dict[str, Any]) -> pa.RecordBatch | None:
    lengths = np.array([len(v) for v in values], dtype=np.int64)
    ends = np.cumsum(lengths)
    fields = flat_fields(schema)
    assert fields is not None
    return decode_columns(b"".join(values), ends - lengths + 5, ends, fields, avro_to_arrow(schema))


def reference(values: list[bytes], schema: dict[str, Any]) -> pa.RecordBatch:
    """The per-record path: fastavro per body, then RecordBatch.from_pylist."""
    parsed = fastavro.parse_schema(schema)
    rows = [fastavro.schemaless_reader(io.BytesIO(v[5:]), parsed, None) for v in values]
    return pa.RecordBatch.from_pylist(rows, schema=avro_to_arrow(schema))


@settings(max_examples=150, deadline=None)
@given(flat_schema_and_rows())
def test_avro_columns_decode_as_fastavro_does(case) -> None:
    schema, rows = case
    values = bodies_of(schema, rows)
    got = columns_of(values, schema)
    assert got is not None
    assert same_rows(got.to_pylist(), reference(values, schema).to_pylist())
    assert got.schema.equals(avro_to_arrow(schema))


@settings(max_examples=150, deadline=None)
@given(flat_schema_and_rows(), st.data())
def test_avro_columns_never_accept_what_fastavro_reads_differently(case, data) -> None:
    schema, rows = case
    values = bodies_of(schema, rows)
    index = data.draw(st.integers(0, len(values) - 1))
    body = bytearray(values[index])
    how = data.draw(st.sampled_from(["truncate", "append", "flip"]))
    if how == "truncate" and len(body) > 5:
        del body[-1]
    elif how == "append":
        body += b"\x02"
    elif len(body) > 5:
        at = data.draw(st.integers(5, len(body) - 1))
        body[at] = data.draw(st.integers(0, 255))
    values[index] = bytes(body)
    got = columns_of(values, schema)
    if got is None:
        return
    # accepted: fastavro must read exactly these rows from exactly these bytes (and use every byte)
    parsed = fastavro.parse_schema(schema)
    for value in values:
        stream = io.BytesIO(value[5:])
        fastavro.schemaless_reader(stream, parsed, None)
        assert stream.read() == b""
    assert same_rows(got.to_pylist(), reference(values, schema).to_pylist())


@pytest.mark.parametrize(
    "ftype",
    [
        {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]},
        {"type": "array", "items": "int"},
        {"type": "map", "values": "int"},
        {"type": "enum", "name": "E", "symbols": ["A"]},
        {"type": "fixed", "name": "F", "size": 2},
        {"type": "long", "logicalType": "timestamp-millis"},
        ["null", "int", "string"],
        ["int", "string"],
    ],
)
def test_flat_fields_rejects_anything_but_primitives(ftype: Any) -> None:
    assert flat_fields({"type": "record", "name": "R", "fields": [{"name": "a", "type": ftype}]}) is None


@pytest.mark.parametrize("bad", [b"\x04", b"\x02\xff\xff", b"\x02\x01\x02\xff"])
def test_avro_columns_refuse_bad_union_branches_and_utf8(bad: bytes) -> None:
    schema = {"type": "record", "name": "R", "fields": [{"name": "s", "type": ["null", "string"]}]}
    assert columns_of([b"\x00\x00\x00\x00\x01" + bad], schema) is None


ORDER = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": "double"},
    ],
}


def test_parquet_from_avro_batches_matches_per_record(tmp_path: Path) -> None:
    rows = [{"id": i, "name": None if i % 7 == 0 else f"n{i}", "amount": i / 3} for i in range(400)]
    records = [avro_record(i, dict(r), ORDER) for i, r in enumerate(rows)]
    values = bodies_of(ORDER, rows)

    def batch_block(writer: Any, chunk: list[SinkRecord]) -> bool:
        start = chunk[0].offset
        batch = columns_of(values[start : start + len(chunk)], ORDER)
        return writer.write_batch(batch, ORDER)

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a, _, _ = write_parquet(tmp_path / "a", records, 10)
    b, taken, _ = write_parquet(tmp_path / "b", records, 10, batch_block)
    assert taken == 390
    assert len(a) == len(b) == 1 and a[0].equals(b[0])  # type: ignore[union-attr]


def test_parquet_refuses_avro_batches_for_other_schemas_envelopes_and_inferred_files(tmp_path: Path) -> None:
    rows = [{"id": 1, "name": "a", "amount": 1.0}]
    batch = columns_of(bodies_of(ORDER, rows), ORDER)
    evolved = {
        **ORDER,
        "fields": [*ORDER["fields"], {"name": "x", "type": ["null", "long"], "default": None}],
    }
    w = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "a.parquet")
    assert not w.write_batch(batch, ORDER)  # nothing written yet: schema not fixed
    w.write([avro_record(0, dict(rows[0]), ORDER)])
    assert w.write_batch(batch, ORDER)
    assert not w.write_batch(batch, evolved) and w.record_count == 2
    w.close()
    envelope = EnvelopeFields(key=True, value=True, headers=True, metadata=True)
    w = get_format(FormatSettings(format=StoreFormat.PARQUET, envelope=envelope)).open(tmp_path / "e.parquet")
    w.write([avro_record(0, dict(rows[0]), ORDER)])
    assert not w.write_batch(batch, ORDER) and w.record_count == 1
    w.close()
    w = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "i.parquet")
    w.write([json_record(i, b'{"id":1,"name":"a","amount":1.0}') for i in range(1000)])
    assert not w.write_batch(batch, ORDER) and w.record_count == 1000
    w.close()
