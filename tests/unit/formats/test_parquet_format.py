"""PARQUET: files read back with pyarrow.parquet (an independent reader)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import formats.parquet_format as parquet_format
from formats import FormatSettings, RecordFormatError, get_format, supported_codecs
from kcql.model import EnvelopeFields, StoreFormat
from tests.unit.formats.records import (
    CREATED,
    CREATED_MS,
    DAY,
    ORDER_SCHEMA,
    append,
    orders,
    record,
    write_rolling,
)


@pytest.mark.parametrize("codec", supported_codecs(StoreFormat.PARQUET))
def test_every_codec_round_trips(tmp_path: Path, codec: str) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.PARQUET, codec=codec))
    assert fmt.extension == "parquet"
    path = tmp_path / "x.parquet"
    writer = fmt.open(path)
    assert append(writer, orders(50)) == 50
    assert writer.bytes_written > 0
    writer.close()
    meta = pq.ParquetFile(path).metadata
    assert meta.row_group(0).column(0).compression == codec
    table = pq.read_table(path)
    assert table.column_names == [f["name"] for f in ORDER_SCHEMA["fields"]]  # schema order
    schema = table.schema
    assert schema.field("price").type == pa.decimal128(10, 2)
    assert schema.field("created").type == pa.timestamp("ms", tz="UTC")
    assert schema.field("day").type == pa.date32()
    assert pa.types.is_struct(schema.field("address").type)
    assert pa.types.is_list(schema.field("tags").type)
    assert pa.types.is_map(schema.field("attrs").type)
    assert not schema.field("id").nullable and schema.field("note").nullable
    rows = table.to_pylist()
    assert rows[0]["price"] == Decimal("12.34")
    assert rows[0]["created"] == CREATED
    assert rows[0]["day"] == DAY
    assert rows[0]["name"] == 'ördér-0 ✓, "quoted"'
    assert rows[1]["note"] is None
    assert rows[0]["address"] == {"street": "0 Main St", "zip": "12345"}
    assert rows[5]["attrs"] == [("k", 5)]
    assert [r["id"] for r in rows] == list(range(50))


def test_row_groups_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_format, "_ROW_GROUP_ROWS", 1000)
    path = tmp_path / "big.parquet"
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET, codec="SNAPPY")).open(path)
    sizes = []
    for start in range(0, 5000, 250):
        assert append(writer, orders(250, start)) == 250
        sizes.append(writer.bytes_written)
    writer.close()
    assert sizes == sorted(sizes)
    meta = pq.ParquetFile(path).metadata
    assert meta.num_row_groups == 5
    assert meta.num_rows == 5000
    assert pq.read_table(path, columns=["id"]).column("id").to_pylist() == list(range(5000))


def test_bytes_written_follows_the_encoded_file_and_outlives_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Arrow writes the file through its own handle; the size the flush policy reads is still the
    file's, also after close (a timer may look at a writer a commit thread just finished)."""
    monkeypatch.setattr(parquet_format, "_ROW_GROUP_ROWS", 1000)
    path = tmp_path / "x.parquet"
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(path)
    assert append(writer, orders(1000)) == 1000  # one row group encoded
    encoded = path.stat().st_size
    assert encoded > 0 and writer.bytes_written >= encoded
    writer.close()
    assert writer.bytes_written >= path.stat().st_size > encoded
    assert pq.read_table(path).num_rows == 1000

    aborted = tmp_path / "aborted.parquet"
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(aborted)
    append(writer, orders(1000))
    writer.abort()
    assert writer._out is not None and writer._out.closed  # type: ignore[attr-defined]


@pytest.mark.parametrize("codec", supported_codecs(StoreFormat.PARQUET))
def test_envelope(tmp_path: Path, codec: str) -> None:
    recs = [*orders(4), record(9, None, key="k9", key_schema="string", timestamp=None)]
    settings = FormatSettings(format=StoreFormat.PARQUET, codec=codec, envelope=EnvelopeFields())
    paths = write_rolling(tmp_path, settings, recs)
    assert len(paths) == 1, "different header sets and a tombstone must not roll the file"
    table = pq.read_table(paths[0])
    assert table.column_names == ["key", "value", "headers", "metadata"]
    rows = table.to_pylist()
    assert [r["key"] for r in rows] == ["key-0", "key-1", None, "key-3", "k9"]
    assert rows[3]["headers"] == [
        {"name": "trace-id", "value": "t3", "value_bytes": None},
        {"name": "bin", "value": None, "value_bytes": b"\x00\xff"},
        {"name": "trace-id", "value": "again", "value_bytes": None},
    ]
    assert rows[0]["metadata"] == {"timestamp": CREATED_MS, "topic": "orders", "partition": 0, "offset": 0}
    assert rows[4]["value"] is None and rows[4]["metadata"]["timestamp"] is None
    assert rows[0]["value"]["price"] == Decimal("12.34")


def test_envelope_without_headers_and_metadata(tmp_path: Path) -> None:
    fields = EnvelopeFields(headers=False, metadata=False)
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.PARQUET, envelope=fields), orders(2))
    assert pq.read_table(paths[0]).column_names == ["key", "value"]


def test_schemaless_column_order_is_first_appearance(tmp_path: Path) -> None:
    recs = [
        record(0, {"z": 1, "a": "x", "tags": []}),
        record(1, {"a": "y", "m": {"q": 1.5}, "z": 2.5, "tags": ["t"]}),
        record(2, {"z": None}),
    ]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.PARQUET), recs)
    assert len(paths) == 1
    table = pq.read_table(paths[0])
    assert table.column_names == ["z", "a", "tags", "m"]
    assert table.schema.field("z").type == pa.float64()
    assert table.to_pylist() == [
        {"z": 1.0, "a": "x", "tags": [], "m": None},
        {"z": 2.5, "a": "y", "tags": ["t"], "m": {"q": 1.5}},
        {"z": None, "a": None, "tags": None, "m": None},
    ]


def test_primitive_values_go_to_a_value_column(tmp_path: Path) -> None:
    recs = [record(i, i * 10, schema="long") for i in range(3)]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.PARQUET), recs)
    assert pq.read_table(paths[0]).to_pylist() == [{"value": 0}, {"value": 10}, {"value": 20}]


def test_multi_type_union_is_rejected_with_a_message(tmp_path: Path) -> None:
    schema = {"type": "record", "name": "U", "fields": [{"name": "u", "type": ["null", "string", "long"]}]}
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "u.parquet")
    with pytest.raises(RecordFormatError, match="several non-null types") as info:
        append(writer, [record(0, {"u": "x"}, schema=schema), record(1, {"u": 2}, schema=schema)])
    assert info.value.index == 0
    assert writer.record_count == 0
    assert append(writer, orders(2)) == 2  # the writer is still usable for other records
    writer.close()
    assert pq.read_table(tmp_path / "u.parquet").num_rows == 2


def test_bad_value_names_the_record_and_keeps_the_prefix(tmp_path: Path) -> None:
    path = tmp_path / "b.parquet"
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(path)
    good = orders(3)
    with pytest.raises(RecordFormatError, match="offset 7") as info:
        append(writer, [good[0], good[1], record(7, {**good[2].value, "id": "x"}, schema=ORDER_SCHEMA)])
    assert info.value.index == 2
    assert writer.record_count == 2
    writer.close()
    assert pq.read_table(path).column("id").to_pylist() == [0, 1]


def test_tombstone_without_envelope_is_a_clear_error(tmp_path: Path) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "t.parquet")
    with pytest.raises(RecordFormatError, match="tombstone"):
        append(writer, [record(0, None, schema=ORDER_SCHEMA)])
    writer.close()
    assert pq.read_table(tmp_path / "t.parquet").num_rows == 0


def test_abort_after_a_row_group_releases_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_format, "_ROW_GROUP_ROWS", 10)
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET)).open(tmp_path / "a.parquet")
    assert append(writer, orders(25)) == 25
    writer.abort()
    writer.abort()  # idempotent
    writer.close()  # a no-op after abort
    import gc

    gc.collect()


def test_logical_types_as_fastavro_decodes_them(tmp_path: Path) -> None:
    import io
    import uuid

    import fastavro

    schema = {
        "type": "record",
        "name": "L",
        "fields": [
            {"name": "u", "type": {"type": "string", "logicalType": "uuid"}},
            {"name": "t", "type": {"type": "long", "logicalType": "timestamp-micros"}},
            {"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}},
            {"name": "f", "type": {"type": "fixed", "name": "F", "size": 2}},
            {"name": "us", "type": {"type": "array", "items": {"type": "string", "logicalType": "uuid"}}},
        ],
    }
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    buf = io.BytesIO()
    fastavro.writer(
        buf, schema, [{"u": str(ident), "t": 1, "tm": 2, "e": "B", "f": b"ab", "us": [str(ident)]}]
    )
    buf.seek(0)
    value = next(iter(fastavro.reader(buf)))  # what an Avro converter hands the sink
    assert isinstance(value["u"], uuid.UUID)
    paths = write_rolling(
        tmp_path, FormatSettings(format=StoreFormat.PARQUET), [record(0, value, schema=schema)]
    )
    table = pq.read_table(paths[0])
    assert table.schema.field("t").type == pa.timestamp("us", tz="UTC")
    assert table.schema.field("f").type == pa.binary(2)
    row = table.to_pylist()[0]
    assert row["u"] == str(ident) and row["us"] == [str(ident)]
    assert row["e"] == "B" and row["f"] == b"ab" and row["tm"].second == 0


@pytest.mark.parametrize("envelope", [None, EnvelopeFields()])
def test_small_calls_keep_order_and_report_bad_records_in_their_call(
    tmp_path: Path, envelope: EnvelopeFields | None
) -> None:
    path = tmp_path / "small.parquet"
    writer = get_format(FormatSettings(format=StoreFormat.PARQUET, envelope=envelope)).open(path)
    good = orders(300)
    assert append(writer, good[:1]) == 1  # fixes the schema
    for rec in good[1:100]:  # one record per call, like PARTITIONBY fan-out
        assert append(writer, [rec]) == 1
    assert append(writer, good[100:200]) == 100  # a large call in between keeps the order
    bad = record(
        999, {**good[200].value, "price": "not a decimal"}, schema=ORDER_SCHEMA, key="k", key_schema="string"
    )
    with pytest.raises(RecordFormatError, match="offset 999") as info:
        append(writer, [good[200], bad])
    assert info.value.index == 1
    for rec in good[201:]:
        assert append(writer, [rec]) == 1
    assert writer.record_count == 300
    writer.close()
    table = pq.read_table(path)
    ids = table.column("id" if envelope is None else "value").to_pylist()
    assert [i if envelope is None else i["id"] for i in ids] == list(range(300))


def test_a_given_schema_fastavro_cannot_parse_is_a_record_error_and_the_writer_stays_usable(tmp_path):
    """As in AVRO: the record is refused in its own call (not a raw SchemaParseException)."""
    redefined = {
        "type": "record", "name": "R",
        "fields": [{"name": "a", "type": {"type": "record", "name": "R", "fields": []}}],
    }
    writer = get_format(FormatSettings(StoreFormat.PARQUET)).open(tmp_path / "f.parquet")
    with pytest.raises(RecordFormatError, match="schema cannot be used") as info:
        append(writer, [record(0, {"a": {}}, schema=redefined)])
    assert info.value.index == 0 and writer.record_count == 0
    assert append(writer, [record(1, {"id": 1})]) == 1
    writer.close()
    assert pq.read_table(tmp_path / "f.parquet").to_pylist() == [{"id": 1}]
