"""STOREAS AVRO of schemaless JSON: batches appended column-wise (Arrow parse + ``avro_encode``).

Every test sinks the same Kafka messages through batches with the joined JSON text and through
``cheap_forms=False`` batches (the per-record path: ``json.loads``, a dict per record, fastavro)
and compares what fastavro reads back: the writer schema, the codec, the records, and the file
bytes with the random sync marker blanked (so blocks end at the same rows too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import formats._rows as rows_module
import formats.avro_format as avro_format
from formats import FormatSettings
from kcql.model import StoreFormat
from tests.unit.formats.sinking import assert_same, forms_seen
from tests.unit.formats.test_cheap_json_lines import both, dumps

AVRO = FormatSettings(format=StoreFormat.AVRO)
AVRO_DEFLATE = FormatSettings(format=StoreFormat.AVRO, codec="DEFLATE")


def row(i: int, pad: int = 300) -> dict[str, Any]:
    return {
        "id": i * 7919 - 10**6,
        "name": f"n{i} é 日本 {'x' * (i % pad)}",
        "amount": i + 0.25,
        "ok": i % 2 == 0,
        "maybe": None if i % 5 else i * 2**40,
    }


@pytest.mark.parametrize("settings_", [AVRO, AVRO_DEFLATE], ids=["null", "deflate"])
def test_a_long_run_spans_many_blocks_exactly_as_fastavro_splits_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings_: FormatSettings
) -> None:
    values: list[bytes | None] = [dumps(row(i), ascii_only=i % 3 == 0) for i in range(6000)]
    monkeypatch.setattr(avro_format, "_SYNC_INTERVAL", 16 * 1024)  # many blocks, ending mid-batch
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(
            tmp_path, settings_, values, poll_sizes=[700, 333, 1], rooms=[100_000, 97, 5]
        )
    assert_same(per_record, cheap)
    # rows go one by one only until the rows held and the batch at hand reach 1,000: the 700 of
    # the first poll, then the 97 and 5 that the rooms gave the next appends; the rest of that
    # poll parses into their schema, which fixes it, and nothing goes one by one after that
    assert seen.converted == 6000 + 700 + 97 + 5 and seen.json_served >= 5000
    (only,) = cheap.files
    assert len(only["rows"]) == 6000
    assert only["bytes"].count(b"\x00" * 16) > 50  # many blocks (each ends with the blanked marker)
    assert only["rows"][5]["maybe"] == 5 * 2**40 and only["rows"][6]["maybe"] is None


def test_batches_the_columns_cannot_take_go_row_by_row_in_between(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A double from 2**53 on, a lone surrogate (a record error), a missing field: their batches
    go one by one, between column-wise batches, in the middle of blocks."""
    rows = [row(i, pad=200) for i in range(4000)]
    rows[1500]["amount"] = 2.0**60  # Arrow would round a JSON integer there: per-record decides
    rows[2100]["amount"] = 9007199254740993  # an integer in the double column, beyond 2**53
    del rows[2600]["ok"]  # a missing field: a null in the (nullable) inferred field
    values: list[bytes | None] = [dumps(r) for r in rows]
    values[3100] = b'{"id": 1, "name": "\\ud800", "amount": 1.5, "ok": true, "maybe": null}'
    monkeypatch.setattr(rows_module, "FREEZE_ROWS", 300)
    monkeypatch.setattr(avro_format, "_SYNC_INTERVAL", 32 * 1024)
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, AVRO, values, poll_sizes=[250, 64, 700])
    assert_same(per_record, cheap)
    assert len(cheap.files) == 1 and [e[0] for e in cheap.errors] == [3100]
    assert cheap.files[0]["rows"][2600]["ok"] is None
    assert 4000 < seen.converted < 8000  # some batches column-wise, some not


def test_renamed_fields_and_nested_values_keep_the_per_record_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    renamed: list[bytes | None] = [dumps({"my-id": i, "x": "a"}) for i in range(1500)]
    nested: list[bytes | None] = [dumps({"id": i, "inner": {"a": i}}) for i in range(1500)]
    names = {}
    for name, values in (("renamed", renamed), ("nested", nested)):
        with forms_seen(monkeypatch) as seen:
            per_record, cheap = both(tmp_path / name, AVRO, values, poll_sizes=[400])
        assert_same(per_record, cheap)
        assert seen.converted == 3000 and seen.json_served == 0
        names[name] = [f["name"] for f in cheap.files[0]["schema"]["fields"]]
    assert names["renamed"][0] != "my-id" and names["renamed"][1] == "x"  # sanitised, as today


def test_no_column_wise_append_before_the_schema_is_fixed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    real = avro_format.encode_rows

    def spy(batch: Any, fields: Any) -> Any:
        calls.append(batch.num_rows)
        return real(batch, fields)

    monkeypatch.setattr(avro_format, "encode_rows", spy)
    values: list[bytes | None] = [dumps(row(i)) for i in range(999)]
    per_record, cheap = both(tmp_path, AVRO, values, poll_sizes=[500])
    assert_same(per_record, cheap)
    assert calls == []  # 999 rows never froze the schema before the file closed


def test_files_equal_those_of_todays_per_record_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against ``append`` as it was (every record through ``_write_records``, no column-wise
    path and no chunking before the freeze): the same files, schema and records, same errors."""
    from sink.records.converters import JsonConverter, StringConverter
    from tests.unit.formats.sinking import builders, messages, sink

    rows: list[Any] = [row(i, pad=150) for i in range(5000)]
    rows[10] = {"id": 1, "weird name": "x", "ok": True}  # before the freeze: merged into the schema
    rows[1700]["amount"] = 2.0**60
    rows[2500] = {"id": "text"}  # does not fit the frozen schema: a new file
    values: list[bytes | None] = [dumps(r) for r in rows]
    values[3000] = b'{"id": 5, "name": "\\udc00"}'  # a lone surrogate: a record error
    items = messages(values, [b"k"] * len(values))
    monkeypatch.setattr(avro_format, "_SYNC_INTERVAL", 20 * 1024)
    outcomes = []
    for name, column_wise in (("today", False), ("now", True)):
        if not column_wise:
            monkeypatch.setattr(avro_format.AvroWriter, "_append_arrow", lambda self, batch: None)
        else:
            monkeypatch.undo()
            monkeypatch.setattr(avro_format, "_SYNC_INTERVAL", 20 * 1024)
        _, cheap = builders(lambda: JsonConverter(False), StringConverter)
        with forms_seen(monkeypatch) as seen:
            outcomes.append(sink(tmp_path / name, AVRO_DEFLATE, cheap, items, poll_sizes=[900, 41, 2000]))
        assert (seen.converted < 4000) is column_wise  # the new path really was taken, or not
    today, now = outcomes
    assert_same(today, now)
    assert len(now.files) >= 2 and [e[0] for e in now.errors] == [3000]
    assert "weird_x20_name" in [f["name"] for f in now.files[0]["schema"]["fields"]]  # sanitised


def test_avro_parses_ahead_on_the_helper_thread_and_uses_that_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import threading
    from concurrent.futures import ThreadPoolExecutor

    from formats.json_lines_arrow import LineParser
    from sink.records.converters import ByteArrayConverter, JsonConverter, RecordConverter
    from sink.records.intake import BatchBuilder
    from tests.unit.formats.sinking import messages, sink

    parses: list[str] = []
    parse = LineParser.__call__

    def spy(self: LineParser, data: bytes) -> Any:
        parses.append(threading.current_thread().name)
        return parse(self, data)

    monkeypatch.setattr(LineParser, "__call__", spy)
    monkeypatch.setattr(rows_module, "FREEZE_ROWS", 20)
    values: list[bytes | None] = [dumps(row(i, pad=20)) for i in range(400)]
    polls = [20, 50, 7, 100]
    outcomes = []
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        for name, helper in (("alone", None), ("ahead", executor)):
            converter = RecordConverter(ByteArrayConverter(), JsonConverter(False))
            builder = BatchBuilder(converter, executor=helper)
            outcomes.append(sink(tmp_path / name, AVRO, builder, messages(values), polls, prefetch=True))
            if helper is None:
                without = list(parses)
                parses.clear()
    assert_same(*outcomes)
    assert without and not any(n.startswith("ahead") for n in without)
    assert len([n for n in parses if n.startswith("ahead")]) >= 3 and len(parses) == len(without)
