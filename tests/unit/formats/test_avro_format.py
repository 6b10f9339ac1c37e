"""AVRO: container files read back with fastavro.reader (an independent reader)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

import fastavro
import pytest

from formats import FormatSettings, RecordFormatError, get_format, supported_codecs
from formats.schema_inference import desanitize_name
from kcql.model import EnvelopeFields, StoreFormat
from tests.unit.formats.records import (
    CREATED,
    CREATED_MS,
    DAY,
    ORDER_SCHEMA,
    append,
    order,
    orders,
    record,
    write_rolling,
)


def _read(path: Path) -> tuple[dict, list[dict]]:
    with path.open("rb") as fh:
        reader = fastavro.reader(fh)
        return reader, list(reader)


@pytest.mark.parametrize("codec", supported_codecs(StoreFormat.AVRO))
def test_every_codec_round_trips(tmp_path: Path, codec: str) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.AVRO, codec=codec))
    assert fmt.extension == "avro"
    path = tmp_path / "x.avro"
    writer = fmt.open(path)
    assert append(writer, orders(300)) == 300
    writer.close()
    reader, rows = _read(path)
    expected = {"UNCOMPRESSED": "null", "ZSTD": "zstandard"}.get(codec, codec.lower())
    assert reader.metadata["avro.codec"] == expected
    assert len(rows) == 300
    first = rows[0]
    assert first["price"] == Decimal("12.34")
    assert first["created"] == CREATED
    assert first["day"] == DAY
    assert first["name"] == 'ördér-0 ✓, "quoted"'
    assert first["note"] == "note 0\nsecond line"
    assert rows[1]["note"] is None
    assert first["address"] == {"street": "0 Main St", "zip": "12345"}
    assert rows[2]["tags"] == ["a", "b"]
    assert rows[5]["attrs"] == {"k": 5}
    assert [r["id"] for r in rows] == list(range(300))
    # logical types are kept in the writer schema
    fields = {f["name"]: f["type"] for f in reader.writer_schema["fields"]}
    assert fields["price"]["logicalType"] == "decimal"
    assert fields["created"]["logicalType"] == "timestamp-millis"


def test_large_file_is_written_in_several_blocks(tmp_path: Path) -> None:
    fmt = get_format(FormatSettings(format=StoreFormat.AVRO, codec="DEFLATE", level=1))
    path = tmp_path / "big.avro"
    writer = fmt.open(path)
    seen = []
    for start in range(0, 6000, 500):
        assert append(writer, orders(500, start)) == 500
        seen.append(writer.bytes_written)
    writer.close()
    assert seen == sorted(seen) and seen[-1] > seen[0]
    with path.open("rb") as fh:
        blocks = list(fastavro.block_reader(fh))
    assert len(blocks) > 1
    assert sum(b.num_records for b in blocks) == 6000


@pytest.mark.parametrize("codec", supported_codecs(StoreFormat.AVRO))
def test_envelope_keeps_keys_headers_nulls_and_metadata(tmp_path: Path, codec: str) -> None:
    recs = [*orders(4), record(9, None, key="k9", key_schema="string", timestamp=None)]
    settings = FormatSettings(format=StoreFormat.AVRO, codec=codec, envelope=EnvelopeFields())
    paths = write_rolling(tmp_path, settings, recs)
    assert len(paths) == 1, "different header sets and a tombstone must not roll the file"
    _, rows = _read(paths[0])
    assert [r["key"] for r in rows] == ["key-0", "key-1", None, "key-3", "k9"]
    assert rows[0]["headers"] == []
    assert rows[3]["headers"] == [
        {"name": "trace-id", "value": "t3", "value_bytes": None},
        {"name": "bin", "value": None, "value_bytes": b"\x00\xff"},
        {"name": "trace-id", "value": "again", "value_bytes": None},
    ]
    assert rows[0]["metadata"] == {"timestamp": CREATED_MS, "topic": "orders", "partition": 0, "offset": 0}
    assert rows[4]["value"] is None
    assert rows[4]["metadata"]["timestamp"] is None
    assert rows[0]["value"]["price"] == Decimal("12.34")


def test_envelope_field_subset_and_schemaless_parts(tmp_path: Path) -> None:
    fields = EnvelopeFields(key=True, value=True, headers=False, metadata=False)
    recs = [
        record(0, {"a": 1, "b-c": "x"}, key=None, headers=(("h", 1),)),
        record(1, {"a": 2}, key={"id": "k"}),
        record(2, None, key={"id": "k2"}),
    ]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.AVRO, envelope=fields), recs)
    assert len(paths) == 1
    reader, rows = _read(paths[0])
    assert [f["name"] for f in reader.writer_schema["fields"]] == ["key", "value"]
    assert rows == [
        {"key": None, "value": {"a": 1, "b_x2D_c": "x"}},
        {"key": {"id": "k"}, "value": {"a": 2, "b_x2D_c": None}},
        {"key": {"id": "k2"}, "value": None},
    ]
    assert desanitize_name("b_x2D_c") == "b-c"


def test_schemaless_values_get_an_inferred_schema(tmp_path: Path) -> None:
    recs = [
        record(0, {"id": 1, "name": "ä", "n": {"x": 1.5}, "tags": [], "at": CREATED}),
        record(1, {"id": 2, "extra": True, "tags": ["t"], "amount": Decimal("1.25")}),
    ]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.AVRO), recs)
    assert len(paths) == 1
    reader, rows = _read(paths[0])
    names = [f["name"] for f in reader.writer_schema["fields"]]
    assert names == ["id", "name", "n", "tags", "at", "extra", "amount"]  # first appearance
    assert rows[0]["at"] == CREATED
    assert rows[1] == {
        "id": 2,
        "name": None,
        "n": None,
        "tags": ["t"],
        "at": None,
        "extra": True,
        "amount": Decimal("1.25"),
    }


def test_conflicting_schemaless_types_roll_instead_of_failing(tmp_path: Path) -> None:
    recs = [record(0, {"a": 1}), record(1, {"a": "one"}), record(2, {"a": "two"})]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.AVRO), recs)
    assert [[r["a"] for r in _read(p)[1]] for p in paths] == [[1], ["one", "two"]]


def test_tombstone_without_envelope_is_a_clear_error(tmp_path: Path) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.AVRO)).open(tmp_path / "t.avro")
    with pytest.raises(RecordFormatError, match=r"store.envelope=true.*offset 1") as info:
        append(writer, [orders(1)[0], record(1, None, schema=ORDER_SCHEMA)])
    assert info.value.index == 1
    writer.close()
    assert len(_read(tmp_path / "t.avro")[1]) == 1


def test_value_not_matching_its_schema_fails_without_corrupting_the_file(tmp_path: Path) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.AVRO)).open(tmp_path / "bad.avro")
    good = orders(3)
    # fails at the last field, after the earlier fields were encoded into the open block
    bad = record(3, order(3, attrs={"k": "not a long"}), schema=ORDER_SCHEMA)
    assert append(writer, good[:1]) == 1
    with pytest.raises(RecordFormatError, match="offset 3") as info:
        append(writer, [good[1], bad, good[2]])
    assert info.value.index == 1
    assert append(writer, good[2:]) == 1  # the error policy skipped the bad record
    writer.close()
    assert [r["id"] for r in _read(tmp_path / "bad.avro")[1]] == [0, 1, 2]


def test_empty_file_is_a_valid_container(tmp_path: Path) -> None:
    writer = get_format(FormatSettings(format=StoreFormat.AVRO)).open(tmp_path / "e.avro")
    writer.close()
    assert _read(tmp_path / "e.avro")[1] == []


def test_primitive_value_schema(tmp_path: Path) -> None:
    recs = [record(i, f"s{i}", schema="string") for i in range(3)]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.AVRO), recs)
    assert _read(paths[0])[1] == ["s0", "s1", "s2"]


def test_key_and_value_sharing_a_record_name(tmp_path: Path) -> None:
    key_schema = {
        "type": "record",
        "name": "Id",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "long"}],
    }
    clash = {
        "type": "record",
        "name": "Id",
        "namespace": "shop",
        "fields": [{"name": "id", "type": "string"}],
    }
    recs = [
        record(0, {"id": 1}, schema=key_schema, key={"id": 1}, key_schema=key_schema),
    ]
    paths = write_rolling(tmp_path, FormatSettings(format=StoreFormat.AVRO, envelope=EnvelopeFields()), recs)
    assert [(r["key"], r["value"]) for r in _read(paths[0])[1]] == [({"id": 1}, {"id": 1})]
    recs = [record(0, {"id": "a"}, schema=clash, key={"id": 1}, key_schema=key_schema)]
    out = tmp_path / "clash"
    out.mkdir()
    paths = write_rolling(out, FormatSettings(format=StoreFormat.AVRO, envelope=EnvelopeFields()), recs)
    assert [(r["key"], r["value"]) for r in _read(paths[0])[1]] == [({"id": 1}, {"id": "a"})]


def test_unusable_schema_rejects_the_call_and_keeps_the_writer(tmp_path: Path) -> None:
    broken = {"type": "record", "name": "B", "fields": [{"name": "x", "type": "no-such-type"}]}
    writer = get_format(FormatSettings(format=StoreFormat.AVRO)).open(tmp_path / "s.avro")
    with pytest.raises(RecordFormatError, match=r"schema cannot be used.*offset 0") as info:
        append(writer, [record(0, {"x": 1}, schema=broken)])
    assert info.value.index == 0 and writer.record_count == 0
    assert append(writer, orders(2)) == 2
    writer.close()
    assert len(_read(tmp_path / "s.avro")[1]) == 2


def test_rejected_first_record_leaves_no_schema_behind(tmp_path: Path) -> None:
    settings = FormatSettings(format=StoreFormat.AVRO, envelope=EnvelopeFields())
    writer = get_format(settings).open(tmp_path / "f.avro")
    with pytest.raises(RecordFormatError, match="cannot infer"):
        # the value schema is fine, the schemaless key is not
        append(writer, [record(0, {"id": 1}, schema=ORDER_SCHEMA, key={"k": object()})])
    other = {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "long"}]}
    assert append(writer, [record(1, {"x": 5}, schema=other, key="k", key_schema="string")]) == 1
    writer.close()
    _, rows = _read(tmp_path / "f.avro")
    assert rows[0]["value"] == {"x": 5}
