"""The Arrow columns of Confluent Avro values (``Batch.avro_columns``) against the per-record path.

A run of values with one schema id can be decoded column by column; STOREAS PARQUET appends those
columns as they are when its file's schema is exactly that value schema, and no other format has
any use for them. Every test sinks the same Kafka messages through the real AvroConverter (its
registry client a :class:`~tests.unit.formats.sinking.FakeRegistry`) twice: with cheap forms and
with ``cheap_forms=False``, and compares the Parquet files (Arrow schema with metadata, rows, read
with pyarrow) and the record errors; and counts what was decoded and converted one by one.
Ported from the deleted ``write_batch``/``block_writes`` tests: what ``write_batch`` refused now
simply goes record by record, with the file the per-record path gives.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import formats.parquet_format as parquet_format
from formats import FormatSettings, get_format
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.converters import AvroConverter, ByteArrayConverter, RecordConverter, StringConverter
from sink.records.intake import BatchBuilder
from tests.unit.formats.sinking import (
    FakeRegistry,
    Outcome,
    assert_same,
    avro_converter,
    builders,
    forms_seen,
    messages,
    sink,
    wire,
)
from tests.unit.formats.test_avro_columns import flat_cases

PARQUET = FormatSettings(format=StoreFormat.PARQUET)
ENVELOPE = EnvelopeFields(key=True, value=True, headers=True, metadata=True)

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
NESTED: dict[str, Any] = {
    "type": "record",
    "name": "Outer",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "inner", "type": {"type": "record", "name": "In", "fields": [{"name": "x", "type": "int"}]}},
    ],
}
SAME_COLUMNS = {
    "renamed": {**READING, "name": "Reading2"},
    "namespace": {**READING, "namespace": "elsewhere"},
    "doc": {**READING, "doc": "the same fields, documented"},
    "version": {**READING, "connect.version": 2},
    "field-doc": {**READING, "fields": [{**READING["fields"][0], "doc": "an id"}, *READING["fields"][1:]]},
}
"""Another Avro schema with READING's Arrow schema: the per-record path rolls or projects there."""

REGISTRY: dict[int, Any] = {
    7: READING,
    8: json.loads(json.dumps(READING)),  # equal to READING, registered again under another id
    9: EVOLVED,
    10: NESTED,
    11: "string",
    **{20 + i: schema for i, schema in enumerate(SAME_COLUMNS.values())},
}


def reading(i: int, **extra: Any) -> dict[str, Any]:
    return {
        "id": i,
        "station": None if i % 4 == 0 else f"stätion-{i}\U0001f600",
        "value": None if i % 5 == 0 else (math.nan if i % 11 == 0 else i / 7),
        "ok": i % 2 == 0,
        "raw": bytes([i % 256]) * (i % 3),
        "n": -i,
        "f": None if i % 3 == 0 else (-0.0 if i % 7 == 0 else i / 4),
        **extra,
    }


def readings(ids: range | Sequence[int], schema_id: int = 7, **extra: Any) -> list[bytes | None]:
    schema = REGISTRY[schema_id]
    return [wire(schema_id, schema, reading(i, **extra)) for i in ids]


def both(
    tmp: Path,
    settings_: FormatSettings,
    values: Sequence[bytes | None],
    polls: Sequence[int] = (),
    rooms: Sequence[int] = (),
    *,
    keys: Sequence[bytes | None] | None = None,
    string_keys: bool = False,
    registry: dict[int, Any] | None = None,
) -> tuple[Outcome, Outcome]:
    per_record, cheap = builders(
        lambda: avro_converter(REGISTRY if registry is None else registry),
        StringConverter if string_keys else ByteArrayConverter,
    )
    items = messages(values, keys)
    return (
        sink(tmp / "per-record", settings_, per_record, items, polls, rooms),
        sink(tmp / "cheap", settings_, cheap, items, polls, rooms),
    )


def compat(mode: str) -> FormatSettings:
    return FormatSettings(format=StoreFormat.PARQUET, schema_compatibility=mode)


MODES = ["NONE", "BACKWARD", "FORWARD", "FULL"]

# ------------------------------------------------------------------------------- served


@pytest.mark.parametrize("mode", MODES)
def test_parquet_serves_avro_runs_from_their_decoded_columns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    values = readings(range(2000))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, compat(mode), values, [1, 69, 1, 129, 133, 1667], [5000, 64, 7])
    assert_same(per_record, cheap)
    # a schema-given file fixes its schema at its first row; every other record came decoded,
    # each value once (slices share their batch's columns)
    assert seen.converted == 2000 + 1
    assert seen.decoded == 1999 and seen.avro_served == 1999
    assert len(cheap.files[0]["rows"]) == 2000
    # stronger than the promise, and true so far: the very same bytes (NaN payloads included)
    assert (tmp_path / "cheap/000.parquet").read_bytes() == (tmp_path / "per-record/000.parquet").read_bytes()


def test_bytes_written_and_record_count_grow_as_on_the_per_record_path(tmp_path: Path) -> None:
    """flush.size decides file boundaries from ``bytes_written``: decoded columns count like rows."""
    values = readings(range(300))
    per_record, cheap = (
        BatchBuilder(RecordConverter(ByteArrayConverter(), avro_converter(REGISTRY)), cheap_forms=flag)
        for flag in (False, True)
    )
    fmt = get_format(PARQUET)
    a, b = fmt.open(tmp_path / "a.parquet"), fmt.open(tmp_path / "b.parquet")
    offset = 0
    for size in (1, 99, 64, 136):  # appends of 64 rows and more convert at once on both paths
        items = messages(values[offset : offset + size], first_offset=offset)
        offset += size
        for batch_a, batch_b in zip(per_record.build("t", 0, items), cheap.build("t", 0, items), strict=True):
            assert a.append(batch_a) == b.append(batch_b) == len(batch_a)
        assert (b.record_count, b.bytes_written) == (a.record_count, a.bytes_written)
    a.close()
    b.close()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=flat_cases(min_rows=2, max_rows=90), data=st.data())
def test_any_flat_schema_and_split_gives_the_per_record_file(
    tmp_path_factory: pytest.TempPathFactory, case: tuple[dict[str, Any], list[dict[str, Any]]], data: Any
) -> None:
    schema, rows = case
    values: list[bytes | None] = [wire(3, schema, row) for row in rows]
    polls = data.draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    rooms = data.draw(st.lists(st.integers(1, 40), max_size=3))
    per_record, cheap = both(
        tmp_path_factory.mktemp("flat"), PARQUET, values, polls, rooms, registry={3: schema}
    )
    assert_same(per_record, cheap)
    assert per_record.errors == []


def test_small_per_record_appends_before_decoded_columns_stay_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Appends under 64 rows on the per-record path are buffered unconverted; decoded columns
    appended after them must not overtake them. Runs of the equal schema under id 8 with a byte
    after one body (fastavro reads it, the column decoder refuses the run) go per record."""
    values: list[bytes | None] = []
    for i in range(0, 60, 5):
        values += readings(range(i, i + 3))
        odd = readings(range(i + 3, i + 5), 8)
        values += [odd[0], (odd[1] or b"") + b"\x00"]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [2, 3, 4, 20, 31])
    assert_same(per_record, cheap)
    # cheap: the first row, and the runs of id 8 holding the odd body (polls may cut them)
    assert 60 + 1 + 12 <= seen.converted <= 60 + 1 + 2 * 12
    assert seen.avro_served >= 36
    assert [row["id"] for row in cheap.files[0]["rows"]] == list(range(60))


def test_decoded_columns_across_row_groups(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(parquet_format, "_ROW_GROUP_ROWS", 50)
    values = readings(range(333))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [1, 79, 1, 179, 73])
    assert_same(per_record, cheap)
    assert seen.avro_served == 332
    assert pq.read_metadata(tmp_path / "cheap/000.parquet").num_row_groups > 1


def test_an_equal_schema_under_another_id_is_the_same_schema(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Records carry one schema object per registry id; an equal copy (another id) is SAME for the
    per-record path too, so its runs come decoded into the same file."""
    values = readings(range(30)) + readings(range(30, 60), 8) + readings(range(60, 90))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [10, 45, 100])
    assert_same(per_record, cheap)
    assert len(cheap.files) == 1
    assert seen.avro_served == 89 and seen.converted == 90 + 1


def test_a_file_of_non_record_values_stores_them_in_one_column(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    strings = [wire(11, "string", f"s{i}") for i in range(3)]
    values: list[bytes | None] = [*strings, *readings(range(40)), *strings]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [5, 100])
    assert_same(per_record, cheap)
    assert [len(f["rows"]) for f in cheap.files] == [3, 40, 3]
    assert cheap.files[0]["rows"] == [{"value": f"s{i}"} for i in range(3)]
    # the cheap run converted the strings and the first reading (which fixed its file's schema)
    assert seen.converted == 46 + 3 + 1 + 3


def test_a_nested_schema_goes_record_by_record(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    values: list[bytes | None] = [wire(10, NESTED, {"id": i, "inner": {"x": -i}}) for i in range(100)]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [30])
    assert_same(per_record, cheap)
    assert seen.decoded == 0 and seen.converted == 200
    assert cheap.files[0]["rows"][5] == {"id": 5, "inner": {"x": -5}}


# ---------------------------------------------------------------- what the per-record path decides


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("other", list(SAME_COLUMNS))
def test_another_schema_with_the_same_columns_is_decided_per_record(
    tmp_path: Path, mode: str, other: str
) -> None:
    """Same Arrow schema, another Avro schema: the per-record path rolls (or projects) there, so
    the decoded columns must not go into the file although they fit it."""
    other_id = 20 + list(SAME_COLUMNS).index(other)
    values = readings(range(10)) + readings(range(10, 90), other_id) + readings(range(90, 100))
    per_record, cheap = both(tmp_path, compat(mode), values, [10, 80, 10])
    assert_same(per_record, cheap)
    assert len(cheap.files) >= 2 or mode != "NONE"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(("first", "then"), [(7, 9), (9, 7)], ids=["newer-later", "older-later"])
def test_another_schema_rolls_or_projects_as_on_the_per_record_path(
    tmp_path: Path, mode: str, first: int, then: int
) -> None:
    def values_of(schema_id: int, ids: range) -> list[bytes | None]:
        return readings(ids, schema_id, note="n") if schema_id == 9 else readings(ids)

    values = values_of(first, range(70)) + values_of(then, range(70, 150)) + values_of(first, range(150, 230))
    per_record, cheap = both(tmp_path, compat(mode), values, [70, 30, 50, 80])
    assert_same(per_record, cheap)


@pytest.mark.parametrize(
    "envelope",
    [ENVELOPE, EnvelopeFields(key=False, value=True, headers=False, metadata=False)],
    ids=["full-envelope", "value-only-envelope"],
)
def test_an_envelope_file_is_written_record_by_record(tmp_path: Path, envelope: EnvelopeFields) -> None:
    settings_ = FormatSettings(format=StoreFormat.PARQUET, envelope=envelope)
    keys: list[bytes | None] = [None if i % 3 else b"k%d" % i for i in range(100)]
    per_record, cheap = both(tmp_path, settings_, readings(range(100)), [3, 97], keys=keys)
    assert_same(per_record, cheap)
    assert cheap.files[0]["rows"][3]["value"]["id"] == 3
    if envelope.key:
        assert cheap.files[0]["rows"][3]["key"] == b"k3"


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param(lambda body: body[:-2], id="truncated"),
        pytest.param(lambda body: body + b"\x00", id="a-byte-after-the-body"),
        pytest.param(lambda body: body[:5], id="no-body"),
        pytest.param(lambda body: body[:5] + b"\x00\x04", id="union-branch-out-of-range"),
        pytest.param(lambda body: body.replace(b"st\xc3\xa4", b"st\xff\xa4"), id="invalid-utf8-string"),
    ],
)
def test_bodies_that_do_not_decode_are_decided_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: Any
) -> None:
    values = readings(range(200))
    body = values[121]
    assert body is not None
    values[121] = bad(body)
    assert values[121] != body
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [100, 100], [50, 100])
    assert_same(per_record, cheap)
    assert seen.converted == 200 + 1 + 100  # cheap: the first row, and the run with the bad body


def test_unknown_schema_ids_are_value_converter_errors_on_both_paths(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    unknown: list[bytes | None] = [wire(99, READING, reading(i)) for i in range(30, 35)]
    values = readings(range(30)) + unknown + readings(range(35, 60))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, [60])
    assert_same(per_record, cheap)
    assert cheap.errors == [(i, "VALUE_CONVERTER", "ConversionError") for i in range(30, 35)]
    assert seen.converted == 60 + 1 + 5


def test_a_key_that_is_not_utf8_is_no_error_on_either_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The StringConverter replaces what does not decode (as Kafka's does), so half a character
    in one key neither fails its record nor sends its run record by record."""
    keys: list[bytes | None] = [f"kö{i}".encode() for i in range(300)]
    keys[150] = "kö".encode()[:-1]  # half of one character
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(
            tmp_path, PARQUET, readings(range(300)), [300], keys=keys, string_keys=True
        )
    assert_same(per_record, cheap)
    assert cheap.errors == []
    assert seen.converted == 300 + 1  # per record: all 300; cheap: the first row only


# ------------------------------------------------------------------ never decoded for nothing

NOT_PARQUET = {
    "JSON": FormatSettings(format=StoreFormat.JSON),
    "JSON-GZIP": FormatSettings(format=StoreFormat.JSON, codec="GZIP"),
    "JSON-envelope": FormatSettings(format=StoreFormat.JSON, envelope=ENVELOPE),
    "CSV": FormatSettings(format=StoreFormat.CSV),
    "CSV_WITHHEADERS": FormatSettings(format=StoreFormat.CSV_WITHHEADERS),
    "TEXT": FormatSettings(format=StoreFormat.TEXT),
    "BYTES": FormatSettings(format=StoreFormat.BYTES),
    # (AVRO without envelope asks for the flat fields to check the bodies it writes through:
    # tests/unit/formats/test_cheap_avro_bodies.py)
    "AVRO-envelope": FormatSettings(format=StoreFormat.AVRO, envelope=ENVELOPE),
    "PARQUET-envelope": FormatSettings(format=StoreFormat.PARQUET, envelope=ENVELOPE),
}


@pytest.mark.parametrize("fmt", list(NOT_PARQUET))
def test_avro_columns_are_never_decoded_for_a_format_that_cannot_use_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fmt: str
) -> None:
    """A regression test: the old code decoded a 2,000-message run about a dozen times for
    STOREAS JSON/CSV/TEXT and wrote nothing from it. The files are the per-record ones."""
    columns = AvroConverter.columns
    asked: list[int] = []

    def spy(self: AvroConverter, schema_id: int) -> Any:
        asked.append(schema_id)
        return columns(self, schema_id)

    monkeypatch.setattr(AvroConverter, "columns", spy)
    values = readings(range(2000))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, NOT_PARQUET[fmt], values, [500], [64, 2000, 7])
    assert_same(per_record, cheap)
    assert seen.decoded == 0
    assert asked == []


def test_the_registry_is_asked_once_per_schema_id(tmp_path: Path) -> None:
    values = readings(range(100)) + readings(range(100, 200), 9, note="x") + readings(range(200, 300))
    registry = FakeRegistry(REGISTRY)
    converter = avro_converter(REGISTRY)
    converter._client = registry  # type: ignore[assignment]
    builder = BatchBuilder(RecordConverter(ByteArrayConverter(), converter))
    outcome = sink(tmp_path, PARQUET, builder, messages(values), [40])
    assert [len(f["rows"]) for f in outcome.files] == [100, 100, 100]
    assert registry.asked == [7, 9]


def test_fastavro_reads_back_what_the_fake_registry_serves() -> None:
    """The fake registry is the converter's only source of schemas: the converter decodes with it."""
    converter = avro_converter(REGISTRY)
    body = wire(9, EVOLVED, reading(3, note="n"))
    value, schema = converter.convert("t", body)
    assert schema == EVOLVED
    assert value == fastavro.schemaless_reader(io.BytesIO(body[5:]), fastavro.parse_schema(EVOLVED), None)
