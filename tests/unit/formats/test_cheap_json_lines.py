"""The joined JSON text of schemaless JSON values (``Batch.json_lines``) against the per-record path.

STOREAS JSON writes the joined text as it is; STOREAS PARQUET parses it with Arrow into the file's
frozen flat schema (``LineParser``), possibly ahead on the batch's helper thread. Every test sinks
the same Kafka messages through batches with that form and through ``cheap_forms=False`` batches
(see :mod:`tests.unit.formats.sinking`) and compares the files (JSON: byte for byte; PARQUET: the
Arrow schema and the rows, read with pyarrow) and the record errors; and checks that the form was
used where it should be: records converted one by one, block parses (``LineParser.__call__``).
"""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import formats._rows as rows_module
from formats import FormatSettings, get_format
from formats.json_lines_arrow import LineParser
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.converters import JsonConverter, StringConverter
from sink.records.intake import BatchBuilder
from tests.unit.formats.sinking import (
    Outcome,
    assert_same,
    builders,
    forms_seen,
    messages,
    read_back,
    sink,
)

JSON_PLAIN = FormatSettings(format=StoreFormat.JSON)
JSON_GZIP = FormatSettings(format=StoreFormat.JSON, codec="GZIP")
PARQUET = FormatSettings(format=StoreFormat.PARQUET)
FREEZE = 20


def dumps(value: Any, *, ascii_only: bool = True, compact: bool = True) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(value, ensure_ascii=ascii_only, separators=separators).encode("utf-8", "surrogatepass")


def both(
    tmp: Path,
    settings_: FormatSettings,
    values: list[bytes | None],
    poll_sizes: tuple[int, ...] | list[int] = (),
    rooms: tuple[int, ...] | list[int] = (),
    keys: list[bytes | None] | None = None,
    string_keys: bool = False,
) -> tuple[Outcome, Outcome]:
    """The per-record run and the cheap run of the same messages (default runtime: values parsed,
    joined text checked)."""
    per_record, cheap = builders(
        lambda: JsonConverter(False), StringConverter if string_keys else _bytes_converter
    )
    items = messages(values, keys)
    return (
        sink(tmp / "per-record", settings_, per_record, items, poll_sizes, rooms),
        sink(tmp / "cheap", settings_, cheap, items, poll_sizes, rooms),
    )


def _bytes_converter() -> Any:
    from sink.records.converters import ByteArrayConverter

    return ByteArrayConverter()


@pytest.fixture
def small_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schemaless Parquet file fixes its schema after 1,000 rows; 20 keeps examples small."""
    monkeypatch.setattr(rows_module, "FREEZE_ROWS", FREEZE)


@pytest.fixture
def arrow_parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[str, int]]]:
    """Every parse of a block of JSON lines (``LineParser.__call__``: the C parser, else Arrow's
    reader): (thread name, bytes parsed)."""
    calls: list[tuple[str, int]] = []
    parse = LineParser.__call__

    def spy(self: LineParser, data: bytes) -> Any:
        calls.append((threading.current_thread().name, len(data)))
        return parse(self, data)

    monkeypatch.setattr(LineParser, "__call__", spy)
    yield calls


# ------------------------------------------------------------------------------- STOREAS JSON


@pytest.mark.parametrize("settings_", [JSON_PLAIN, JSON_GZIP], ids=["plain", "gzip"])
def test_json_file_from_cheap_batches_is_byte_identical(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings_: FormatSettings
) -> None:
    values: list[bytes | None] = [
        dumps({"id": i, "s": 'é\u2028😀"\\' * (i % 3), "n": None, "f": i / 7}, ascii_only=i % 2 == 0)
        for i in range(240)
    ]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, settings_, values, poll_sizes=[53, 1, 100, 2], rooms=[7, 64])
    assert_same(per_record, cheap)
    assert seen.json_served == 240
    assert seen.converted == 240  # the per-record run's; the cheap run converted none on its own
    (only,) = cheap.files
    data = gzip.decompress(only["bytes"]) if settings_.codec == "GZIP" else only["bytes"]
    assert data == b"\n".join(v for v in values if v is not None) + b"\n"


@pytest.mark.parametrize("settings_", [JSON_PLAIN, JSON_GZIP], ids=["plain", "gzip"])
def test_json_cheap_batches_between_per_record_records_keep_the_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, settings_: FormatSettings
) -> None:
    values: list[bytes | None] = [dumps({"id": i}) for i in range(60)]
    values[10] = None  # tombstone: a "null" line
    values[20] = json.dumps({"id": 20, "pretty": [1, 2]}, indent=2).encode()  # re-encoded on one line
    values[30] = b"not json"  # the converter rejects it
    values[40] = b"[1, 2]"  # an array: written as it is
    values[50] = b'{"id": 50, "broken": }'  # framed but malformed: the converter rejects it
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, settings_, values, poll_sizes=[4, 7, 30])
    assert_same(per_record, cheap)
    assert cheap.errors == [
        (30, "VALUE_CONVERTER", "ConversionError"), (50, "VALUE_CONVERTER", "ConversionError")
    ]
    assert 0 < seen.json_served < 60
    lines = cheap.files[0]["lines"]
    assert len(lines) == 58
    assert lines[10] is None and lines[20] == {"id": 20, "pretty": [1, 2]} and lines[39] == [1, 2]
    assert [line["id"] for line in lines if isinstance(line, dict)] == [
        i for i in range(60) if i not in (10, 30, 40, 50)
    ]


def test_json_with_the_envelope_does_not_use_the_joined_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    envelope = EnvelopeFields(key=True, value=True, headers=True, metadata=True)
    settings_ = FormatSettings(format=StoreFormat.JSON, envelope=envelope)
    values: list[bytes | None] = [dumps({"id": i, "s": "é"}) for i in range(50)]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, settings_, values, poll_sizes=[25])
    assert_same(per_record, cheap)
    assert seen.json_asked == 0
    assert seen.converted == 2 * 50  # both runs: every record, one by one
    lines = cheap.files[0]["lines"]
    assert [line["value"] for line in lines] == [{"id": i, "s": "é"} for i in range(50)]
    assert lines[3]["metadata"]["offset"] == 3


@pytest.mark.parametrize(
    "odd",
    [
        b'{"a":1,\r"b":2}',  # a carriage return between tokens: valid JSON
        b'{"a":1,\n"b":2}',  # a line break between tokens
        b'{"a":1,"b":2}\r\n',  # a trailing CRLF
        b'{"a":1,"b":2}\n',  # a trailing newline
    ],
    ids=["cr", "lf", "trailing-crlf", "trailing-lf"],
)
def test_a_value_with_a_line_break_goes_per_record_and_stays_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: bytes
) -> None:
    values: list[bytes | None] = [dumps({"a": i}) for i in range(9)]
    values[4] = odd
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, JSON_PLAIN, values)
    assert_same(per_record, cheap)
    assert cheap.errors == []
    assert seen.json_served == 8 and seen.converted == 1 + 9  # the cheap run converted the odd one only
    data = cheap.files[0]["bytes"]
    assert data.count(b"\n") == 9 and b"\r" not in data
    assert cheap.files[0]["lines"][4] == {"a": 1, "b": 2}


def test_connect_json_validate_false_writes_malformed_objects_through(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``connect.json.validate=false`` (documented opt-in): the runtime then neither parses one-line
    ``{...}`` values for STOREAS JSON nor checks the joined text, so a malformed object is written
    as it came, by both paths. The default parses and checks: the record goes to the error path."""
    values: list[bytes | None] = [dumps({"a": i}) for i in range(10)]
    values[6] = b'{"a":1,}'
    items = messages(values)

    per_record, unchecked = builders(lambda: JsonConverter(False), check_json=False, parse_value=False)
    with forms_seen(monkeypatch) as seen:
        reference = sink(tmp_path / "u-per-record", JSON_PLAIN, per_record, items)
        outcome = sink(tmp_path / "u-cheap", JSON_PLAIN, unchecked, items)
    assert_same(reference, outcome)
    assert outcome.errors == [] and seen.json_served == 10
    assert outcome.files[0]["bytes"] == b"\n".join(v for v in values if v is not None) + b"\n"
    assert outcome.files[0]["lines"][6] == ("not JSON", b'{"a":1,}')

    per_record, checked = builders(lambda: JsonConverter(False))
    with forms_seen(monkeypatch) as seen:
        reference = sink(tmp_path / "c-per-record", JSON_PLAIN, per_record, items)
        outcome = sink(tmp_path / "c-cheap", JSON_PLAIN, checked, items)
    assert_same(reference, outcome)
    assert outcome.errors == [(6, "VALUE_CONVERTER", "ConversionError")]
    assert seen.json_served == 0 + 3  # the batch failed the check; after the error, the rest of it
    assert [line["a"] for line in outcome.files[0]["lines"]] == [0, 1, 2, 3, 4, 5, 7, 8, 9]


def test_unchecked_text_is_only_written_through_when_asked(tmp_path: Path) -> None:
    """The check is what keeps a malformed object out of the cheap form: with it off and the
    converter still parsing (not a runtime combination), the two paths differ, as documented."""
    values: list[bytes | None] = [b'{"a":0}', b'{"a":1,}', b'{"a":2}']
    items = messages(values)
    unchecked = BatchBuilder(_converter(), check_json=False)
    checked = BatchBuilder(_converter())
    outcome = sink(tmp_path / "unchecked", JSON_PLAIN, unchecked, items)
    assert outcome.errors == [] and outcome.files[0]["bytes"] == b'{"a":0}\n{"a":1,}\n{"a":2}\n'
    outcome = sink(tmp_path / "checked", JSON_PLAIN, checked, items)
    assert outcome.errors == [(1, "VALUE_CONVERTER", "ConversionError")]
    assert outcome.files[0]["bytes"] == b'{"a":0}\n{"a":2}\n'


def _converter() -> Any:
    from sink.records.converters import ByteArrayConverter, RecordConverter

    return RecordConverter(ByteArrayConverter(), JsonConverter(False))


_unicode = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),
        st.sampled_from(['"', "\\", "/", "\u2028", "\x00", "\x1f", "\x7f", "\ufeff", "😀"]),
    ),
    max_size=6,
)
_json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True, allow_infinity=True), _unicode
)
_json_objects = st.dictionaries(_unicode, _json_scalars | st.lists(_json_scalars, max_size=2), max_size=4)
_json_texts = st.one_of(
    st.builds(dumps, _json_objects, ascii_only=st.booleans(), compact=st.booleans()),
    st.builds(lambda v: json.dumps(v, indent=1).encode(), _json_objects),  # multi-line
    st.sampled_from(
        [
            None,
            b"not json",
            b"[1,2]",
            b"17",
            b'"s"',
            b'{"a": }',
            b"{}",
            b'{"a":1,\t"b":2}',
            b'{"a":-NaN}',
            b'{"a":NaN}',
            b'{"a":Infinity}',
            b'{"s":"\xff"}',
            b'{"s":"\\ud800"}',
            b'{"a":1,\r"b":2}',
            b'{"a":1,}',
            b'{"a":1},{"b":2}',
            b'{"a":1} {"b":2}',
            b'{"a":1}{"b":2}',
            b'{"a":1}\n',
        ]
    ),
)
_keys = st.one_of(
    st.none(), st.binary(max_size=3), st.sampled_from([b"\xff", b"\xc3", b"\xa9", "é".encode()])
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_json_texts, min_size=1, max_size=40),
    keys=st.data(),
    poll_sizes=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    rooms=st.lists(st.integers(1, 12), max_size=3),
    gzipped=st.booleans(),
    string_keys=st.booleans(),
)
def test_json_cheap_batches_write_what_the_per_record_path_writes(
    tmp_path_factory: pytest.TempPathFactory,
    values: list[bytes | None],
    keys: st.DataObject,
    poll_sizes: list[int],
    rooms: list[int],
    gzipped: bool,
    string_keys: bool,
) -> None:
    """Any stream, any polls and flush.count slices, byte or text keys (text keys that are not
    UTF-8, or halves of one character, are KEY_CONVERTER errors on both paths)."""
    key_list = keys.draw(st.lists(_keys, min_size=len(values), max_size=len(values)))
    per_record, cheap = both(
        tmp_path_factory.mktemp("json"), JSON_GZIP if gzipped else JSON_PLAIN, values, poll_sizes, rooms,
        key_list, string_keys,
    )
    event("errors" if cheap.errors else "no errors")
    assert_same(per_record, cheap)


# ---------------------------------------------------------------------------- STOREAS PARQUET


def base_row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "amount": i + 0.25, "ok": i % 2 == 0, "whole": float(i)}


def test_parquet_serves_a_long_run_from_the_joined_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, arrow_parses: list[tuple[str, int]]
) -> None:
    """Once the rows held and the batch at hand reach 1,000, the rows held fix the schema when
    the rest of the batch parses into theirs; every later record comes from one Arrow parse per
    consumed batch: none is converted on its own."""
    values: list[bytes | None] = [dumps(base_row(i), ascii_only=i % 3 == 0) for i in range(5000)]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=[500], rooms=[100_000, 64, 7])
    assert_same(per_record, cheap)
    # the per-record run: all; the cheap run: the first poll of 500, then the 64 and 7 records
    # that the rooms gave the next appends of the second poll (500 + 71 held < 1,000), until the
    # rest of that poll (429) takes them to 1,000: it parses into their schema, which is fixed
    assert seen.converted == 5000 + 500 + 64 + 7
    assert seen.json_served >= 4000
    # one parse per consumed batch of 500 from the one that fixed the schema (9), not one per
    # slice the task appends
    sizes = [len(b"\n".join(v for v in values[k : k + 500] if v is not None)) for k in range(500, 5000, 500)]
    assert [size for _, size in arrow_parses] == sizes
    assert len(cheap.files[0]["rows"]) == 5000


def test_parquet_cheap_rows_after_the_real_freeze_match_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = [base_row(i) for i in range(1600)]
    rows[1200] = {**base_row(1200), "id": 2**63 - 1, "name": '😀 \\ " \u2028 é'}
    rows[1201] = {**base_row(1201), "id": -(2**63), "amount": 5e-324, "whole": 7}  # an int in a double column
    rows[1202] = {**base_row(1202), "name": None, "ok": None, "amount": -0.0}
    rows[1203] = {"id": 1203}  # missing fields are nulls
    values: list[bytes | None] = [dumps(r, ascii_only=i % 3 == 0) for i, r in enumerate(rows)]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=[1000, 64, 100, 7, 200])
    assert_same(per_record, cheap)
    # the first record one by one; the other 999 of its poll parse into its schema, which is
    # fixed then; all 600 after the first 1,000 (the odd ones too) came from the joined text
    assert seen.converted == 1600 + 1
    (only,) = cheap.files
    assert only["rows"][1200]["id"] == 2**63 - 1 and only["rows"][1201]["id"] == -(2**63)
    assert only["rows"][1200]["name"] == '😀 \\ " \u2028 é'
    assert only["rows"][1201]["whole"] == ("float", "7.0")
    assert only["rows"][1202]["amount"] == ("float", "-0.0")


def test_parquet_does_not_parse_before_the_schema_is_fixed(
    tmp_path: Path, arrow_parses: list[tuple[str, int]]
) -> None:
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(1003)]
    per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=[999, 1, 3])
    assert_same(per_record, cheap)
    # 999 rows held one by one (with the poll they are short of 1,000); the poll of 1 takes
    # them to 1,000 and is parsed to fix their schema; then the poll of 3
    lines = [v for v in values if v is not None]
    assert [size for _, size in arrow_parses] == [len(lines[999]), len(b"\n".join(lines[1000:]))]


@pytest.mark.parametrize(
    "value",
    [
        {"id": 1, "inner": {"x": 1}},  # nested: not a flat schema
        {"id": 1, "tags": ["a"]},
        {"id": 1, "note": None},  # a column only ever null: its type is not known
    ],
    ids=["nested", "array", "always-null"],
)
def test_parquet_parses_only_files_of_a_flat_inferred_schema(
    tmp_path: Path, small_freeze: None, arrow_parses: list[tuple[str, int]], value: dict[str, Any]
) -> None:
    values: list[bytes | None] = [dumps({**value, "id": i}) for i in range(60)]
    values[40] = dumps({"id": 40, "note": "text"})  # per record: null -> string starts a new file
    per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=[FREEZE, 40])
    assert_same(per_record, cheap)
    # the first file's rows are never parsed; the second file's first row is flat, so the rows
    # after it are tried against its schema (the slice, or the whole poll it is part of) and
    # refused: they go one by one
    lines = [v for v in values if v is not None]
    tried = {len(b"\n".join(lines[41:])), len(b"\n".join(lines[FREEZE:]))}
    assert {size for _, size in arrow_parses} <= tried


@pytest.mark.parametrize("sizes", [[1500], [1, 2, 4, 8, 16, 32, 64, 128, 256, 512], [999, 2, 100]])
def test_parquet_schema_freezes_at_the_same_row_whatever_the_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sizes: list[int]
) -> None:
    """A new field after the 1,000th row rolls the file, in one big batch as in many small ones."""
    rows = [{"id": i, "name": f"n{i}"} for i in range(1500)]
    for i in range(1050, 1500):
        rows[i]["extra"] = i
    values: list[bytes | None] = [dumps(r) for r in rows]
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=sizes, rooms=sizes[::-1])
    assert_same(per_record, cheap)
    assert [len(f["rows"]) for f in cheap.files] == [1050, 450]
    assert [f["schema"].names for f in cheap.files] == [["id", "name"], ["id", "name", "extra"]]
    assert seen.json_served > 0


def test_parquet_small_per_record_appends_before_a_cheap_batch_stay_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, small_freeze: None
) -> None:
    """After the freeze, runs of multi-line values (per record, under 64 rows: buffered, converted
    later) alternate with one-line runs (the joined text): the rows keep Kafka's order."""
    values: list[bytes | None] = []
    for i in range(300):
        row = base_row(i)
        values.append(json.dumps(row, indent=1).encode() if (i // 5) % 2 and i > FREEZE else dumps(row))
    with forms_seen(monkeypatch) as seen:
        per_record, cheap = both(tmp_path, PARQUET, values, poll_sizes=[37, 100])
    assert_same(per_record, cheap)
    assert seen.json_served > 100
    assert [r["id"] for r in cheap.files[0]["rows"]] == list(range(300))


@pytest.mark.parametrize(
    "odd",
    [
        pytest.param(b"\\ud800", id="lone-high-surrogate"),
        pytest.param(b"\\udc00", id="lone-low-surrogate"),
        pytest.param(b"\\ud800\\u0041", id="high-surrogate-then-letter"),
        pytest.param(b"a\xffb", id="invalid-utf8"),
        pytest.param(b"\xed\xa0\x80", id="encoded-surrogate"),
        pytest.param(b"\xc0\xaf", id="overlong-utf8"),
        pytest.param(b"\\ud83d\\ude00", id="surrogate-pair"),
    ],
)
@pytest.mark.parametrize("room", [3, 100], ids=["small-appends", "eager-appends"])
def test_odd_strings_are_decided_as_on_the_per_record_path(tmp_path: Path, odd: bytes, room: int) -> None:
    """A string field holding ``odd`` (escapes or raw bytes as they are in the Kafka value)."""
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(1300)]
    values[1150] = b'{"id":7,"name":"' + odd + b'","amount":1.5,"ok":true,"whole":1.0}'
    for settings_ in (JSON_PLAIN, PARQUET):
        per_record, cheap = both(tmp_path / settings_.format.value, settings_, values, [1000, 300], [room])
        assert_same(per_record, cheap)


def test_minus_nan_is_refused_as_the_per_record_path_refuses_it(tmp_path: Path) -> None:
    """``-NaN`` is not JSON for ``json.loads``; Arrow reads it as NaN. The cheap form must not
    write what the converter rejects."""
    odd = b'{"id":7,"name":"x","amount":-NaN,"ok":true,"whole":1.0}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(odd)
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(1100)]
    values[1050] = odd
    for settings_ in (JSON_PLAIN, PARQUET):
        per_record, cheap = both(tmp_path / settings_.format.value, settings_, values, [1000, 100])
        assert per_record.errors == [(1050, "VALUE_CONVERTER", "ConversionError")]
        assert_same(per_record, cheap)


@pytest.mark.parametrize(
    ("text", "written"),
    [
        pytest.param(b'"amount":NaN', "nan", id="nan"),
        pytest.param(b'"amount":Infinity', "inf", id="infinity"),
        pytest.param(b'"amount":-Infinity', "-inf", id="minus-infinity"),
    ],
)
def test_non_finite_doubles_are_written_as_the_per_record_path_writes_them(
    tmp_path: Path, text: bytes, written: str
) -> None:
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(1100)]
    values[1050] = b'{"id":7,"name":"x",' + text + b',"ok":true,"whole":1.0}'
    per_record, cheap = both(tmp_path, PARQUET, values, [1000, 100])
    assert_same(per_record, cheap)
    assert cheap.errors == [] and cheap.files[0]["rows"][1050]["amount"] == ("float", written)


@pytest.mark.parametrize(
    ("row", "rounded"),
    [
        pytest.param({"whole": 2**53}, True, id="2**53-exact"),
        pytest.param({"whole": 2**53 + 1}, True, id="2**53+1"),
        pytest.param({"whole": -(2**53) - 1}, True, id="-(2**53+1)"),
        pytest.param({"whole": 2**60 + 1}, True, id="2**60+1"),
        pytest.param({"whole": 10**30 + 1}, False, id="10**30+1"),  # no Avro type for it
        pytest.param({"id": 2**63}, False, id="beyond-int64"),
        pytest.param({"id": -(2**63) - 1}, False, id="below-int64"),
    ],
)
def test_big_integers_are_decided_as_on_the_per_record_path(
    tmp_path: Path, row: dict[str, Any], rounded: bool
) -> None:
    """An integer beyond 2**53 in a double column is rounded (as fastavro and Spark round it);
    one beyond int64 is the record's error (no Avro type holds it), whatever its column."""
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(1200)]
    values[1100] = dumps({**base_row(1100), **row})
    per_record, cheap = both(tmp_path, PARQUET, values, [1000, 100])
    assert_same(per_record, cheap)
    ((name, value),) = row.items()
    if rounded:
        assert cheap.errors == []
        assert cheap.files[0]["rows"][1100][name] == ("float", repr(float(value)))
    else:
        assert cheap.errors == [(1100, "TASK_PUT", "RecordFormatError")]


# ------------------------------------------------------------------- any stream into PARQUET

_KINDS = ("long", "double", "string", "boolean", "ints-in-double")


def _field_value(kind: str) -> st.SearchStrategy[Any]:
    return {
        "long": st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**53 + 1]),
        "double": st.floats(-1e15, 1e15) | st.sampled_from([-0.0, 5e-324, 1e-300, 0.1, 2.0**52 + 0.5]),
        "string": _unicode,
        "boolean": st.booleans(),
        "ints-in-double": st.integers(-(10**15), 10**15) | st.floats(-1e15, 1e15),
    }[kind]


_odd_values = st.one_of(
    st.integers(2**63, 2**64) | st.integers(-(2**64), -(2**63) - 1),  # beyond int64
    st.sampled_from([2**53 + 1, -(2**53) - 1, 2**53, 10**20]),  # in a double column: rounded
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([1e308, -(2.0**60)]),
    _unicode,
    st.just([1, 2]),
    st.just({"nested": 1}),
)
_odd_texts = st.sampled_from(
    [
        b'{"id":1,"name":"\\ud800"}',
        b'{"id":1,"name":"\\udc00"}',
        b'{"id":1,"name":"\\ud800\\u0041"}',
        b'{"id":1,"name":"\\ud83d\\ude00"}',
        b'{"id":1,"name":"\xff"}',
        b'{"id":1,"name":"\xed\xa0\x80"}',
        b'{"id":1,"name":"a\tb"}',
        b'{"id":1,"amount":NaN}',
        b'{"id":1,"amount":-NaN}',
        b'{"id":1,"amount":Infinity}',
        b'{"id":1,"amount":-Infinity}',
        b'{"id":1,"amount":1e400}',
        b'{"id":1,"amount":1E2}',
        b'{"id":1,"amount":9007199254740993}',
        b'{"id":1,"id":2}',
        b'{"id":1,"i\\u0064":2}',
        b'{"\\u0069d":7}',
        b'{"id":01}',
        b'{"id":1}{"id":2}',
        b'{"id":1},{"id":2}',
        b'{"id":1} {"id":2}',
        b'{"id":1,}',
        b"{}",
        b'{"id":"1"}',
        b'{"id":1.0}',
        b'{"id":-0}',
    ]
)


@st.composite
def parquet_stream(draw: st.DrawFn) -> tuple[list[bytes | None], list[int], list[int]]:
    """FREEZE conforming rows (every field non-null at least once), then anything."""
    kinds = {"id": "long", "name": "string", "amount": "double"}
    for i in range(draw(st.integers(0, 3))):
        kinds[f"f{i}"] = draw(st.sampled_from(_KINDS))
    names = list(kinds)

    def conforming(full: bool) -> st.SearchStrategy[dict[str, Any]]:
        values = {n: _field_value(k) if full else st.none() | _field_value(k) for n, k in kinds.items()}
        return st.fixed_dictionaries(values)

    first = [draw(conforming(True))]
    first += draw(st.lists(conforming(False), min_size=FREEZE - 1, max_size=FREEZE - 1))
    for name, kind in kinds.items():
        if kind == "ints-in-double":  # one float so that the column is a double
            first[0][name] = 0.5
    later: list[Any] = []
    for _ in range(draw(st.integers(0, 80))):
        how = draw(
            st.sampled_from([*["same"] * 24, "missing", "null", "extra", "retyped", "odd-text", "other"])
        )
        row = draw(conforming(True))
        name = draw(st.sampled_from(names))
        if how == "missing":
            del row[name]
        elif how == "null":
            row[name] = None
        elif how == "extra":
            row[draw(st.sampled_from(["extra", "Id", "ID"]))] = draw(_odd_values)
        elif how == "retyped":
            row[name] = draw(_odd_values)
        elif how == "odd-text":
            later.append(draw(_odd_texts))
            continue
        elif how == "other":
            later.append(draw(st.sampled_from([None, b"not json", b"[1]", b"{\n}", b'{"id":1}\r'])))
            continue
        later.append(row)
    texts: list[bytes | None] = []
    for row in first + later:
        if isinstance(row, dict):
            texts.append(dumps(row, ascii_only=draw(st.booleans()), compact=draw(st.booleans())))
        else:
            texts.append(row)
    polls = draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    rooms = draw(st.lists(st.integers(1, 70), max_size=3))
    return texts, polls, rooms


@settings(
    max_examples=60,  # each example writes two Parquet streams; the odd cases are also pinned one by one
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.data_too_large
    ],
)
@given(case=parquet_stream())
def test_parquet_cheap_batches_write_what_the_per_record_path_writes(
    tmp_path_factory: pytest.TempPathFactory, small_freeze: None,
    case: tuple[list[bytes | None], list[int], list[int]],
) -> None:
    values, polls, rooms = case
    per_record, cheap = both(tmp_path_factory.mktemp("pq"), PARQUET, values, polls, rooms)
    event("errors" if cheap.errors else "no errors")
    event(f"{len(cheap.files)} files")
    assert_same(per_record, cheap)


# ------------------------------------------------------------------------ parsing ahead


def _prefetched_run(
    tmp: Path, values: list[bytes | None], polls: list[int], executor: ThreadPoolExecutor | None
) -> Outcome:
    from sink.records.converters import ByteArrayConverter, RecordConverter

    builder = BatchBuilder(RecordConverter(ByteArrayConverter(), JsonConverter(False)), executor=executor)
    return sink(tmp, PARQUET, builder, messages(values), polls, prefetch=True)


def test_parquet_parses_ahead_on_the_helper_thread_and_uses_that_parse(
    tmp_path: Path, small_freeze: None, arrow_parses: list[tuple[str, int]]
) -> None:
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(400)]
    values[250] = dumps({**base_row(250), "amount": "text"})  # per record: a new file
    alone = _prefetched_run(tmp_path / "alone", values, [FREEZE, 50, 7, 100], None)
    without = [name for name, _ in arrow_parses]
    arrow_parses.clear()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        ahead = _prefetched_run(tmp_path / "ahead", values, [FREEZE, 50, 7, 100], executor)
    assert_same(alone, ahead)
    assert len(ahead.files) == 3  # double -> string -> double
    assert without and all(not name.startswith("ahead") for name in without)
    # parses ran ahead, and append used them (the memo) instead of parsing again
    helper = [name for name, _ in arrow_parses if name.startswith("ahead")]
    assert len(helper) >= 3 and len(arrow_parses) == len(without)


def test_a_parse_ahead_for_a_file_closed_in_between_is_harmless(
    tmp_path: Path, small_freeze: None, arrow_parses: list[tuple[str, int]]
) -> None:
    """The batch was prefetched for one file, which then closed (flush, rebalance): the next file,
    whose schema came out the same, takes that parse (parses are memoised by schema), and the
    result is the per-record file."""
    values: list[bytes | None] = [dumps(base_row(i)) for i in range(FREEZE + 30)]
    later: list[bytes | None] = [dumps(base_row(i)) for i in range(100, 140)]
    helper = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead")
    builder = BatchBuilder(_converter(), executor=helper)
    reference = BatchBuilder(_converter(), cheap_forms=False)
    fmt = get_format(PARQUET)
    first = fmt.open(tmp_path / "first.parquet")
    (head,) = builder.build("t", 0, messages(values))
    assert first.append(head) == len(values)
    (batch,) = builder.build("t", 0, messages(later, first_offset=len(values)))
    assert first.prefetch(batch)
    first.close()  # the prefetched parse belongs to a file that is gone
    second = fmt.open(tmp_path / "second.parquet")
    for part in builder.build("t", 0, messages(values)):
        assert second.append(part) == len(part)
    assert second.append(batch) == len(batch)
    second.close()
    expected = fmt.open(tmp_path / "expected.parquet")
    for part in reference.build("t", 0, messages(values + later)):
        assert expected.append(part) == len(part)
    expected.close()
    helper.shutdown(wait=True)
    second_file = read_back(tmp_path / "second.parquet", PARQUET)
    assert second_file == read_back(tmp_path / "expected.parquet", PARQUET)
    # the first file's own parse and its parse ahead; the second file's parse of its head, on
    # this thread; the prefetched batch is not parsed again
    assert sorted(name.startswith("ahead") for name, _ in arrow_parses) == [False, False, True]
