"""SinkTask.put_block with JSON-lines blocks, against SinkTask.put with the same records.

The task half: the same messages go to one task as blocks (``put_block``, then ``put`` for
whatever it leaves) and to another as SinkRecords made by the runtime's converter (``put``); both
must commit the same object keys with the same bytes. The runtime half: ``SinkRuntime._advance``
is fed the same consumed batches (real ``confluent_kafka.Message`` objects, no broker) with the
block fast path on and off (``_blocks = None``); both must commit the same objects, skip the same
records and fail, or not, alike.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message

import formats.parquet_format as parquet_format
from kcql.model import EnvelopeFields, FlushSettings, PartitionField, SinkPlan, StoreFormat
from partitioners import is_data_key
from sink.config.files import parse_connector_config
from sink.records.converters import ByteArrayConverter, JsonConverter, RecordConverter, needs_parsed_value
from sink.records.json_lines import JsonLines, json_lines
from sink.records.record import SinkRecord, TopicPartition
from sink.runtime.loop import RuntimeOptions, SinkRuntime
from sink.task.task import SinkTask

TP = TopicPartition("t", 0)

# ---------------------------------------------------------------------------------------- helpers


def plan_for(fmt: StoreFormat = StoreFormat.JSON, count: int = 3, **kw: Any) -> SinkPlan:
    return SinkPlan(
        bucket="bkt",
        prefix="pre",
        source="t",
        format=fmt,
        flush=FlushSettings(count=count, size=10**12, interval=3600),
        **kw,
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
    """Committed data objects, key relative to the bucket → bytes (read with os.walk)."""
    base = root / "store" / "bkt"
    out = {}
    for directory, _, files in os.walk(base):
        for name in files:
            key = (Path(directory) / name).relative_to(base).as_posix()
            if is_data_key(key, "pre"):
                out[key] = (Path(directory) / name).read_bytes()
    return out


def decoded(files: dict[str, bytes]) -> dict[str, Any]:
    """Each object's records, read by independent readers."""
    out: dict[str, Any] = {}
    for key, data in sorted(files.items()):
        if key.endswith(".parquet"):
            table = pq.read_table(io.BytesIO(data))
            out[key] = (table.schema.names, table.to_pylist())
        elif key.endswith(".gz"):
            out[key] = gzip.decompress(data).splitlines()
        else:
            out[key] = data.splitlines()
    return out


def messages(
    values: Sequence[bytes | None],
    first: int = 0,
    partition: int = 0,
    keys: Sequence[bytes | None] | None = None,
    stamps: Sequence[tuple[int, int]] | None = None,
) -> list[Message]:
    keys = keys if keys is not None else [b"k%d" % (first + i) for i in range(len(values))]
    stamps = stamps if stamps is not None else [(1, 10_000 + first + i) for i in range(len(values))]
    return [
        Message(topic="t", partition=partition, offset=first + i, key=k, value=v, timestamp=ts)
        for i, (k, v, ts) in enumerate(zip(keys, values, stamps, strict=True))
    ]


def row(i: int, **extra: Any) -> bytes:
    return json.dumps({"id": i, "name": f"n{i}é", "amount": i + 0.5, **extra}).encode()


def records_of(plan: SinkPlan, msgs: Sequence[Message]) -> list[SinkRecord]:
    """SinkRecords exactly as the runtime's converter makes them for this plan."""
    converter = RecordConverter(ByteArrayConverter(), JsonConverter(False), needs_parsed_value([plan]))
    return [converter.convert(m) for m in msgs]


def block_of(msgs: Sequence[Message]) -> JsonLines:
    block = json_lines("t", msgs[0].partition() or 0, msgs, check_keys=False)
    assert block is not None
    return block


def put_only(root: Path, plan: SinkPlan, *puts: Sequence[Message]) -> dict[str, Any]:
    """What a task commits when each of ``puts`` is one ``put`` of converted records, decoded:
    the reference a task fed blocks must match."""
    task = start(root, plan)
    try:
        task.open([TP])
        for msgs in puts:
            task.put(records_of(plan, msgs))
        task.close([TP])
    finally:
        task.stop()
    return decoded(committed(root))


# -------------------------------------------------------------------------- put_block vs put


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
@pytest.mark.parametrize(("count", "total"), [(3, 10), (1, 4), (4, 8), (50, 10)])
def test_a_block_splits_files_exactly_as_put_would(
    tmp_path: Path, codec: str, count: int, total: int
) -> None:
    plan = plan_for(count=count)
    extra = {"connect.s3.compression.codec": codec}
    values = [row(i) for i in range(total)]
    # mixed timestamp types: file names carry min/max timestamps of records that have one
    stamps = [(0, -1) if i % 4 == 1 else (1 + i % 2, 10_000 - i * 7) for i in range(total)]
    msgs = messages(values, stamps=stamps)
    per_record = start(tmp_path / "a", plan, **extra)
    blocks = start(tmp_path / "b", plan, **extra)
    try:
        per_record.open([TP])
        per_record.put(records_of(plan, msgs[:2]))
        per_record.put(records_of(plan, msgs[2:]))
        per_record.close([TP])
        blocks.open([TP])
        blocks.put(records_of(plan, msgs[:2]))  # an open file with records from put() first
        assert blocks.put_block(block_of(msgs[2:])) == total - 2
        blocks.close([TP])
    finally:
        per_record.stop()
        blocks.stop()
    expected = committed(tmp_path / "a")
    assert len(expected) == -(-total // count)
    assert committed(tmp_path / "b") == expected  # same keys, same bytes
    lines = [line for v in decoded(expected).values() for line in v]
    assert [json.loads(line) for line in lines] == [json.loads(v) for v in values]


def test_a_block_fills_the_open_file_before_starting_the_next(tmp_path: Path) -> None:
    plan = plan_for(count=4)
    msgs = messages([row(i) for i in range(11)])
    task = start(tmp_path, plan)
    try:
        task.open([TP])
        task.put(records_of(plan, msgs[:3]))
        assert task.put_block(block_of(msgs[3:])) == 8
        assert sorted(committed(tmp_path)) == [
            "pre/t/0/000000000003_10000_10003.json",
            "pre/t/0/000000000007_10004_10007.json",
        ]
        assert task.pre_commit({TP: 11}) == {TP: 8}  # 8..10 are in the open file
    finally:
        task.stop()


def keys_by_put_and_by_block(tmp_path: Path, plan: SinkPlan, msgs: Sequence[Message]) -> list[list[str]]:
    """The committed keys of ``msgs`` written with ``put`` (first) and as one block (second)."""
    keys = []
    for label, by_block in (("a", False), ("b", True)):
        task = start(tmp_path / label, plan)
        try:
            task.open([TP])
            if by_block:
                assert task.put_block(block_of(msgs)) == len(msgs)
            else:
                task.put(records_of(plan, msgs))
            task.close([TP])
        finally:
            task.stop()
        keys.append(sorted(committed(tmp_path / label)))
    return keys


def test_timestamps_of_a_block_name_the_file_as_put_would(tmp_path: Path) -> None:
    stamps = [(0, -1), (2, 900), (1, 50), (0, -1), (1, 700)]
    msgs = messages([row(i) for i in range(5)], stamps=stamps)
    keys = keys_by_put_and_by_block(tmp_path, plan_for(count=100), msgs)
    assert keys[0] == keys[1] == ["pre/t/0/000000000004_50_900.json"]


def test_a_block_without_any_timestamp_names_the_file_as_put_would(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(3)], stamps=[(0, -1)] * 3)
    names = keys_by_put_and_by_block(tmp_path, plan_for(count=100), msgs)
    assert names[0] == names[1] and len(names[0]) == 1


# ------------------------------------------------------------------------------------ replays


def test_a_replayed_block_is_never_taken(tmp_path: Path) -> None:
    plan = plan_for(count=3)
    msgs = messages([row(i) for i in range(12)])
    task = start(tmp_path, plan)
    try:
        task.open([TP])
        assert task.put_block(block_of(msgs[:7])) == 7  # 0-2 and 3-5 committed, 6 open
        before = committed(tmp_path)
        assert task.put_block(block_of(msgs[3:9])) == 0  # starts inside a committed file
        assert task.put_block(block_of(msgs[5:9])) == 0  # starts at the last committed offset
        assert task.put_block(block_of(msgs[6:9])) == 0  # starts at a record already written (open file)
        assert committed(tmp_path) == before
        assert task.put_block(block_of(msgs[7:9])) == 2  # the next new offset
        task.put(records_of(plan, msgs[3:12]))  # the per-record path drops what is already written
        task.close([TP])
    finally:
        task.stop()
    again = start(tmp_path, plan)
    try:
        assert again.open([TP]) == {TP: 12}
        assert again.put_block(block_of(msgs[:12])) == 0  # a replay from the start after a restart
        assert again.put_block(block_of(msgs[11:12])) == 0
        again.put(records_of(plan, msgs[:12]))
        again.close([TP])
    finally:
        again.stop()
    ids = [json.loads(line)["id"] for lines in decoded(committed(tmp_path)).values() for line in lines]
    assert ids == list(range(12))


def test_a_block_of_a_partition_not_open_here_is_not_taken(tmp_path: Path) -> None:
    task = start(tmp_path, plan_for())
    try:
        task.open([TP])
        other = messages([row(0)], partition=5)
        assert task.put_block(block_of(other)) == 0
    finally:
        task.stop()
    assert committed(tmp_path) == {}


# -------------------------------------------------------------------------------- accepts_blocks


@pytest.mark.parametrize(
    ("plan", "accepts"),
    [
        pytest.param(plan_for(StoreFormat.JSON), True, id="json"),
        pytest.param(plan_for(StoreFormat.PARQUET), True, id="parquet"),
        pytest.param(
            plan_for(
                partition_by=(PartitionField("_topic", "topic"), PartitionField("_partition", "partition"))
            ),
            True,
            id="partitionby-topic-partition",
        ),
        pytest.param(
            plan_for(partition_by=(PartitionField("g", "value", ("g",)),)), False, id="by-value-field"
        ),
        pytest.param(
            plan_for(StoreFormat.PARQUET, partition_by=(PartitionField("g", "value", ("g",)),)),
            False,
            id="parquet-by-value-field",
        ),
        pytest.param(plan_for(partition_by=(PartitionField("_key", "key"),)), False, id="by-key"),
        pytest.param(plan_for(partition_by=(PartitionField("h", "header", ("h",)),)), False, id="by-header"),
        pytest.param(plan_for(partition_by=None), False, id="nopartition"),
        pytest.param(
            plan_for(envelope=EnvelopeFields(key=True, value=True, headers=True, metadata=True)),
            False,
            id="json-envelope",
        ),
        pytest.param(
            plan_for(StoreFormat.PARQUET, envelope=EnvelopeFields(key=False, value=True)),
            False,
            id="parquet-envelope",
        ),
        pytest.param(plan_for(StoreFormat.AVRO), False, id="avro"),
        pytest.param(plan_for(StoreFormat.CSV), False, id="csv"),
        pytest.param(plan_for(StoreFormat.TEXT), False, id="text"),
        pytest.param(plan_for(StoreFormat.BYTES), False, id="bytes"),
    ],
)
def test_blocks_are_accepted_only_where_they_cannot_change_the_files(
    tmp_path: Path, plan: SinkPlan, accepts: bool
) -> None:
    task = start(tmp_path, plan)
    try:
        assert task.accepts_blocks("t") is accepts
        assert task.accepts_blocks("no-statement-reads-this") is False
    finally:
        task.stop()


# ------------------------------------------------------------------------------------- PARQUET


def test_a_parquet_file_takes_blocks_only_once_its_schema_is_fixed(tmp_path: Path) -> None:
    plan = plan_for(StoreFormat.PARQUET, count=1500)
    msgs = messages([row(i) for i in range(1300)])
    task = start(tmp_path / "b", plan)
    try:
        task.open([TP])
        assert task.put_block(block_of(msgs[:10])) == 0  # nothing buffered: no schema yet
        task.put(records_of(plan, msgs[:10]))
        assert task.put_block(block_of(msgs[10:20])) == 0  # 10 rows: still not fixed
        task.put(records_of(plan, msgs[10:1000]))  # 1,000 rows: fixed
        assert task.put_block(block_of(msgs[1000:])) == 300
        task.close([TP])
    finally:
        task.stop()
    a = put_only(tmp_path / "a", plan, msgs[:10], msgs[10:1000], msgs[1000:])
    b = decoded(committed(tmp_path / "b"))
    assert list(a) == list(b) == ["pre/t/0/000000001299_10000_11299.parquet"]
    assert a == b


def test_a_parquet_block_is_taken_up_to_the_first_file_that_refuses_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """flush.count 7 and a schema fixed after 5 rows: a block fills the open file, and the next
    (new, schema not fixed) file refuses it; put_block returns that prefix, put does the rest."""
    monkeypatch.setattr(parquet_format, "_FREEZE_ROWS", 5)
    plan = plan_for(StoreFormat.PARQUET, count=7)
    msgs = messages([row(i) for i in range(25)])
    task = start(tmp_path / "b", plan)
    try:
        task.open([TP])
        task.put(records_of(plan, msgs[:5]))
        assert task.put_block(block_of(msgs[5:])) == 2  # fills file 1 (7 rows); file 2 refuses
        task.put(records_of(plan, msgs[7:]))
        task.close([TP])
    finally:
        task.stop()
    a, b = put_only(tmp_path / "a", plan, msgs[:5], msgs[5:]), decoded(committed(tmp_path / "b"))
    assert len(a) == 4
    assert a == b


def test_a_parquet_block_with_a_new_field_is_refused_and_put_rolls_the_file(tmp_path: Path) -> None:
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    values = [row(i) for i in range(1100)]
    values[1050] = row(1050, extra=True)
    msgs = messages(values)
    task = start(tmp_path / "b", plan)
    try:
        task.open([TP])
        task.put(records_of(plan, msgs[:1000]))
        assert task.put_block(block_of(msgs[1000:])) == 0
        assert task.put_block(block_of(msgs[1000:1050])) == 50
        task.put(records_of(plan, msgs[1050:]))
        task.close([TP])
    finally:
        task.stop()
    a = put_only(tmp_path / "a", plan, msgs[:1000], msgs[1000:1050], msgs[1050:])
    b = decoded(committed(tmp_path / "b"))
    assert a == b
    assert [names for names, _ in a.values()] == [["id", "name", "amount"], ["id", "name", "amount", "extra"]]


# --------------------------------------------------------------- the runtime, blocks on vs off

KEY_STRING = "org.apache.kafka.connect.storage.StringConverter"


def sink_batches(
    root: Path, fmt: str, count: int, batches: Sequence[Sequence[Message]], blocks: bool, **props: str
) -> dict[str, Any]:
    """Feed ``batches`` to ``SinkRuntime._advance`` as if consumed; return what was committed."""
    config = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": "t",
        "connect.s3.kcql": f"INSERT INTO bkt:pre SELECT * FROM t STOREAS `{fmt}` "  # noqa: S608
        f"PROPERTIES('flush.count'={count}, 'flush.interval'=3600)",
        "connect.storage": "local",
        "connect.local.root": str(root / "store"),
        "connect.s3.local.tmp.directory": str(root / "staging"),
        "errors.tolerance": "all",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **props,
    }
    runtime = SinkRuntime(
        parse_connector_config({"name": "c", "config": config}), RuntimeOptions("unused:9092")
    )
    if not blocks:
        runtime._blocks = None
    assert runtime._blocks is not None or not blocks
    runtime.task.start(dict(runtime.cfg.props))
    tps = sorted({TopicPartition("t", m.partition() or 0) for batch in batches for m in batch})
    failed = None
    try:
        runtime.task.open(tps)
        runtime.assigned.update(tps)
        for batch in batches:  # the run loop's own steps, consumed batches held while they parse
            runtime._advance(runtime._batch(list(batch)))
        runtime._advance(None)  # an empty consume() writes what is still held
        runtime.task.close(tps)
    except Exception as exc:  # the runtime would stop the task with it
        failed = f"{type(exc).__name__}: {exc}"
    finally:
        runtime.task.stop()
    return {
        "files": decoded(committed(root)),
        "failed": failed,
        "tolerated": runtime.errors_tolerated,
        "in": runtime.records_in,
        "in_blocks": runtime.records_in_blocks,
    }


def on_and_off(tmp_path: Path, fmt: str, count: int, batches: Sequence[Sequence[Message]], **props: str):
    off = sink_batches(tmp_path / "off", fmt, count, batches, blocks=False, **props)
    on = sink_batches(tmp_path / "on", fmt, count, batches, blocks=True, **props)
    assert off["in_blocks"] == 0
    return on, off


def assert_same_output(on: dict[str, Any], off: dict[str, Any]) -> None:
    assert on["failed"] == off["failed"], "blocks on: the task failed where it did not without blocks"
    assert list(on["files"]) == list(off["files"]), "different objects were committed"
    for key in off["files"]:
        assert on["files"][key] == off["files"][key], f"{key} differs"
    assert (on["in"], on["tolerated"]) == (off["in"], off["tolerated"])


def chunks(msgs: Sequence[Message], size: int) -> Iterator[Sequence[Message]]:
    for start_ in range(0, len(msgs), size):
        yield msgs[start_ : start_ + size]


def mixed_values(count: int) -> tuple[list[bytes | None], list[bytes | None]]:
    """Mostly one-line objects, plus every kind of record the fast path must leave to put()."""
    values: list[bytes | None] = [row(i) for i in range(count)]
    keys: list[bytes | None] = [b"k%d" % i for i in range(count)]
    odd: dict[int, bytes | None] = {
        40: None,  # tombstone
        90: json.dumps({"id": 90, "name": "pretty", "amount": 1.5}, indent=2).encode(),
        130: b"not json at all",
        210: b"[1, 2, 3]",
    }
    for at, value in odd.items():
        for shift in (0, 1200):  # once before and once after a Parquet file fixes its schema
            if at + shift < count:
                values[at + shift] = value
    keys[170] = b"\xff\xfe not utf-8"
    if count > 1370:
        keys[1370] = b"\xc3"
    return values, keys


@pytest.mark.parametrize(
    ("fmt", "count", "total", "min_blocks"),
    # Parquet takes blocks only once a file fixed its schema (after ~1,000 rows)
    [("JSON", 70, 600, 600), ("PARQUET", 1500, 3000, 500)],
)
def test_the_runtime_writes_a_mixed_stream_the_same_with_and_without_blocks(
    tmp_path: Path, fmt: str, count: int, total: int, min_blocks: int
) -> None:
    values, keys = mixed_values(total)
    p0 = messages(values, keys=keys)
    p1 = messages(values, keys=keys, partition=1)
    batches = []  # partitions interleaved within batches, as librdkafka hands them out
    for a, b in zip(chunks(p0, 700), chunks(p1, 700), strict=True):
        batches.append([*a[:300], *b, *a[300:]])
    on, off = on_and_off(tmp_path, fmt, count, batches, **{"key.converter": KEY_STRING})
    assert_same_output(on, off)
    assert on["in_blocks"] > min_blocks, "the fast path was hardly used"
    assert len(on["files"]) >= 4
    assert off["tolerated"] >= 2 * 2  # the non-JSON value and the bad key, in both partitions


ONE_BATCH = (1500,)
AFTER_FREEZE = (1050, 450)
"""The second batch starts after the file fixed its schema; the odd record is in it."""

ODD_CASES = [
    # A Parquet file whose schema grows after 1,000 rows, consumed in one batch of 1,500. With
    # blocks on, the refused block makes the runtime put 1, 2, 4, ... 512 messages singly; without,
    # the batch is one put. Either way the file fixes its schema at row 1,000 and rolls at the new
    # field (it used to fix it at the end of the put that reached 1,000: other objects).
    pytest.param("PARQUET", {1100: row(1100, extra=True)}, ONE_BATCH, id="parquet-new-field-after-1023-rows"),
    pytest.param(  # merging an int into a double column changes nothing: a control case
        "PARQUET",
        {1100: json.dumps({"id": 1100, "name": "x", "amount": 3}).encode()},
        ONE_BATCH,
        id="parquet-int-in-double-column",
    ),
    # A lone surrogate escape in the first ~500 rows of a new Parquet file: rejected in the put
    # that delivers it, whatever its size (it used to be buffered by a small put and raised later,
    # naming a record the failing put was not given, so the task failed).
    pytest.param(
        "PARQUET",
        {100: b'{"id":100,"name":"\\ud800","amount":1.5}'},
        ONE_BATCH,
        id="parquet-lone-surrogate-before-the-schema-is-fixed",
    ),
    # After the schema is fixed, a refused block makes the runtime put 1, 2, 4, ... messages.
    # ParquetWriter converts puts under 64 rows later, in bulk: a value Arrow would refuse then
    # must be decided in its own put (the surrogate is rejected, the integer rounded), not fail
    # the file (FormatError, task stopped) as it used to.
    pytest.param(
        "PARQUET",
        {1100: b'{"id":1100,"name":"\\ud800","amount":1.5}'},
        AFTER_FREEZE,
        id="parquet-lone-surrogate-after-the-schema-is-fixed",
    ),
    pytest.param(
        "PARQUET",
        {1100: b'{"id":1100,"name":"x","amount":9007199254740993}'},
        AFTER_FREEZE,
        id="parquet-int-beyond-2**53-in-double-column",
    ),
    # -NaN is not JSON: json.loads rejects it and the record is skipped; Arrow reads it as NaN,
    # so a block holding a non-finite double is refused.
    pytest.param(
        "PARQUET", {1100: b'{"id":1100,"name":"x","amount":-NaN}'}, AFTER_FREEZE, id="parquet-minus-nan"
    ),
    pytest.param("JSON", {1100: b'{"id":1100,"name":"x","amount":-NaN}'}, AFTER_FREEZE, id="json-minus-nan"),
    pytest.param(
        "PARQUET", {1100: b'{"id":1100,"name":"\xff","amount":1.5}'}, AFTER_FREEZE, id="parquet-bad-utf8"
    ),
    pytest.param(
        "PARQUET",
        {1100: b'{"id":1100,"name":"\\ud83d\\ude00","amount":1.5}'},
        AFTER_FREEZE,
        id="parquet-surrogate-pair",
    ),
    pytest.param(
        "PARQUET",
        {1100: b'{"id":1100,"name":"x","amount":1.5,"extra":1}', 1101: None, 1102: b"[1]"},
        AFTER_FREEZE,
        id="parquet-new-field-tombstone-array-after-the-schema-is-fixed",
    ),
]


@pytest.mark.parametrize(("fmt", "special", "batches"), ODD_CASES)
def test_the_runtime_decides_odd_records_the_same_with_and_without_blocks(
    tmp_path: Path, fmt: str, special: dict[int, bytes | None], batches: tuple[int, ...]
) -> None:
    values: list[bytes | None] = [row(i) for i in range(1500)]
    for at, value in special.items():
        values[at] = value
    msgs = messages(values)
    consumed, start_ = [], 0
    for size in batches:
        consumed.append(msgs[start_ : start_ + size])
        start_ += size
    on, off = on_and_off(tmp_path, fmt, 5000, consumed)
    assert off["failed"] is None
    assert_same_output(on, off)


def test_the_fast_path_is_used_and_off_when_switched_off(tmp_path: Path) -> None:
    msgs = messages([row(i) for i in range(300)])
    on, off = on_and_off(tmp_path, "JSON", 100, [msgs])
    assert on["in_blocks"] == 300 and off["in_blocks"] == 0
    assert_same_output(on, off)
    assert list(on["files"]) == [
        "pre/t/0/000000000099_10000_10099.json",
        "pre/t/0/000000000199_10100_10199.json",
        "pre/t/0/000000000299_10200_10299.json",
    ]


# ------------------------------------------------- records_before_blocks: no block built in vain


def test_a_new_parquet_file_gets_its_first_rows_singly_and_no_block_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The task says how many rows a new schemaless Parquet file needs before it takes blocks
    (it fixes its schema at row 1,000), so the runtime never builds a block only to see it refused."""
    refused: list[int] = []
    write_lines = parquet_format.ParquetWriter.write_lines

    def counting(self: parquet_format.ParquetWriter, data: bytes, count: int, prepared: Any = None) -> bool:
        taken = write_lines(self, data, count, prepared)
        if not taken:
            refused.append(count)
        return taken

    monkeypatch.setattr(parquet_format.ParquetWriter, "write_lines", counting)
    msgs = messages([row(i) for i in range(5000)])
    on, off = on_and_off(tmp_path, "PARQUET", 2500, list(chunks(msgs, 700)))
    assert_same_output(on, off)
    assert refused == []
    assert on["in_blocks"] == 5000 - 2 * 1000  # all but each file's first 1,000 rows
    assert len(on["files"]) == 2


def test_records_before_blocks_counts_down_to_the_freeze(tmp_path: Path) -> None:
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    task = start(tmp_path, plan)
    try:
        task.open([TP])
        assert task.records_before_blocks("t", 0, 0) == 1  # no file yet: its first row decides
        msgs = messages([row(i) for i in range(1200)])
        task.put(records_of(plan, msgs[:1]))
        assert task.records_before_blocks("t", 0, 1) == 999
        task.put(records_of(plan, msgs[1:999]))
        assert task.records_before_blocks("t", 0, 999) == 1
        task.put(records_of(plan, msgs[999:1000]))
        assert task.records_before_blocks("t", 0, 1000) == 0
        assert task.put_block(block_of(msgs[1000:])) == 200
    finally:
        task.stop()


# ------------------------------------------------ prepare_blocks: parsing ahead on another thread


def _counting_parser(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    parse = parquet_format.LineParser.__call__

    def counting(self: parquet_format.LineParser, data: bytes) -> Any:
        calls.append(data.count(b"\n") + 1)
        return parse(self, data)

    monkeypatch.setattr(parquet_format.LineParser, "__call__", counting)
    return calls


def test_a_prepared_block_is_parsed_once_ahead_and_written_as_put_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = _counting_parser(monkeypatch)
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    msgs = messages([row(i) for i in range(1500)])
    task = start(tmp_path / "b", plan)
    try:
        task.open([TP])
        task.put(records_of(plan, msgs[:1000]))  # the file fixes its schema
        blocks = [block_of(msgs[1000:1200]), block_of(msgs[1200:1500])]
        assert task.prepare_blocks(blocks) == 2
        assert all(b.prepared is not None for b in blocks)
        assert [task.put_block(b) for b in blocks] == [200, 300]
        assert calls == [200, 300], "parsed again instead of using the prepared table"
        task.close([TP])
    finally:
        task.stop()
    assert put_only(tmp_path / "a", plan, msgs) == decoded(committed(tmp_path / "b"))


def test_a_block_prepared_for_a_file_that_is_gone_is_parsed_for_the_new_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file the block was prepared for was committed meanwhile (the timer, a rebalance): the
    prepared table belongs to another file's parser and must not be used."""
    calls = _counting_parser(monkeypatch)
    plan = plan_for(StoreFormat.PARQUET, count=5000)
    msgs = messages([row(i) for i in range(2200)])
    task = start(tmp_path, plan)
    try:
        task.open([TP])
        task.put(records_of(plan, msgs[:1000]))
        block = block_of(msgs[2000:2100])
        assert task.prepare_blocks([block]) == 1
        task.close([TP])  # commits the file
        task.open([TP])
        task.put(records_of(plan, msgs[1000:2000]))  # a new file, schema fixed anew
        assert task.put_block(block) == 100
        assert calls == [100, 100]
        task.close([TP])
    finally:
        task.stop()
    assert sum(len(rows) for _, rows in decoded(committed(tmp_path)).values()) == 2100


def test_blocks_that_do_not_fit_the_open_file_or_need_rows_first_are_not_prepared(tmp_path: Path) -> None:
    plan = plan_for(StoreFormat.PARQUET, count=1100)
    msgs = messages([row(i) for i in range(1200)])
    task = start(tmp_path, plan)
    try:
        task.open([TP])
        assert task.prepare_blocks([block_of(msgs[:10])]) == 0  # no file yet
        task.put(records_of(plan, msgs[:500]))
        assert task.prepare_blocks([block_of(msgs[500:510])]) == 0  # schema not fixed yet
        task.put(records_of(plan, msgs[500:1000]))
        assert task.prepare_blocks([block_of(msgs[1000:1200])]) == 0  # 200 > room of 100
        assert task.prepare_blocks([block_of(msgs[1000:1100])]) == 1
    finally:
        task.stop()


def _parquet_runtime(tmp_path: Path) -> SinkRuntime:
    """A runtime for a PARQUET statement that never connects (its loop helpers are tested)."""
    return SinkRuntime(
        parse_connector_config({"name": "c", "config": {
            "connector.class": "x", "topics": "t",
            "connect.s3.kcql": "INSERT INTO bkt:pre SELECT * FROM t STOREAS `PARQUET`",
            "connect.storage": "local", "connect.local.root": str(tmp_path),
        }}),
        RuntimeOptions("unused:9092"),
    )


def test_the_runtime_forgets_held_runs_of_rebalanced_partitions(tmp_path: Path) -> None:
    from sink.runtime.loop import _Batch

    runtime = _parquet_runtime(tmp_path)
    other, third = TopicPartition("t", 1), TopicPartition("t", 2)
    runtime._held.append(_Batch([(TP, [], None), (other, [], None), (TP, [], None)], 1))
    runtime._held.append(_Batch([(third, [], None), (TP, [], None)], 1))
    runtime._forget_held([TP])
    assert [[tp for tp, _, _ in batch.runs] for batch in runtime._held] == [[other], [third]]


def test_the_runtime_writes_held_batches_in_order_and_drops_runs_seeked_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A prepared batch waits for the next consume(); an unprepared one or an empty consume()
    writes everything held first; a partition seeked back loses its runs in later held batches."""
    from sink.runtime import loop as runtime_module
    from sink.runtime.loop import _Batch

    runtime = _parquet_runtime(tmp_path)
    other = TopicPartition("t", 1)
    written: list[str] = []
    seeks = {"b": {TP}}  # writing batch "b" seeks TP back

    def process(batch: _Batch) -> set[TopicPartition]:
        name = batch.runs[0][1][0]
        written.append(f"{name}:" + ",".join(str(tp.partition) for tp, _, _ in batch.runs))
        return seeks.get(name, set())

    monkeypatch.setattr(runtime, "_process_batch", process)

    def batch(name: str, *tps: TopicPartition, prepared: int = 1) -> _Batch:
        return _Batch([(tp, [name], None) for tp in tps], prepared)

    monkeypatch.setattr(runtime_module, "HELD_BATCHES", 1)
    runtime._advance(batch("a", TP))
    assert written == []  # held while the next batch is consumed
    runtime._advance(batch("b", TP, other))
    assert written == ["a:0"]
    runtime._advance(batch("c", other, TP))
    assert written == ["a:0", "b:0,1"]
    runtime._advance(None)  # nothing more consumed: write what is held, minus TP's stale run
    assert written == ["a:0", "b:0,1", "c:1"] and not runtime._held

    written.clear()
    monkeypatch.setattr(runtime_module, "HELD_BATCHES", 2)
    runtime._advance(batch("d", TP))
    runtime._advance(batch("e", other))
    assert written == []
    runtime._advance(batch("f", TP, prepared=0))  # nothing to prepare: no reason to wait
    assert written == ["d:0", "e:1", "f:0"] and not runtime._held
