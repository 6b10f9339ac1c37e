"""FormatWriter.write_lines (the JSON-lines fast path) against the per-record ``write`` path.

Every test sinks the same Kafka values twice through a format writer, the way the sink core does
for one partition with ``errors.tolerance=all``: values go through the real RecordConverter, a
record the converter or the writer rejects is skipped, a short ``write`` closes the file and opens
the next one. The *per-record* run only ever calls ``write``; the *lines* run offers each chunk of
values (after a prefix written with ``write``) to ``write_lines`` first, exactly as the runtime
builds blocks from raw messages, and falls back to the per-record calls for that same chunk when
``json_lines`` or the writer refuses it. Both runs make the same sequence of ``write`` calls
otherwise, so any difference in the files is the fast path's. Files are read back with
independent readers (``json``/``gzip``, ``pyarrow.parquet``).

A refused ``write_lines`` must leave no trace: the writer's record count, size and staging file
are checked after every refusal, and the final files must still match the per-record run.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import formats.parquet_format as parquet_format
from formats import FormatError, FormatSettings, RecordFormatError, get_format
from formats.base import FormatWriter
from kcql.model import EnvelopeFields, StoreFormat
from sink.records.converters import ByteArrayConverter, ConversionError, JsonConverter, RecordConverter
from sink.records.json_lines import json_lines
from sink.records.record import SinkRecord

# ------------------------------------------------------------------------------------- the driver


def converter_for(fmt: StoreFormat) -> RecordConverter:
    """The runtime's converter pair: STOREAS JSON without envelope leaves one-line texts unparsed."""
    parse = fmt is not StoreFormat.JSON
    return RecordConverter(ByteArrayConverter(), JsonConverter(False), parse_value=lambda _topic: parse)


def kafka_messages(values: Sequence[bytes | None]) -> list[Message]:
    return [
        Message(topic="t", partition=0, offset=i, key=None, value=v, timestamp=(1, 1_000 + i))
        for i, v in enumerate(values)
    ]


@dataclass
class Outcome:
    """What one run left behind: each closed file's content, skipped offsets, lines accepted."""

    files: list[Any] = field(default_factory=list)
    skipped: list[int] = field(default_factory=list)
    failed: str | None = None
    """Set when a writer raised FormatError (not a record error): the runtime stops the task."""
    lines_taken: int = 0


class PartitionSink:
    """One partition's rolling files, written like the sink core writes them."""

    def __init__(self, directory: Path, settings: FormatSettings) -> None:
        self.directory = directory
        self.format = get_format(settings)
        self.settings = settings
        self.converter = converter_for(settings.format)
        self.outcome = Outcome()
        self.paths: list[Path] = []
        self.writer: FormatWriter | None = None

    def _open(self) -> FormatWriter:
        if self.writer is None:
            self.paths.append(self.directory / f"{len(self.paths):03d}.{self.format.extension}")
            self.writer = self.format.open(self.paths[-1])
        return self.writer

    def _roll(self) -> None:
        assert self.writer is not None
        writer, self.writer = self.writer, None
        writer.close()
        self.outcome.files.append(read_back(self.paths[-1], self.settings))

    def put(self, messages: Sequence[Message]) -> None:
        """The per-record path: convert (skipping what fails), then ``write`` with the usual policy."""
        records: list[SinkRecord] = []
        for msg in messages:
            try:
                records.append(self.converter.convert(msg))
            except ConversionError:
                self.outcome.skipped.append(msg.offset() or 0)
        while records:
            writer = self._open()
            try:
                written = writer.write(records)
            except RecordFormatError as exc:
                # the runtime skips the failed record when it is one it just put (found by identity)
                # and otherwise stops the task, as for any other error of the file
                index = next((i for i, r in enumerate(records) if r is exc.record), None)
                if index is None:
                    raise
                self.outcome.skipped.append(records[index].offset)
                records = records[index + 1 :]
                continue
            records = records[written:]
            if records:  # a short write: the next record starts a new file
                assert writer.record_count > 0, "a writer must accept the first record of a file"
                self._roll()

    def put_lines(self, messages: Sequence[Message]) -> bool:
        """The fast path for one chunk: a block of the raw values, or False when it is refused."""
        block = json_lines("t", 0, messages, check_keys=False)
        if block is None:
            return False
        writer = self._open()
        before = (writer.record_count, writer.bytes_written, self.paths[-1].read_bytes())
        if writer.write_lines(block.data, len(block)):
            assert writer.record_count == before[0] + len(block)
            self.outcome.lines_taken += len(block)
            return True
        after = (writer.record_count, writer.bytes_written, self.paths[-1].read_bytes())
        assert after == before, "a refused write_lines changed the writer"
        return False

    def finish(self) -> Outcome:
        if self.writer is not None:
            self._roll()
        return self.outcome


def sink(
    directory: Path,
    settings: FormatSettings,
    values: Sequence[bytes | None],
    prefix: int,
    chunks: Sequence[int],
    lines: bool,
) -> Outcome:
    """Sink ``values``: ``values[:prefix]`` in one per-record call, the rest in chunks of the given
    sizes (cycled), each offered to ``write_lines`` first when ``lines`` is set."""
    directory.mkdir(parents=True, exist_ok=True)
    run = PartitionSink(directory, settings)
    messages = kafka_messages(values)
    try:
        if prefix:
            run.put(messages[:prefix])
        index, turn = prefix, 0
        while index < len(messages):
            size = chunks[turn % len(chunks)] if chunks else len(messages)
            chunk = messages[index : index + size]
            index, turn = index + len(chunk), turn + 1
            if lines and run.put_lines(chunk):
                continue
            run.put(chunk)
        return run.finish()
    except FormatError as exc:
        # a record accepted earlier cannot be stored (raised by a later call or at close): the core
        # discards the file and the runtime stops the task
        record = getattr(exc, "record", None)
        run.outcome.failed = f"{type(exc).__name__} at {record.offset if record else None}"
        return run.outcome


def read_back(path: Path, settings: FormatSettings) -> Any:
    data = path.read_bytes()
    if settings.format is StoreFormat.JSON:
        text = gzip.decompress(data) if settings.codec == "GZIP" else data
        return {"bytes": data, "lines": text.split(b"\n")}
    table = pq.read_table(path)
    return {"schema": table.schema, "rows": [normalized(row) for row in table.to_pylist()]}


def normalized(row: dict[str, Any]) -> dict[str, Any]:
    """Floats compared by repr: NaN equals NaN, -0.0 differs from 0.0, ints stay ints."""
    return {k: ("float", repr(v)) if isinstance(v, float) else v for k, v in row.items()}


def both(
    tmp: Path, settings: FormatSettings, values: Sequence[bytes | None], prefix: int, chunks: Sequence[int]
) -> tuple[Outcome, Outcome]:
    per_record = sink(tmp / "per-record", settings, values, prefix, chunks, lines=False)
    with_lines = sink(tmp / "lines", settings, values, prefix, chunks, lines=True)
    return per_record, with_lines


def assert_same(per_record: Outcome, with_lines: Outcome) -> None:
    assert with_lines.failed == per_record.failed, "one run failed where the other did not"
    if per_record.failed is None:
        # once the task stops, the open file is discarded and replayed: only the files committed
        # before count, not which records had been skipped in it (the runs may fail at different calls)
        assert with_lines.skipped == per_record.skipped, "different records were skipped"
    assert len(with_lines.files) == len(per_record.files), "the files were split differently"
    for index, (a, b) in enumerate(zip(per_record.files, with_lines.files, strict=True)):
        if "schema" in a:
            assert b["schema"].equals(a["schema"], check_metadata=True), f"file {index}: schema differs"
        assert b == a, f"file {index} differs"


def dumps(value: Any, *, ascii_only: bool = True, compact: bool = True) -> bytes:
    separators = (",", ":") if compact else (", ", ": ")
    return json.dumps(value, ensure_ascii=ascii_only, separators=separators).encode("utf-8", "surrogatepass")


# ------------------------------------------------------------------------------- JSON → STOREAS JSON

JSON_PLAIN = FormatSettings(format=StoreFormat.JSON)
JSON_GZIP = FormatSettings(format=StoreFormat.JSON, codec="GZIP")


@pytest.mark.parametrize("settings_", [JSON_PLAIN, JSON_GZIP], ids=["plain", "gzip"])
def test_json_file_written_with_lines_is_byte_identical(tmp_path: Path, settings_: FormatSettings) -> None:
    values = [
        dumps({"id": i, "s": 'é\u2028😀"\\' * (i % 3), "n": None, "f": i / 7}, ascii_only=i % 2 == 0)
        for i in range(240)
    ]
    per_record, with_lines = both(tmp_path, settings_, values, prefix=7, chunks=[53, 1, 100, 2])
    assert with_lines.lines_taken == 240 - 7
    assert_same(per_record, with_lines)
    (only,) = with_lines.files
    assert only["lines"][-1] == b""  # newline-terminated
    assert [json.loads(line) for line in only["lines"][:-1]] == [json.loads(v) for v in values]
    if settings_.codec == "GZIP":
        assert gzip.decompress(only["bytes"]) == b"\n".join(values) + b"\n"
    else:
        assert only["bytes"] == b"\n".join(values) + b"\n"


@pytest.mark.parametrize("settings_", [JSON_PLAIN, JSON_GZIP], ids=["plain", "gzip"])
def test_json_lines_after_per_record_fallbacks_keep_the_order(
    tmp_path: Path, settings_: FormatSettings
) -> None:
    values: list[bytes | None] = [dumps({"id": i}) for i in range(60)]
    values[10] = None  # tombstone: a "null" line on the per-record path
    values[20] = json.dumps({"id": 20, "pretty": [1, 2]}, indent=2).encode()  # re-encoded on one line
    values[30] = b"not json"  # the converter rejects it: skipped
    values[40] = b"[1, 2]"  # an array passes through as it is
    values[50] = b'{"id": 50, "broken": }'  # framed: passes through unparsed on both paths
    per_record, with_lines = both(tmp_path, settings_, values, prefix=0, chunks=[4, 7])
    assert_same(per_record, with_lines)
    assert with_lines.skipped == [30]
    assert 0 < with_lines.lines_taken < 60
    lines = with_lines.files[0]["lines"][:-1]
    assert lines[10] == b"null" and json.loads(lines[20]) == {"id": 20, "pretty": [1, 2]}
    assert lines[39] == b"[1, 2]" and lines[49] == b'{"id": 50, "broken": }'


def test_json_with_envelope_refuses_lines_and_writes_nothing(tmp_path: Path) -> None:
    envelope = EnvelopeFields(key=True, value=True, headers=True, metadata=True)
    writer = get_format(FormatSettings(format=StoreFormat.JSON, envelope=envelope)).open(tmp_path / "e.json")
    assert not writer.write_lines(b'{"a":1}\n{"a":2}', 2)
    assert (writer.record_count, writer.bytes_written) == (0, 0)
    writer.abort()


_unicode = st.text(
    alphabet=st.one_of(
        st.characters(codec="utf-8"),  # any scalar value, astral planes (surrogate pairs) included
        st.sampled_from(['"', "\\", "/", "\u2028", "\x00", "\x1f", "\x7f", "\ufeff", "😀"]),
    ),
    max_size=6,
)
_json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    _unicode,
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
            b'{"a": }',  # framed but malformed: written through unparsed on both paths
            b"{}",
            b'{"a":1,\t"b":2}',
            b'{"a":-NaN}',
            b'{"s":"\xff"}',
            b'{"s":"\\ud800"}',
            b'{"a":1,\r"b":2}',
        ]
    ),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    values=st.lists(_json_texts, min_size=1, max_size=40),
    prefix=st.integers(0, 5),
    chunks=st.lists(st.integers(1, 12), min_size=1, max_size=4),
    gzipped=st.booleans(),
)
def test_json_lines_write_what_the_per_record_path_writes(tmp_path_factory, values, prefix, chunks, gzipped):
    settings_ = JSON_GZIP if gzipped else JSON_PLAIN
    per_record, with_lines = both(tmp_path_factory.mktemp("json"), settings_, values, prefix, chunks)
    event("lines taken" if with_lines.lines_taken else "no lines taken")
    assert_same(per_record, with_lines)


def test_per_record_json_writes_a_one_line_value_with_a_carriage_return(tmp_path: Path) -> None:
    """Not the fast path (json_lines refuses ``\\r``), but what it falls back to.

    ``{"a":1,\\r"b":2}`` is valid JSON (CR is insignificant whitespace), but a JSON-lines file
    cannot hold the raw text, so the converter must parse it (``_passes_through`` excludes ``\\r``
    as well as ``\\n``) and the writer re-encodes it on one line. Before that fix the record was
    rejected as a byte array: skipped (errors.tolerance=all) or the task stopped (none).
    """
    value = b'{"a":1,\r"b":2}'
    assert json.loads(value) == {"a": 1, "b": 2}
    outcome = sink(tmp_path / "cr", JSON_PLAIN, [b'{"a":0}', value], prefix=0, chunks=[1], lines=True)
    assert outcome.skipped == [], "a valid JSON value was rejected by the per-record JSON path"
    assert [json.loads(line) for line in outcome.files[0]["lines"][:-1]] == [{"a": 0}, {"a": 1, "b": 2}]


# ---------------------------------------------------------------------------- JSON → STOREAS PARQUET

PARQUET = FormatSettings(format=StoreFormat.PARQUET)
FREEZE = 20


@pytest.fixture
def small_freeze(monkeypatch: pytest.MonkeyPatch) -> None:
    """A schemaless Parquet file fixes its schema after 1,000 rows; 20 keeps examples small."""
    monkeypatch.setattr(parquet_format, "_FREEZE_ROWS", FREEZE)


def base_row(i: int) -> dict[str, Any]:
    return {"id": i, "name": f"n{i}", "amount": i + 0.25, "ok": i % 2 == 0, "whole": float(i)}


def test_parquet_blocks_after_the_real_freeze_match_per_record(tmp_path: Path) -> None:
    rows = [base_row(i) for i in range(1600)]
    rows[1200] = {**base_row(1200), "id": 2**63 - 1, "name": '😀 \\ " \u2028 é'}
    # "whole" is a double column: an int there is stored as a double
    # (NaN/Infinity are left to the per-record path: a block holding one is refused, see below)
    rows[1201] = {**base_row(1201), "id": -(2**63), "amount": 5e-324, "whole": 7}
    rows[1202] = {**base_row(1202), "name": None, "ok": None, "amount": -0.0}
    rows[1203] = {"id": 1203}  # missing fields are nulls
    values = [dumps(r, ascii_only=i % 3 == 0) for i, r in enumerate(rows)]
    per_record, with_lines = both(tmp_path, PARQUET, values, prefix=1000, chunks=[64, 100, 7, 200])
    assert with_lines.lines_taken == 600  # all of it after the freeze
    assert_same(per_record, with_lines)
    (only,) = with_lines.files
    assert only["rows"][1200]["id"] == 2**63 - 1 and only["rows"][1201]["id"] == -(2**63)
    assert only["rows"][1200]["name"] == '😀 \\ " \u2028 é'
    assert only["rows"][1201]["whole"] == ("float", "7.0")
    assert only["rows"][1202]["amount"] == ("float", "-0.0")


def test_parquet_refuses_lines_before_the_schema_is_fixed(tmp_path: Path) -> None:
    writer = get_format(PARQUET).open(tmp_path / "x.parquet")
    good = dumps(base_row(0))
    assert not writer.write_lines(good, 1)
    converter = converter_for(StoreFormat.PARQUET)
    writer.write([converter.convert(m) for m in kafka_messages([good] * 999)])
    assert not writer.write_lines(good, 1) and writer.record_count == 999  # 999 rows: not yet
    writer.write([converter.convert(m) for m in kafka_messages([good])])
    assert writer.write_lines(b"\n".join([good] * 3), 3) and writer.record_count == 1003
    writer.close()
    assert pq.read_table(tmp_path / "x.parquet").num_rows == 1003


_KINDS = ("long", "double", "string", "boolean", "ints-in-double")


def _field_value(kind: str) -> st.SearchStrategy[Any]:
    return {
        "long": st.integers(-(2**63), 2**63 - 1) | st.sampled_from([0, -1, 2**63 - 1, -(2**63), 2**53 + 1]),
        # doubles from 2**53 on make write_lines refuse a block (it cannot tell them from rounded
        # integers), so conforming rows keep below that and huge values come as odd values
        "double": st.floats(-1e15, 1e15) | st.sampled_from([-0.0, 5e-324, 1e-300, 0.1, 2.0**52 + 0.5]),
        "string": _unicode,
        "boolean": st.booleans(),
        "ints-in-double": st.integers(-(10**15), 10**15) | st.floats(-1e15, 1e15),
    }[kind]


_odd_values = st.one_of(
    st.integers(2**63, 2**64) | st.integers(-(2**64), -(2**63) - 1),  # beyond int64
    st.sampled_from([2**53 + 1, -(2**53) - 1, 2**53, 10**20]),  # in a double column: not exact
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
        b'{"id":1,"name":"\\ud800"}',  # lone high surrogate escape
        b'{"id":1,"name":"\\udc00"}',  # lone low surrogate escape
        b'{"id":1,"name":"\\ud800\\u0041"}',  # high surrogate not followed by a low one
        b'{"id":1,"name":"\\ud83d\\ude00"}',  # a valid pair
        b'{"id":1,"name":"\xff"}',  # invalid UTF-8 inside a string
        b'{"id":1,"name":"\xed\xa0\x80"}',  # a UTF-8-encoded surrogate (json.loads' surrogatepass)
        b'{"id":1,"name":"a\tb"}',  # a raw control character in a string
        b'{"id":1,"amount":NaN}',
        b'{"id":1,"amount":Infinity}',
        b'{"id":1,"amount":-Infinity}',
        b'{"id":1,"amount":1e400}',
        b'{"id":1,"amount":1E2}',
        b'{"id":1,"id":2}',  # a repeated key
        b'{"id":1,"i\\u0064":2}',  # the same key, escaped
        b'{"\\u0069d":7}',
        b'{"id":01}',
        b'{"id":1}{"id":2}',
        b'{"id":1,}',
        b"{}",
        b'{"id":"1"}',
        b'{"id":1.0}',
        b'{"id":-0}',
    ]
)


@st.composite
def parquet_stream(draw: st.DrawFn) -> tuple[list[bytes | None], list[int]]:
    """FREEZE conforming rows (every field non-null at least once), then anything.

    ``id``, ``name`` and ``amount`` are always there (the odd texts use them), plus a few fields
    of random kinds."""
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
    chunks = draw(st.lists(st.integers(1, 40), min_size=1, max_size=4))
    return texts, chunks


@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(case=parquet_stream())
def test_parquet_lines_write_what_the_per_record_path_writes(tmp_path_factory, small_freeze, case) -> None:
    """``-NaN`` is left out here on purpose: it has its own test below (a known difference)."""
    values, chunks = case
    per_record, with_lines = both(tmp_path_factory.mktemp("pq"), PARQUET, values, FREEZE, chunks)
    event("lines taken" if with_lines.lines_taken else "no lines taken")
    assert_same(per_record, with_lines)


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
@pytest.mark.parametrize("chunk", [3, 100], ids=["small-calls", "eager-calls"])
def test_odd_strings_are_decided_as_on_the_per_record_path(tmp_path: Path, odd: bytes, chunk: int) -> None:
    """A string field holding ``odd`` (escapes or raw bytes as they are in the Kafka value)."""
    values = [dumps(base_row(i)) for i in range(1300)]
    odd = b'{"id":7,"name":"' + odd + b'","amount":1.5,"ok":true,"whole":1.0}'
    values[1150] = odd
    for fmt in (JSON_PLAIN, PARQUET):
        per_record, with_lines = both(tmp_path / fmt.format.value, fmt, values, 1000, [chunk])
        assert_same(per_record, with_lines)
        if fmt is JSON_PLAIN:  # JSON -> JSON writes the bytes through on both paths
            assert with_lines.files[0]["lines"][1150] == odd


def test_a_block_with_minus_nan_is_refused_like_the_per_record_path_refuses_it(tmp_path: Path) -> None:
    """``-NaN`` is not JSON: ``json.loads`` (the JsonConverter) rejects it, so the per-record path
    skips the record (or stops the task). Arrow's JSON reader parses it as NaN, so
    ``ParquetWriter.write_lines`` must refuse any block with a non-finite double and let the
    per-record path decide (which also keeps ``NaN``/``Infinity``, valid for Python, as they are)."""
    odd = b'{"id":7,"name":"x","amount":-NaN,"ok":true,"whole":1.0}'
    with pytest.raises(json.JSONDecodeError):
        json.loads(odd)
    values = [dumps(base_row(i)) for i in range(1100)]
    values[1050] = odd
    per_record, with_lines = both(tmp_path, PARQUET, values, 1000, [100])
    assert per_record.skipped == [1050]
    assert_same(per_record, with_lines)


def test_a_refused_block_leaves_small_rows_and_the_file_as_they_were(tmp_path: Path) -> None:
    """Refusals between small per-record calls (buffered, converted later) must not reorder rows."""
    converter = converter_for(StoreFormat.PARQUET)
    good = [dumps(base_row(i)) for i in range(1000)]
    writer = get_format(PARQUET).open(tmp_path / "x.parquet")
    writer.write([converter.convert(m) for m in kafka_messages(good)])
    tail = [dumps(base_row(i)) for i in range(1000, 1010)]
    refused = dumps({**base_row(1), "extra": 1})
    for i, text in enumerate(tail):
        message = Message(topic="t", partition=0, offset=1000 + i, value=text, timestamp=(1, 1))
        record = converter.convert(message)
        assert writer.write([record]) == 1  # small calls: buffered
        count, size = writer.record_count, writer.bytes_written
        assert not writer.write_lines(b"\n".join([text, refused]), 2)
        assert (writer.record_count, writer.bytes_written) == (count, size)
        assert writer.write_lines(text, 1)
    writer.close()
    ids = pq.read_table(tmp_path / "x.parquet").column("id").to_pylist()
    assert ids == [*range(1000), *(i for i in range(1000, 1010) for _ in (0, 1))]


@pytest.mark.parametrize(
    ("row", "expected"),
    [
        pytest.param({"whole": 2**53}, True, id="2**53-exact"),
        # beyond 2**53 an integer in a double column is rounded, as fastavro and Spark round it
        pytest.param({"whole": 2**53 + 1}, True, id="2**53+1"),
        pytest.param({"whole": -(2**53) - 1}, True, id="-(2**53+1)"),
        pytest.param({"whole": 2**60 + 1}, True, id="2**60+1"),
        pytest.param({"id": 2**63}, False, id="beyond-int64"),
        pytest.param({"id": -(2**63) - 1}, False, id="below-int64"),
    ],
)
def test_big_numbers_are_decided_by_the_per_record_path(
    tmp_path: Path, row: dict[str, Any], expected: bool
) -> None:
    """Whatever write_lines accepts, from_pylist (the per-record conversion) must accept as the
    same value; what it refuses, the per-record path decides (eager calls of >= 64 rows)."""
    values = [dumps(base_row(i)) for i in range(1200)]
    values[1100] = dumps({**base_row(1100), **row})
    per_record, with_lines = both(tmp_path, PARQUET, values, 1000, [100])
    assert_same(per_record, with_lines)
    ((name, value),) = row.items()
    if expected:
        assert per_record.skipped == []
        assert with_lines.files[0]["rows"][1100][name] == ("float", repr(float(value)))
    else:
        assert per_record.skipped == [1100]
