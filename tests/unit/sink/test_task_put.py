"""SinkTask.put(batch) with real cheap batches, against per-record batches and batches of records.

The same consumed messages go to three tasks: as the runtime builds batches (``BatchBuilder``,
cheap forms on), as the per-record reference builds them (``cheap_forms=False``), and as
``RecordBatch.of`` converted records. A record error is handled the way the runtime's policy
does (skip it, ``put`` the rest of the batch). All three must commit the same object keys with
the same contents, read back with independent readers (the json module, pyarrow), skip the
same records, and each must behave at every step as the per-record task does (replays, open
files, pre_commit). Real local storage.
"""

from __future__ import annotations

import gzip
import io
import json
import math
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import Executor, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message

import formats._rows as rows_module
import formats.json_format as json_format
import formats.parquet_format as parquet_format
from kcql.errors import RecordError, SinkError
from kcql.model import FlushSettings, PartitionField, SinkPlan, StoreFormat
from partitioners import is_data_key
from sink.records.batch import RecordBatch
from sink.records.converters import Converter, RecordConverter, StringConverter, record_converter
from sink.records.intake import BatchBuilder
from sink.records.record import SinkRecord, TopicPartition
from sink.task.task import SinkTask
from tests.unit.sink.consumed import avro_converter, messages, wire

TP = TopicPartition("t", 0)
MODES = ("cheap", "per-record", "records")
KEY_STRING = "org.apache.kafka.connect.storage.StringConverter"

# ---------------------------------------------------------------------------------------- helpers


def plan_for(fmt: StoreFormat = StoreFormat.JSON, count: int = 3, **kw: Any) -> SinkPlan:
    return SinkPlan(
        bucket="bkt", prefix="pre", source="t", format=fmt,
        flush=FlushSettings(count=count, size=10**12, interval=3600), **kw,
    )


def start(root: Path, plan: SinkPlan, **extra: str) -> SinkTask:
    task = SinkTask()
    task.start(
        {
            "name": "c",
            "connect.s3.kcql": "-",
            "connect.storage": "local",
            "connect.local.root": str(root / "store"),
            "connect.s3.local.tmp.directory": str(root / "staging"),
            **extra,
        },
        plans=[plan],
    )
    return task


def committed(root: Path) -> dict[str, bytes]:
    """Committed data objects, key relative to the bucket -> bytes (read with os.walk)."""
    base = root / "store" / "bkt"
    out = {}
    for directory, _, files in os.walk(base):
        for name in files:
            key = (Path(directory) / name).relative_to(base).as_posix()
            if is_data_key(key, "pre"):
                out[key] = (Path(directory) / name).read_bytes()
    return dict(sorted(out.items()))


def comparable(value: Any) -> Any:
    """``value`` with NaN made equal to itself (NaN != NaN would fail equal files)."""
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def _loads(line: bytes) -> Any:
    try:
        return json.loads(line)
    except (ValueError, RecursionError):
        return ("a line json.loads refuses", line[:60])


def decoded(files: dict[str, bytes]) -> dict[str, Any]:
    """Each object's records, read by independent readers (pyarrow; fastavro; the json module
    per line)."""
    out: dict[str, Any] = {}
    for key, data in files.items():
        if key.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(data))
            out[key] = (table.schema.to_string(show_schema_metadata=False), comparable(table.to_pylist()))
        elif key.endswith(".avro"):
            reader = fastavro.reader(io.BytesIO(data))
            out[key] = (json.dumps(reader.writer_schema, sort_keys=True), comparable(list(reader)))
        else:
            text = gzip.decompress(data) if key.endswith(".gz") else data
            assert text.endswith(b"\n")
            out[key] = comparable([_loads(line) for line in text[:-1].split(b"\n")])
    return out


def row(i: int, **extra: Any) -> bytes:
    return json.dumps({"id": i, "name": f"n{i}é", "amount": i + 0.5, **extra}).encode()


class Counting(RecordConverter):
    def __init__(self, key: Converter, value: Converter) -> None:
        super().__init__(key, value)
        self.calls = 0

    def convert(self, msg: Any) -> SinkRecord:
        self.calls += 1
        return super().convert(msg)


class Feeder:
    """One task fed consumed runs in one mode, record errors handled as the runtime's policy does."""

    def __init__(
        self, root: Path, plan: SinkPlan, mode: str, *, props: dict[str, str] | None = None,
        executor: Executor | None = None, null_values: str = "write", open_: bool = True,
        converter: RecordConverter | None = None, partitions: Sequence[int] = (0,), **extra: str,
    ) -> None:
        assert mode in MODES
        self.root, self.mode = root, mode
        base = converter or record_converter({"key.converter": KEY_STRING, **(props or {})})
        self.converter = Counting(base.key, base.value)
        self.builder = BatchBuilder(
            self.converter, cheap_forms=mode == "cheap", executor=executor,
            null_values=null_values,  # type: ignore[arg-type]
        )
        self.task = start(root, plan, **extra)
        self.skipped: list[tuple[int, int, str]] = []
        self.opened: set[TopicPartition] = set()
        if open_:
            self.open(*(TopicPartition("t", p) for p in partitions))

    def open(self, *tps: TopicPartition) -> dict[TopicPartition, int]:
        self.opened.update(tps)
        return self.task.open(list(tps))

    def batches(self, msgs: Sequence[Message]) -> list[RecordBatch]:
        out: list[RecordBatch] = []
        for partition in sorted({m.partition() or 0 for m in msgs}):
            run = [m for m in msgs if (m.partition() or 0) == partition]
            built = self.builder.build("t", partition, run)
            if self.mode != "records":
                out += built
                continue
            records: list[SinkRecord] = []
            for batch in built:  # the per-record view converts; what fails is skipped before put
                view = batch.records()
                for i in range(len(view)):
                    try:
                        records.append(view[i])
                    except RecordError as exc:
                        self.skipped.append((partition, exc.offset, exc.stage))
            if records:
                out.append(RecordBatch.of(records))
        return out

    def put(self, msgs: Sequence[Message]) -> None:
        for batch in self.batches(msgs):
            self.put_batch(batch)

    def put_batch(self, batch: RecordBatch) -> None:
        """``task.put``; a record error skips that record and puts the rest (sink/runtime/loop.py)."""
        while True:
            try:
                self.task.put(batch)
            except RecordError as exc:
                index = batch.index_of(exc.offset)
                self.skipped.append((batch.partition, exc.offset, exc.stage))
                if index + 1 == len(batch):
                    return
                batch = batch.slice(index + 1)
            else:
                return

    def state(self) -> tuple[list[str], dict[TopicPartition, int]]:
        """What an observer sees now: committed keys, and what pre_commit allows."""
        return list(committed(self.root)), self.task.pre_commit(dict.fromkeys(self.opened, 10**9))

    def finish(self) -> dict[str, Any]:
        try:
            self.task.close(sorted(self.opened))
        finally:
            self.task.stop()
        files = committed(self.root)
        return {
            "raw": files,
            "files": decoded(files),
            "skipped": sorted(self.skipped),
            "converted": self.converter.calls,
        }


def sink_all(
    root: Path, plan: SinkPlan, puts: Sequence[Sequence[Message]], modes: Sequence[str] = MODES, **kw: Any
) -> dict[str, dict[str, Any]]:
    """What each mode's task commits for ``puts`` (one consumed run each); each step's state
    (committed keys, pre_commit) must be the per-record task's."""
    feeders = {mode: Feeder(root / mode, plan, mode, **kw) for mode in modes}
    try:
        for step, msgs in enumerate(puts):
            for feeder in feeders.values():
                feeder.put(msgs)
            states = {mode: f.state() for mode, f in feeders.items()}
            for mode, state in states.items():
                assert state == states.get("per-record", state), f"after put {step}, {mode} differs"
    except BaseException:
        for feeder in feeders.values():
            feeder.task.stop()
        raise
    return {mode: feeder.finish() for mode, feeder in feeders.items()}


def assert_same(results: dict[str, dict[str, Any]], *, same_bytes: bool = True) -> dict[str, Any]:
    reference = results["per-record"]
    for mode, got in results.items():
        assert list(got["files"]) == list(reference["files"]), f"{mode}: other objects were committed"
        for key, content in reference["files"].items():
            assert got["files"][key] == content, f"{mode}: {key} differs"
        if same_bytes:
            assert got["raw"] == reference["raw"], f"{mode}: the bytes differ"
        assert got["skipped"] == reference["skipped"], f"{mode}: other records were skipped"
    return reference


def chunks(msgs: Sequence[Message], *sizes: int) -> Iterator[Sequence[Message]]:
    start = 0
    for size in sizes:
        yield msgs[start : start + size]
        start += size
    if start < len(msgs):
        yield msgs[start:]


# ---------------------------------------------------------------------------------- JSON files


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
@pytest.mark.parametrize(("count", "total"), [(3, 10), (1, 4), (4, 8), (50, 10)])
def test_a_batch_splits_files_exactly_as_per_record(
    tmp_path: Path, codec: str, count: int, total: int
) -> None:
    values = [row(i) for i in range(total)]
    # mixed timestamp types: file names carry min/max timestamps of records that have one
    stamps = [(0, -1) if i % 4 == 1 else (1 + i % 2, 10_000 - i * 7) for i in range(total)]
    msgs = messages(values, stamps=stamps)
    extra = {"connect.s3.compression.codec": codec}
    # an open file with records of an earlier put first
    results = sink_all(tmp_path, plan_for(count=count), [msgs[:2], msgs[2:]], **extra)
    reference = assert_same(results)
    assert len(reference["files"]) == -(-total // count)
    assert [v for lines in reference["files"].values() for v in lines] == [json.loads(v) for v in values]
    assert results["cheap"]["converted"] == 0, "the cheap batches were converted: the text was not used"


def test_a_batch_fills_the_open_file_before_starting_the_next(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(11)])
    for mode in MODES:
        feeder = Feeder(tmp_path / mode, plan_for(count=4), mode)
        try:
            feeder.put(msgs[:3])
            feeder.put(msgs[3:])
            assert list(committed(tmp_path / mode)) == [
                "pre/t/0/000000000003_10000_10003.json",
                "pre/t/0/000000000007_10004_10007.json",
            ], mode
            assert feeder.task.pre_commit({TP: 11}) == {TP: 8}, mode  # 8..10 are in the open file
        finally:
            feeder.task.stop()


@pytest.mark.parametrize(
    ("stamps", "name"),
    [
        pytest.param([(0, -1), (2, 900), (1, 50), (0, -1), (1, 700)], "000000000004_50_900.json", id="mixed"),
        pytest.param([(0, -1)] * 3, None, id="none"),
        pytest.param([(0, 5)] * 3, None, id="type-0-values-ignored"),
    ],
)
def test_timestamps_name_the_files_as_per_record(tmp_path: Path, stamps: list[tuple[int, int]],
                                                  name: str | None) -> None:
    msgs = messages([row(i) for i in range(len(stamps))], stamps=stamps)
    reference = assert_same(sink_all(tmp_path, plan_for(count=100), [msgs]))
    (key,) = reference["files"]
    if name is not None:
        assert key == "pre/t/0/" + name


# ------------------------------------------------------------------------------------ replays


def test_a_replayed_batch_is_skipped_exactly_as_per_record(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(12)])
    puts = [
        msgs[:7],  # 0-2 and 3-5 committed, 6 in the open file
        msgs[3:9],  # starts inside a committed file: 3-6 are skipped, 7-8 written
        msgs[5:9],  # starts at the last committed offset: all written already
        msgs[6:9],
        msgs[8:10],  # one written, one new
        msgs[3:12],
    ]
    reference = assert_same(sink_all(tmp_path, plan_for(count=3), puts))
    assert [v["id"] for lines in reference["files"].values() for v in lines] == list(range(12))
    # after a restart the index is the resume point: a replay from the start writes nothing new
    for mode in MODES:
        feeder = Feeder(tmp_path / mode, plan_for(count=3), mode, open_=False)
        try:
            assert feeder.open(TP) == {TP: 12}
            feeder.put(msgs[:12])
            feeder.put(msgs[11:12])
            assert feeder.state() == (list(reference["raw"]), {TP: 12})
        finally:
            feeder.finish()
        assert committed(tmp_path / mode) == reference["raw"]


def test_a_batch_of_a_partition_not_open_here_raises_naming_it(tmp_path: Path) -> None:
    feeder = Feeder(tmp_path, plan_for(), "cheap")
    try:
        (other,) = feeder.batches(messages([row(0)], partition=5))
        with pytest.raises(SinkError, match=r"t-5.*not open"):
            feeder.task.put(other)
        feeder.task.close([TP])
        (closed,) = feeder.batches(messages([row(0)]))
        with pytest.raises(SinkError, match=r"t-0.*not open"):
            feeder.task.put(closed)
    finally:
        feeder.task.stop()
    assert committed(tmp_path) == {}


# ------------------------------------------------------------------------------------- PARQUET


def test_parquet_takes_the_cheap_form_only_once_the_schema_is_fixed(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(1300)])
    plan = plan_for(StoreFormat.PARQUET, count=1500)
    for puts in ([msgs[:10], msgs[10:1000], msgs[1000:]], [msgs]):
        results = sink_all(tmp_path / str(len(puts)), plan, puts)
        reference = assert_same(results, same_bytes=False)
        assert list(reference["files"]) == ["pre/t/0/000000001299_10000_11299.parquet"]
        # the rows held one by one until they and the batch at hand reach 1,000 (the 10 of the
        # first put; the first record of a single put), whose schema the rest of the batch
        # parses into, which fixes it; the rest as text
        assert results["cheap"]["converted"] == (10 if len(puts) == 3 else 1)


def test_parquet_files_roll_over_with_the_schema_fixed_anew_as_per_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flush.count 7 and schemas fixed after 5 rows: a batch fills the open file, and each next
    file takes its first rows one by one."""
    monkeypatch.setattr(rows_module, "FREEZE_ROWS", 5)
    msgs = messages([row(i) for i in range(25)])
    results = sink_all(tmp_path, plan_for(StoreFormat.PARQUET, count=7), [msgs[:5], msgs[5:]])
    reference = assert_same(results, same_bytes=False)
    assert len(reference["files"]) == 4
    assert results["cheap"]["converted"] < 25


def test_a_new_field_mid_file_rolls_the_file_as_per_record(tmp_path: Path) -> None:
    values = [row(i) for i in range(1100)]
    values[1050] = row(1050, extra=True)
    msgs = messages(values)
    for puts in ([msgs[:1000], msgs[1000:]], [msgs]):
        results = sink_all(tmp_path / str(len(puts)), plan_for(StoreFormat.PARQUET, count=5000), puts)
        reference = assert_same(results, same_bytes=False)
        schemas = [schema for schema, _ in reference["files"].values()]
        assert len(schemas) == 2 and "extra" not in schemas[0] and "extra" in schemas[1]
        assert [len(rows) for _, rows in reference["files"].values()] == [1050, 50]


FLAT: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": "double"},
    ],
}
FLAT2: dict[str, Any] = {**FLAT, "fields": [*FLAT["fields"], {"name": "note", "type": ["null", "string"]}]}


def test_avro_values_go_to_parquet_as_columns_and_roll_on_a_new_schema_as_per_record(tmp_path: Path) -> None:
    avro, _ = avro_converter({7: FLAT, 8: FLAT2})
    converter = RecordConverter(StringConverter(), avro)
    values: list[bytes | None] = [
        wire(7, FLAT, {"id": i, "name": None if i % 3 else f"n{i}", "amount": i / 2}) for i in range(40)
    ]
    for i in range(25, 30):
        values[i] = wire(8, FLAT2, {"id": i, "name": "x", "amount": 1.0, "note": "new"})
    msgs = messages(values)
    plan = plan_for(StoreFormat.PARQUET, count=100)
    results = sink_all(tmp_path, plan, [msgs[:10], msgs[10:]], converter=converter)
    reference = assert_same(results, same_bytes=False)
    assert [len(rows) for _, rows in reference["files"].values()] == [25, 5, 10]
    assert results["cheap"]["converted"] < results["per-record"]["converted"]


# -------------------------------------------------------------------------------- PARTITIONBY


@pytest.mark.parametrize("fmt", [StoreFormat.JSON, StoreFormat.PARQUET])
def test_partitionby_a_value_field_splits_a_batch_into_the_same_files(
    tmp_path: Path, fmt: StoreFormat, monkeypatch: pytest.MonkeyPatch
) -> None:
    per_record_lines: list[int] = []
    write_records = json_format.JsonWriter._write_records

    def counting(self: Any, records: Any) -> int:
        per_record_lines.append(len(records))
        return write_records(self, records)

    monkeypatch.setattr(json_format.JsonWriter, "_write_records", counting)
    groups = "aaabbaccccbbba"
    msgs = messages([row(i, g=g) for i, g in enumerate(groups * 3)])
    plan = plan_for(fmt, count=4, partition_by=(PartitionField("g", "value", ("g",)),))
    results = {}
    for mode in MODES:
        per_record_lines.clear()
        results.update(sink_all(tmp_path, plan, [msgs[:5], msgs[5:]], modes=[mode]))
        if mode == "cheap" and fmt == StoreFormat.JSON:
            assert per_record_lines == [], "the slices' JSON text was not used"
    reference = assert_same(results, same_bytes=fmt == StoreFormat.JSON)
    assert {key.split("/")[1] for key in reference["files"]} == {"a", "b", "c"}


# ------------------------------------------------------------------------------- record errors


def test_a_record_error_mid_batch_leaves_exactly_the_records_before_it_written(tmp_path: Path) -> None:
    values = [row(i) for i in range(10)]
    values[5] = b'{"id": 5, }'  # framed, so inside the run of text, but not JSON
    msgs = messages(values)
    for mode in ("cheap", "per-record"):
        for then in ("close", "go-on"):
            feeder = Feeder(tmp_path / mode / then, plan_for(count=100), mode)
            try:
                (batch,) = feeder.batches(msgs)
                with pytest.raises(RecordError) as raised:
                    feeder.task.put(batch)
                assert (raised.value.offset, raised.value.stage) == (5, "VALUE_CONVERTER")
                if then == "close":  # what the open file holds: exactly the records before the bad one
                    feeder.task.close([TP])
                    (lines,) = decoded(committed(tmp_path / mode / then)).values()
                    assert [v["id"] for v in lines] == [0, 1, 2, 3, 4], mode
                    assert feeder.open(TP) == {TP: 5}
                # the runtime's policy: skip the bad record, put the rest of the batch
                feeder.task.put(batch.slice(batch.index_of(raised.value.offset) + 1))
                feeder.task.close([TP])
            finally:
                feeder.task.stop()
            ids = [v["id"] for lines in decoded(committed(tmp_path / mode / then)).values() for v in lines]
            assert ids == [0, 1, 2, 3, 4, 6, 7, 8, 9], (mode, then)
    for then in ("close", "go-on"):
        assert committed(tmp_path / "cheap" / then) == committed(tmp_path / "per-record" / then)


def test_a_mixed_stream_is_written_and_skipped_as_per_record(tmp_path: Path) -> None:
    """Mostly one-line objects, plus every kind of record the cheap forms must leave to the
    per-record path; two partitions interleaved within consumed runs."""
    count = 600
    values: list[bytes | None] = [row(i) for i in range(count)]
    keys: list[bytes | None] = [b"k%d" % i for i in range(count)]
    for at, odd in {
        40: None,
        90: json.dumps({"id": 90, "name": "pretty", "amount": 1.5}, indent=2).encode(),
        130: b"not json at all",
        150: b'{"id": 150, }',
        210: b"[1, 2, 3]",
        260: b'{"id":260,"name":"x","amount":NaN}',
        300: b'{"id":300,"name":"\\ud800","amount":1.5}',
    }.items():
        values[at] = odd
    keys[170] = b"\xff\xfe not utf-8"
    p0 = messages(values, keys=keys)
    p1 = messages(values, keys=keys, partition=1)
    puts = [[*a[:150], *b, *a[150:]] for a, b in zip(chunks(p0, 250, 250), chunks(p1, 250, 250), strict=True)]
    results = sink_all(tmp_path, plan_for(count=70), puts, partitions=(0, 1))
    reference = assert_same(results)
    # not JSON, framed but not JSON; the rest is written (a pretty-printed object on one line, NaN
    # and a lone surrogate as their text, as per-record; a key that is not UTF-8 never fails)
    assert [(p, o) for p, o, _ in reference["skipped"]] == [(p, o) for p in (0, 1) for o in (130, 150)]
    assert sum(map(len, reference["files"].values())) == 2 * (count - 2)
    assert results["cheap"]["converted"] < count  # most of it went as text


ROWS_BEFORE = [row(i) for i in range(1500)]

ODD_CASES = [
    pytest.param("PARQUET", {1100: row(1100, extra=True)}, id="parquet-new-field"),
    pytest.param("PARQUET", {1100: json.dumps({"id": 1100, "name": "x", "amount": 3}).encode()},
                 id="parquet-int-in-double-column"),
    pytest.param("PARQUET", {100: b'{"id":100,"name":"\\ud800","amount":1.5}'},
                 id="parquet-lone-surrogate-before-the-schema-is-fixed"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"\\ud800","amount":1.5}'},
                 id="parquet-lone-surrogate-after-the-schema-is-fixed"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"x","amount":9007199254740993}'},
                 id="parquet-int-beyond-2**53-in-double-column"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"x","amount":-NaN}'}, id="parquet-minus-nan"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"x","amount":NaN}'}, id="parquet-nan"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"\xff","amount":1.5}'}, id="parquet-bad-utf8"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"\\ud83d\\ude00","amount":1.5}'},
                 id="parquet-surrogate-pair"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"id":1101,"name":"x","amount":1.5}'},
                 id="parquet-duplicate-key"),
    pytest.param("PARQUET", {1100: b'{"id":1100,"name":"x","amount":1.5}{"id":1}'},
                 id="parquet-two-documents"),
    pytest.param("PARQUET",
                 {1100: b'{"id":1100,"name":"x","amount":1.5,"extra":1}', 1101: None, 1102: b"[1]"},
                 id="parquet-new-field-tombstone-array"),
    pytest.param("JSON", {1100: b'{"id":1100,"name":"x","amount":-NaN}'}, id="json-minus-nan"),
    pytest.param("JSON", {1100: b'{"id":1100,"name":"\\ud800","amount":1.5}'}, id="json-lone-surrogate"),
    pytest.param("JSON", {1100: b'{"id":1100,"name":"\xed\xa0\x80","amount":1.5}'},
                 id="json-encoded-surrogate"),
    pytest.param("JSON", {1100: b'{"id":1100}{"id":1}'}, id="json-two-documents"),
    pytest.param("JSON", {1100: b'{"id":1100,"name":"x","amount":' + b"1" * 4301 + b"}"},
                 id="json-integer-json-loads-refuses"),
    pytest.param("JSON", {1100: b'{"id":1100,"deep":' + b"[" * 3000 + b"]" * 3000 + b"}"},
                 id="json-nested-too-deep-for-json-loads"),
]


@pytest.mark.parametrize(("fmt", "special"), ODD_CASES)
@pytest.mark.parametrize("sizes", [(1500,), (1050, 450)], ids=["one-batch", "after-the-freeze"])
def test_odd_records_are_decided_as_per_record(
    tmp_path: Path, fmt: str, special: dict[int, bytes | None], sizes: tuple[int, ...]
) -> None:
    values: list[bytes | None] = list(ROWS_BEFORE)
    for at, value in special.items():
        values[at] = value
    msgs = messages(values)
    results = sink_all(tmp_path, plan_for(StoreFormat(fmt), count=5000), list(chunks(msgs, *sizes)),
                       modes=("cheap", "per-record"))
    assert_same(results, same_bytes=fmt == "JSON")


# ------------------------------------------------------------------------------------ prefetch


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[tuple[int, str]]:
    """Arrow parses of JSON lines: (lines, thread name)."""
    calls: list[tuple[int, str]] = []
    parse = parquet_format.LineParser.__call__

    def counting(self: parquet_format.LineParser, data: bytes) -> Any:
        calls.append((data.count(b"\n") + 1, threading.current_thread().name))
        return parse(self, data)

    monkeypatch.setattr(parquet_format.LineParser, "__call__", counting)
    return calls


def test_prefetch_parses_ahead_on_the_helper_thread_for_the_open_parquet_file(
    tmp_path: Path, parses: list[tuple[int, str]]
) -> None:
    msgs = messages([row(i) for i in range(1500)])
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        feeder = Feeder(tmp_path / "cheap", plan, "cheap", executor=executor)
        feeder.put(msgs[:1000])  # the file fixes its schema
        parses.clear()
        batches = [*feeder.batches(msgs[1000:1200]), *feeder.batches(msgs[1200:])]
        assert [feeder.task.prefetch(b) for b in batches] == [True, True]
        for batch in batches:
            feeder.put_batch(batch)
        cheap = feeder.finish()
    assert [lines for lines, _ in parses] == [200, 300], "parsed again instead of using what was prefetched"
    assert all(name.startswith("ahead") for _, name in parses)
    results = sink_all(tmp_path, plan, [msgs], modes=["per-record"])
    assert assert_same({"cheap": cheap, **results}, same_bytes=False)["files"]


@pytest.mark.parametrize(
    ("fmt", "first", "expected"),
    [
        pytest.param(StoreFormat.PARQUET, row(0), [(1500, True)], id="PARQUET"),
        pytest.param(StoreFormat.AVRO, row(0), [(1500, True)], id="AVRO"),
        # the guess (amount a long), taken by the file once it held the first record but refused
        # by Arrow (1.5 is no long); then that slice alone (the same refusal, as before the guess
        # existed), and the batch in the schema fixed after 1,000 rows, for the last 500
        pytest.param(
            StoreFormat.PARQUET,
            json.dumps({"id": 0, "name": "n0", "amount": 7}).encode(),
            [(1500, True), (1499, False), (1500, False)],
            id="PARQUET-guess-refused",
        ),
    ],
)
def test_a_partitions_first_batch_is_parsed_ahead_into_its_first_records_schema(
    tmp_path: Path, parses: list[tuple[int, str]], fmt: StoreFormat, first: bytes,
    expected: list[tuple[int, bool]],
) -> None:
    """No file is open for a partition's first batch, so no writer can parse it ahead; the format
    parses it into the schema its first record infers, which the new file fixes once it took
    that record (the rest of the batch parsing into it): the file takes the parse done on the
    helper thread instead of parsing on the consuming thread. It is only a guess: when the first
    record's schema is not the file's (its amount a whole number, a long until the next rows make
    it a double), the file parses again. Either way its rows are the per-record path's."""
    msgs = messages([first] + [row(i) for i in range(1, 1500)])
    plan = plan_for(fmt, count=5000)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        feeder = Feeder(tmp_path / "cheap", plan, "cheap", executor=executor)
        (batch,) = feeder.batches(msgs)
        assert feeder.task.prefetch(batch)
        feeder.put_batch(batch)
        cheap = feeder.finish()
    assert [(lines, name.startswith("ahead")) for lines, name in parses] == expected
    results = sink_all(tmp_path, plan, [msgs], modes=["per-record"])
    assert assert_same({"cheap": cheap, **results}, same_bytes=False)["files"]


def test_a_new_file_takes_a_parse_started_before_its_schema_was_fixed(
    tmp_path: Path, parses: list[tuple[int, str]]
) -> None:
    """A file closes at flush.count; the next file holds its first rows per record until its
    schema is fixed, so it has no parser of its own yet. A batch consumed meanwhile is parsed
    ahead with the partition's previous prefetcher, and the next file, whose schema comes out the
    same, takes that parse instead of parsing the batch on the consuming thread."""
    msgs = messages([row(i) for i in range(3000)])
    plan = plan_for(StoreFormat.PARQUET, count=1500)
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ahead") as executor:
        feeder = Feeder(tmp_path / "cheap", plan, "cheap", executor=executor)
        feeder.put(msgs[:1000])  # the first file fixes its schema
        parses.clear()
        (fills,) = feeder.batches(msgs[1000:2000])
        feeder.put_batch(fills)  # the first file is committed at 1500; the next one holds 500 rows
        (later,) = feeder.batches(msgs[2000:3000])
        assert feeder.task.prefetch(later)
        feeder.put_batch(later)
        cheap = feeder.finish()
    assert [(lines, name.startswith("ahead")) for lines, name in parses] == [(1000, False), (1000, True)]
    results = sink_all(tmp_path, plan, [msgs], modes=["per-record"])
    assert assert_same({"cheap": cheap, **results}, same_bytes=False)["files"]


def _next_file_rows(i: int, case: str) -> bytes:
    """Rows of the three PARQUET files (offsets 0..4499, 1,500 each) for the hint tests."""
    if case == "first file's first amount is whole" and i == 0:
        return json.dumps({"id": i, "name": f"n{i}é", "amount": 7}).encode()
    if case == "new field at row 500" and i == 2000:
        return row(i, note="x")  # merged into the schema while it is not fixed yet
    if case == "first row lacks a field" and i == 1500:
        return json.dumps({"id": i, "amount": i + 0.5}).encode()  # name comes last in this file
    if case == "first amount is whole" and i == 1500:
        return json.dumps({"id": i, "name": f"n{i}é", "amount": 7}).encode()  # a long until merged
    return row(i)


@pytest.mark.parametrize(
    "case",
    [
        "same shape",
        "new field at row 500",
        "first row lacks a field",
        "first amount is whole",
        "first file's first amount is whole",
    ],
)
@pytest.mark.parametrize("fmt", [StoreFormat.PARQUET, StoreFormat.AVRO], ids=lambda f: f.value)
def test_a_next_file_of_the_same_shape_fixes_its_schema_from_the_previous_one(
    tmp_path: Path, case: str, fmt: StoreFormat
) -> None:
    """A PARQUET or AVRO file of schemaless JSON fixes its inferred schema after FREEZE_ROWS
    records, taken one by one. It starts from a hint when that provably changes nothing: any file
    (the first of a partition too) from its own first record's schema, a PARQUET file also from
    its predecessor's, when the whole batch parses into it and the first record alone infers it.
    Then one record is converted, not 1,000; whenever the first 1,000 could merge into another
    schema (a new field, another field order, a long that later becomes a double), the hint is not
    used. Either way the files are the per-record path's, byte for byte."""
    msgs = messages([_next_file_rows(i, case) for i in range(4500)])
    plan = plan_for(fmt, count=1500)
    results = sink_all(tmp_path, plan, list(chunks(msgs, 1500, 1500, 1500)), modes=["cheap", "per-record"])
    assert len(assert_same(results)["files"]) == 3
    # records converted one by one per file: 1 when the schema is fixed from a hint (the first
    # file's own first record's, a next file's the previous file's or its own first record's),
    # 1,000 when neither fits. The second file's first 1,000 merge into another schema than its
    # first record's (a new field, the field left out coming last, a long becoming a double), so
    # neither hint is taken; the third file's first record infers the schema of all its rows
    per_file = {
        "same shape": (1, 1, 1),
        "new field at row 500": (1, 1000, 1),
        "first row lacks a field": (1, 1000, 1),
        "first amount is whole": (1, 1000, 1),
        "first file's first amount is whole": (1000, 1, 1),
    }[case]
    assert results["cheap"]["converted"] == sum(per_file)


def test_a_next_file_whose_first_batch_is_short_decides_with_the_next_batch(tmp_path: Path) -> None:
    """The hint is decided once the rows held and the batch at hand reach FREEZE_ROWS: a file
    whose first batch brings 600 records takes those one by one, and its schema is fixed from the
    previous file's with the next batch; the files are the per-record path's, byte for byte."""
    msgs = messages([row(i) for i in range(4500)])
    plan = plan_for(StoreFormat.PARQUET, count=1500)
    puts = list(chunks(msgs, 1500, 600, 1400, 1000))
    results = sink_all(tmp_path, plan, puts, modes=["cheap", "per-record"])
    assert len(assert_same(results)["files"]) == 3
    # file 1: its first record, the rest of the batch parsed into its schema; file 2
    # (1500..2999): 600 one by one, fixed with the next 900; file 3 (3000..4499): the last 500 of
    # that batch one by one, fixed with the next batch
    assert results["cheap"]["converted"] == 1 + 600 + 500


def test_a_next_file_after_a_file_of_nested_rows_does_not_try_its_first_record(
    tmp_path: Path, parses: list[tuple[int, str]]
) -> None:
    """A file whose rows infer a schema no line parser takes (a nested record) hands its successor
    no parser: the next file's rows most likely are nested too, so its own first record's schema
    is not tried either, even when that record alone is flat (a parse that would be refused)."""
    values = [json.dumps({"id": i, "inner": {"x": i}}).encode() for i in range(3000)]
    values[1500] = json.dumps({"id": 1500}).encode()  # the second file's first record is flat
    msgs = messages(values)
    plan = plan_for(StoreFormat.PARQUET, count=1500)
    results = sink_all(tmp_path, plan, list(chunks(msgs, 1500, 1500)), modes=["cheap", "per-record"])
    assert len(assert_same(results)["files"]) == 2
    assert parses == []


@pytest.mark.parametrize("next_schema", ["same", "another"])
def test_a_batch_prefetched_for_a_file_that_is_gone_serves_the_next_file_only_with_its_schema(
    tmp_path: Path, parses: list[tuple[int, str]], next_schema: str
) -> None:
    """The file it was prefetched for was committed meanwhile (the timer, a rebalance). Parses
    are memoised by schema: a next file of the same schema takes that parse; one whose rows fixed
    another schema (one more field) must not, and parses the batch into its own."""
    msgs = messages([row(i) for i in range(2200)])
    extra = {} if next_schema == "same" else {"note": "x"}
    refill = messages([row(i, **extra) for i in range(1000, 2000)], first=1000)
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    with ThreadPoolExecutor(max_workers=1) as executor:
        feeder = Feeder(tmp_path, plan, "cheap", executor=executor)
        feeder.put(msgs[:1000])
        (batch,) = feeder.batches(msgs[2000:2100])
        assert feeder.task.prefetch(batch)
        feeder.task.close([TP])  # commits the file
        feeder.open(TP)
        feeder.put(refill)  # a new file, its schema fixed anew
        feeder.put_batch(batch)
        result = feeder.finish()
    # each file's first batch of 1,000 is parsed to fix its schema from its first record's; the
    # batch prefetched meanwhile (100) serves the next file only when its schema is the same
    expected = [1000, 100, 1000] if next_schema == "same" else [1000, 100, 1000, 100]
    assert [lines for lines, _ in parses] == expected
    assert [len(rows) for _, rows in result["files"].values()] == [1000, 1100]
    last = max(result["files"].values(), key=lambda content: len(content[1]))[1]
    assert [r["id"] for r in last] == list(range(1000, 2100))
    assert all(r.get("note") == ("x" if extra and r["id"] < 2000 else None) for r in last)


def test_prefetch_is_a_no_op_where_nothing_can_be_computed_ahead(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(1200)])
    with ThreadPoolExecutor(max_workers=1) as executor:
        feeder = Feeder(tmp_path / "p", plan_for(StoreFormat.PARQUET, count=1100), "cheap", executor=executor)
        try:

            def prefetch(part: Sequence[Message]) -> bool:
                (batch,) = feeder.batches(part)
                return feeder.task.prefetch(batch)

            assert prefetch(msgs[:10]) is True  # no open file yet: its first record's schema
            feeder.put(msgs[:500])
            assert prefetch(msgs[500:510]) is False  # the schema is not fixed yet
            feeder.put(msgs[500:1000])
            # 200 rows fill the file's room of 100 and start the next file: parsed for both
            assert prefetch(msgs[1000:1200]) is True
            assert prefetch(msgs[1000:1100]) is True
            (other,) = feeder.batches(messages([row(0)], partition=7))
            assert feeder.task.prefetch(other) is False  # not open here
            feeder.task.close([TP])
            assert prefetch(msgs[1000:1100]) is False  # closed
        finally:
            feeder.task.stop()
        by_value = (PartitionField("g", "value", ("g",)),)
        grouped = messages([row(i, g="a") for i in range(1010)])  # one PARTITIONBY value: one open file
        for name, plan in {
            "json": plan_for(StoreFormat.JSON, count=5000),
            "by-value": plan_for(StoreFormat.PARQUET, count=5000, partition_by=by_value),
        }.items():
            feeder = Feeder(tmp_path / name, plan, "cheap", executor=executor)
            try:
                feeder.put(grouped[:1000])
                (batch,) = feeder.batches(grouped[1000:1010])
                assert feeder.task.prefetch(batch) is False, name
            finally:
                feeder.task.stop()
