"""The Avro bodies of Confluent Avro values (``Batch.avro_bodies``) written through by STOREAS AVRO.

A run of values with one schema id of a ``record`` schema goes into an Avro file of exactly that
schema as the bodies are: no decoding, no encoding. Every test sinks the same Kafka messages
through the real AvroConverter (its registry client a fake) with cheap forms and with
``cheap_forms=False`` (the per-record path: fastavro decodes each value and encodes each row),
and compares the files as fastavro reads them (writer schema, codec, records) and byte for byte
apart from the random sync marker: the pass-through must leave the very file the decoding path
leaves. ``passed_through`` counts what went through, so a test cannot pass on the slow path.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pytest

import formats.avro_format as avro_format
from formats import FormatSettings, get_format
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.converters import ByteArrayConverter, RecordConverter, StringConverter
from sink.records.intake import BatchBuilder
from tests.unit.formats.sinking import Outcome, assert_same, avro_converter, builders, messages, sink, wire
from tests.unit.formats.test_cheap_avro_columns import EVOLVED, NESTED, READING, reading

REGISTRY: dict[int, Any] = {
    7: READING,
    8: json.loads(json.dumps(READING)),  # equal to READING, registered again under another id
    9: EVOLVED,
    10: NESTED,
    11: "string",
    12: ["null", READING],
}


def avro(
    codec: str = "UNCOMPRESSED", mode: str = "NONE", envelope: EnvelopeFields | None = None
) -> FormatSettings:
    return FormatSettings(format=StoreFormat.AVRO, codec=codec, schema_compatibility=mode, envelope=envelope)


def readings(ids: range | Sequence[int], schema_id: int = 7, **extra: Any) -> list[bytes | None]:
    return [wire(schema_id, REGISTRY[schema_id], reading(i, **extra)) for i in ids]


class Counted:
    """Records each AvroWriter of a run passed through (spied on ``AvroWriter.close``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.total = 0
        close = avro_format.AvroWriter.close

        def spy(writer: avro_format.AvroWriter) -> None:
            self.total += writer.passed_through
            close(writer)

        monkeypatch.setattr(avro_format.AvroWriter, "close", spy)


def both(
    tmp: Path,
    settings_: FormatSettings,
    values: Sequence[bytes | None],
    polls: Sequence[int] = (),
    rooms: Sequence[int] = (),
    *,
    keys: Sequence[bytes | None] | None = None,
    string_keys: bool = False,
) -> tuple[Outcome, Outcome]:
    per_record, cheap = builders(
        lambda: avro_converter(REGISTRY), StringConverter if string_keys else ByteArrayConverter
    )
    items = messages(values, keys)
    return (
        sink(tmp / "per-record", settings_, per_record, items, polls, rooms),
        sink(tmp / "cheap", settings_, cheap, items, polls, rooms),
    )


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "DEFLATE", "SNAPPY", "ZSTD"])
def test_bodies_go_through_into_the_file_the_decoding_path_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, codec: str
) -> None:
    # 5,000 records of ~120 bytes: two 256 KiB blocks and an open one, cut inside appends
    values = readings(range(5000), 9, note="n" * 80)
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro(codec), values, [1, 69, 1, 1290, 133, 1667], [3000, 64, 7])
    assert counted.total == 5000  # every record of the cheap run, none of the per-record run
    assert_same(per_record, cheap)  # same schema, codec, records, and bytes but the sync marker
    assert len(cheap.files) == 1 and cheap.files[0]["rows"] == per_record.files[0]["rows"]
    assert len(cheap.files[0]["rows"]) == 5000
    with (tmp_path / "cheap/000.avro").open("rb") as handle:
        header = fastavro.reader(handle).metadata
    with (tmp_path / "cheap/000.avro").open("rb") as handle:
        assert sum(1 for _ in fastavro.block_reader(handle)) == 3
    # the file's schema: the registry's writer schema, in fastavro's canonical spelling (full
    # name, no namespace key), on both paths
    assert header["avro.schema"] == json.dumps(
        {k: v for k, v in fastavro.parse_schema(EVOLVED).items() if not k.startswith("__")}
    )


def test_schema_properties_go_through_unchanged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Connect-written schemas carry ``connect.*`` properties and docs: the file's schema keeps
    them exactly as the decoding path writes it."""
    schema = {
        **READING, "doc": "readings", "connect.version": 3, "connect.name": "test.Reading",
        "fields": [{**READING["fields"][0], "doc": "an id"}, *READING["fields"][1:]],
    }
    REGISTRY[31] = schema
    values: list[bytes | None] = [wire(31, schema, reading(i)) for i in range(300)]
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro("SNAPPY"), values, [7, 100], [250])
    assert counted.total == 300
    assert_same(per_record, cheap)
    written = cheap.files[0]["schema"]
    assert (written["connect.version"], written["doc"]) == (3, "readings")
    assert written["fields"][0]["doc"] == "an id"


def test_logical_types_and_nested_records_are_decoded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bodies go through only where every one was checked by the column decoder (flat records
    of primitives): these take the decoding path, and the file is the same."""
    schema = {
        "type": "record", "name": "Order", "namespace": "shop", "doc": "an order",
        "connect.version": 3, "connect.name": "shop.Order",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
            {"name": "price",
             "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}},
            {"name": "lines", "type": {"type": "array", "items": {
                "type": "record", "name": "Line", "fields": [{"name": "sku", "type": "string"}]}}},
            {"name": "tags", "type": {"type": "map", "values": "int"}},
            {"name": "state", "type": {"type": "enum", "name": "State", "symbols": ["NEW", "DONE"]}},
        ],
    }
    import datetime
    import decimal

    REGISTRY[30] = schema

    def order(i: int) -> dict[str, Any]:
        return {
            "id": i, "at": datetime.datetime(2026, 11, 24, i % 24, tzinfo=datetime.UTC),
            "price": decimal.Decimal(f"{i}.{i % 100:02d}"), "lines": [{"sku": f"s{j}"} for j in range(i % 3)],
            "tags": {f"t{i % 5}": i}, "state": "NEW" if i % 2 else "DONE",
        }

    values: list[bytes | None] = [wire(30, schema, order(i)) for i in range(300)]
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro("DEFLATE"), values, [7, 100], [250])
    assert counted.total == 0
    assert_same(per_record, cheap)
    assert cheap.files[0]["schema"]["connect.version"] == 3
    with (tmp_path / "cheap/000.avro").open("rb") as handle:
        assert list(fastavro.reader(handle)) == [order(i) for i in range(300)]


@pytest.mark.parametrize("mode", ["NONE", "BACKWARD", "FORWARD", "FULL"])
def test_schema_changes_roll_or_project_as_on_the_decoding_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    """7 (READING), 9 (EVOLVED, one field more: newer), 8 (equal to 7 under another id), 7 again:
    a newer schema rolls, an older one is projected (decoded) under BACKWARD/FULL, rolls under
    NONE; an equal schema under another id stays in the file."""
    values = readings(range(300)) + readings(range(300, 600), 9, note="n") + readings(range(600, 900), 8)
    values += readings(range(900, 1200))
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro(mode=mode), values, [250, 1000], [400])
    assert_same(per_record, cheap)
    files = [len(f["rows"]) for f in cheap.files]
    assert sum(files) == 1200
    if mode == "NONE":
        assert files == [300, 300, 600] and counted.total == 1200
    elif mode in ("BACKWARD", "FULL"):
        assert files == [300, 900]  # 8 and 7 after 9: older, projected onto EVOLVED
        assert counted.total == 600
    else:  # FORWARD: the newer records are projected onto the older file's schema
        assert files == [1200]
        assert counted.total == 900


def test_tombstones_and_bad_records_in_a_run_are_reported_as_on_the_decoding_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = readings(range(100))
    values[40] = None  # a tombstone: an error without the envelope
    values[70] = b"\x00\x00\x00\x00\x63" + values[71][5:]  # type: ignore[index]  # an unknown schema id
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro(), values, [60], [33])
    assert_same(per_record, cheap)
    assert [offset for offset, _, _ in cheap.errors] == [40, 70]
    assert counted.total == 98


def test_rows_then_bodies_share_one_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Records written as rows (a run the body check refuses, so the per-record path takes it)
    and then as bodies share fastavro's open block: the same bytes as rows only."""
    values = readings(range(400))
    # a lone surrogate's bytes in place of the station's "\u00e4": not UTF-8, so the value does
    # not convert and its run goes record by record
    values[30] = values[30].replace("\u00e4".encode(), b"\xed\xa0")  # type: ignore[union-attr]
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro(), values, [200])
    assert_same(per_record, cheap)
    assert [offset for offset, _, _ in cheap.errors] == [30]
    assert 0 < counted.total < 399


def test_bodies_then_rows_share_one_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bodies, then rows (an older schema projected under BACKWARD): the open pass-through block
    goes on as fastavro's, so the file is the decoding path's, byte for byte."""
    values = readings(range(100), 9, note="x") + readings(range(100, 200))
    counted = Counted(monkeypatch)
    per_record, cheap = both(tmp_path, avro(mode="BACKWARD"), values, [100])
    assert counted.total == 100
    assert_same(per_record, cheap)
    assert len(cheap.files) == 1


def test_the_envelope_decodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = Counted(monkeypatch)
    envelope = EnvelopeFields(key=True, value=True, headers=True, metadata=True)
    per_record, cheap = both(tmp_path, avro(envelope=envelope), readings(range(50)), [20])
    assert_same(per_record, cheap)
    assert counted.total == 0


def test_bytes_written_and_record_count_grow_as_on_the_decoding_path(tmp_path: Path) -> None:
    """flush.size decides file boundaries from ``bytes_written``: bodies count like encoded rows."""
    values = readings(range(6000))
    per_record, cheap = (
        BatchBuilder(RecordConverter(ByteArrayConverter(), avro_converter(REGISTRY)), cheap_forms=flag)
        for flag in (False, True)
    )
    fmt = get_format(avro())
    a, b = fmt.open(tmp_path / "a.avro"), fmt.open(tmp_path / "b.avro")
    offset = 0
    for size in (1, 99, 64, 2500, 136, 3200):
        items = messages(values[offset : offset + size], first_offset=offset)
        offset += size
        for batch_a, batch_b in zip(per_record.build("t", 0, items), cheap.build("t", 0, items), strict=True):
            assert a.append(batch_a) == b.append(batch_b) == len(batch_a)
        assert (b.record_count, b.bytes_written) == (a.record_count, a.bytes_written)
    assert b.passed_through == 6000  # type: ignore[attr-defined]
    a.close()
    b.close()
    assert (tmp_path / "a.avro").stat().st_size == (tmp_path / "b.avro").stat().st_size


def test_an_empty_file_and_a_single_record(tmp_path: Path) -> None:
    per_record, cheap = both(tmp_path, avro(), readings(range(1)))
    assert_same(per_record, cheap)
    assert cheap.files[0]["rows"] == per_record.files[0]["rows"] and len(cheap.files[0]["rows"]) == 1


def test_bodies_are_checked_once_per_run_by_append_not_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prefetch`` leaves Avro bodies alone (the check holds the GIL: a helper thread only adds
    a hand-off); ``append`` checks each consumed run's bodies once (``check_joined``), on the
    calling thread, however the run is sliced. The file is still the decoding path's."""
    from concurrent.futures import ThreadPoolExecutor

    import sink.records.avro_values as avro_values

    threads: list[str] = []
    check = avro_values.check_joined

    def spy(*args: Any, **kwargs: Any) -> Any:
        import threading

        threads.append(threading.current_thread().name)
        return check(*args, **kwargs)

    monkeypatch.setattr(avro_values, "check_joined", spy)
    counted = Counted(monkeypatch)
    items = messages(readings(range(3000)))
    with ThreadPoolExecutor(1, thread_name_prefix="helper") as executor:
        per_record, cheap = builders(lambda: avro_converter(REGISTRY), executor=executor)
        reference = sink(tmp_path / "per-record", avro(), per_record, items, [500], prefetch=True)
        outcome = sink(tmp_path / "cheap", avro(), cheap, items, [500], prefetch=True)
    assert_same(reference, outcome)
    assert counted.total == 3000
    assert threads == ["MainThread"] * 6  # one check per poll of 500


def test_a_replayed_file_is_the_same_bytes_whichever_path_wrote_it(tmp_path: Path) -> None:
    """The sync marker comes from the file's first record, codec and schema: the pass-through,
    the decoding path and a second run over the same records write identical files; a file
    starting at another offset gets another marker."""
    values = readings(range(3000), 9, note="n" * 80)
    both(tmp_path / "one", avro("DEFLATE"), values, [700], [2000])
    both(tmp_path / "two", avro("DEFLATE"), values, [1, 999], [2000])
    first = (tmp_path / "one/cheap/000.avro").read_bytes()
    assert first == (tmp_path / "one/per-record/000.avro").read_bytes()
    assert first == (tmp_path / "two/cheap/000.avro").read_bytes()
    converter = RecordConverter(ByteArrayConverter(), avro_converter(REGISTRY))
    records = [converter.convert(m) for m in messages(values[:2], first_offset=41)]
    markers = {avro_format._sync_marker(r, "deflate", EVOLVED) for r in records}
    markers.add(avro_format._sync_marker(records[0], "null", EVOLVED))
    assert len(markers) == 3 and all(len(m) == 16 for m in markers)
