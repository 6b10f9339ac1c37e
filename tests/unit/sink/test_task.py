"""SinkTask on the real local filesystem: writers, flush policies, error semantics, bounds."""

from __future__ import annotations

import gzip
import io
import json
import os
import time
from collections import Counter
from pathlib import Path
from typing import Any

import fastavro
import pytest

import kcql
from formats.base import RecordFormatError
from kcql.errors import ConfigError, SinkError
from kcql.model import FlushSettings, PartitionField, SinkPlan, StoreFormat
from partitioners import PartitionError, is_data_key
from sink.records.record import SinkRecord, TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records

TP = TopicPartition("t", 0)


def _start(tmp_path: Path, plan: SinkPlan, **extra: str) -> SinkTask:
    task = SinkTask()
    task.start(
        {"name": "c", "connect.s3.kcql": "-", "connect.storage": "local",
         "connect.local.root": str(tmp_path / "root"),
         "connect.s3.local.tmp.directory": str(tmp_path / "staging")} | extra,
        plans=[plan],
    )
    return task


def _plan(**kw: Any) -> SinkPlan:
    flush = kw.pop("flush", FlushSettings(count=100, size=10**9, interval=3600))
    return SinkPlan(bucket="bkt", prefix="pre", source="t", flush=flush, **kw)


def _data(tmp_path: Path) -> dict[str, bytes]:
    base = tmp_path / "root" / "bkt"
    out = {}
    for directory, _, files in os.walk(base):
        for name in files:
            key = (Path(directory) / name).relative_to(base).as_posix()
            if is_data_key(key, "pre"):
                out[key] = (Path(directory) / name).read_bytes()
    return out


def _json_ids(tmp_path: Path) -> Counter[int]:
    ids: Counter[int] = Counter()
    for key, data in _data(tmp_path).items():
        text = gzip.decompress(data) if key.endswith(".gz") else data
        ids.update(json.loads(line)["id"] for line in text.decode().splitlines())
    return ids


def rec(offset: int, value: Any = None, **kw: Any) -> SinkRecord:
    value = value if value is not None else {"id": offset}
    return SinkRecord("t", 0, offset, 1000 + offset, value=value, **kw)


def test_count_flush_and_pre_commit(tmp_path: Path) -> None:
    task = _start(tmp_path, _plan(flush=FlushSettings(count=3, size=10**9, interval=3600)))
    try:
        task.open([TP])
        put_records(task, [rec(i) for i in range(7)])
        assert sorted(_data(tmp_path)) == [
            "pre/t/0/000000000002_1000_1002.json", "pre/t/0/000000000005_1003_1005.json",
        ]
        assert task.pre_commit({TP: 7}) == {TP: 6}
        assert task.pre_commit({TP: 5}) == {TP: 5}  # never past what the caller consumed
        assert task.pre_commit({TopicPartition("t", 9): 3}) == {}  # not ours
    finally:
        task.stop()


def test_size_flush(tmp_path: Path) -> None:
    task = _start(tmp_path, _plan(flush=FlushSettings(count=10**6, size=80, interval=3600)))
    try:
        task.open([TP])
        for i in range(5):  # ~45 bytes each: a file is due after its second record
            put_records(task, [rec(i, {"id": i, "pad": "y" * 30})])
    finally:
        task.stop()
    assert sorted(_data(tmp_path)) == [
        "pre/t/0/000000000001_1000_1001.json", "pre/t/0/000000000003_1002_1003.json",
    ]


def test_connector_codec_applies(tmp_path: Path) -> None:
    plan = _plan(flush=FlushSettings(count=2, size=10**9, interval=3600))
    task = _start(tmp_path, plan, **{"connect.s3.compression.codec": "GZIP"})
    try:
        task.open([TP])
        put_records(task, [rec(i) for i in range(4)])
    finally:
        task.stop()
    assert len(_data(tmp_path)) == 2
    assert all(key.endswith(".gz") for key in _data(tmp_path))
    assert _json_ids(tmp_path) == Counter(range(4))


def test_replayed_records_are_skipped(tmp_path: Path) -> None:
    task = _start(tmp_path, _plan(flush=FlushSettings(count=2, size=10**9, interval=3600)))
    try:
        task.open([TP])
        put_records(task, [rec(i) for i in range(3)])
        put_records(task, [rec(i) for i in range(5)])  # a redelivery overlapping the first batch
        task.close([TP])
    finally:
        task.stop()
    assert _json_ids(tmp_path) == Counter(range(5))


def test_partitionby_safe_offset_is_min_of_open_writers(tmp_path: Path) -> None:
    plan = _plan(
        flush=FlushSettings(count=2, size=10**9, interval=3600),
        partition_by=(PartitionField("g", "value", ("g",)),), include_keys=True,
    )
    task = _start(tmp_path, plan)
    try:
        task.open([TP])
        # g=a gets 0, 2 (flushed), g=b gets 1 (open): only offset 0 is safe
        put_records(task, [rec(i, {"id": i, "g": g}) for i, g in enumerate("aba")])
        assert sorted(_data(tmp_path)) == ["pre/g=a/t(0_000000000002).json"]
        assert task.pre_commit({TP: 3}) == {TP: 1}
    finally:
        task.stop()
    index = json.loads((tmp_path / "root" / "bkt" / ".indexes" / "c" / "t" / "0.json").read_bytes())
    assert index["committedOffset"] == 0
    assert index["paths"] == {"g=a": 2}
    again = _start(tmp_path, plan)
    try:
        assert again.open([TP]) == {TP: 1}
        put_records(again, [rec(i, {"id": i, "g": g}) for i, g in zip((1, 2, 3), "bab", strict=True)])
        again.close([TP])
    finally:
        again.stop()
    assert _json_ids(tmp_path) == Counter(range(4))


def test_schema_change_rolls_the_file(tmp_path: Path) -> None:
    schema_a = {"type": "record", "name": "A", "fields": [{"name": "id", "type": "long"}]}
    optional_x = {"name": "x", "type": ["null", "string"], "default": None}
    schema_b = {"type": "record", "name": "A", "fields": [{"name": "id", "type": "long"}, optional_x]}
    task = _start(tmp_path, _plan(format=StoreFormat.AVRO))
    try:
        task.open([TP])
        put_records(task, [rec(0, value_schema=schema_a), rec(1, value_schema=schema_a),
                  rec(2, {"id": 2, "x": "new"}, value_schema=schema_b)])
        task.close([TP])
    finally:
        task.stop()
    files = _data(tmp_path)
    assert sorted(files) == ["pre/t/0/000000000001_1000_1001.avro", "pre/t/0/000000000002_1002_1002.avro"]
    rows = [list(fastavro.reader(io.BytesIO(files[k]))) for k in sorted(files)]
    assert [[r["id"] for r in f] for f in rows] == [[0, 1], [2]]


def test_record_format_error_writes_the_prefix_and_propagates(tmp_path: Path) -> None:
    task = _start(tmp_path, _plan(format=StoreFormat.TEXT))
    try:
        task.open([TP])
        batch = [rec(0, "a"), rec(1, "b"), rec(2, {"not": "text"}), rec(3, "c")]
        with pytest.raises(RecordFormatError) as err:
            put_records(task, batch)
        assert err.value.record is batch[2]
        assert "offset 2" in str(err.value)
        assert task.pre_commit({TP: 4}) == {}  # a, b are in an open file
        put_records(task, batch[3:])  # the runtime's error policy skipped the bad record
        task.close([TP])
    finally:
        task.stop()
    assert list(_data(tmp_path).values()) == [b"a\nb\nc\n"]


def test_partition_error_carries_the_record(tmp_path: Path) -> None:
    plan = _plan(partition_by=(PartitionField("_key", "key"),), include_keys=True)
    task = _start(tmp_path, plan)
    try:
        task.open([TP])
        batch = [rec(0, key="k1"), rec(1, key=None), rec(2, key="k2")]
        with pytest.raises(PartitionError) as err:
            put_records(task, batch)
        assert err.value.record is batch[1]  # type: ignore[attr-defined]
        put_records(task, batch[2:])
        task.close([TP])
    finally:
        task.stop()
    assert sorted(_data(tmp_path)) == [
        "pre/key=k1/t(0_000000000000).json", "pre/key=k2/t(0_000000000002).json",
    ]


def test_bounded_open_writers(tmp_path: Path) -> None:
    plan = _plan(partition_by=(PartitionField("g", "value", ("g",)),), include_keys=False)
    task = _start(tmp_path, plan, **{"connect.s3.max.open.writers": "10"})
    fds_before = len(os.listdir("/proc/self/fd"))
    try:
        task.open([TP])
        for start in range(0, 300, 50):
            put_records(task, [rec(i, {"id": i, "g": f"v{i}"}) for i in range(start, start + 50)])
            assert len(task._pool) <= 10
            assert len(os.listdir("/proc/self/fd")) <= fds_before + 15
        task.close([TP])
    finally:
        task.stop()
    assert _json_ids(tmp_path) == Counter(range(300))
    assert len(_data(tmp_path)) == 300


def test_timer_error_is_raised_by_the_next_put(tmp_path: Path) -> None:
    task = _start(tmp_path, _plan(flush=FlushSettings(count=100, size=10**9, interval=1)))

    def hook(step: str) -> None:
        raise OSError("disk on fire")

    try:
        task.open([TP])
        task.fault_hook = hook
        put_records(task, [rec(0)])
        deadline = time.monotonic() + 5
        while task._timer is not None and task._timer._error is None and time.monotonic() < deadline:
            time.sleep(0.05)
        with pytest.raises(OSError, match="disk on fire"):
            put_records(task, [rec(1)])
    finally:
        task.stop()


def test_start_reports_every_problem(tmp_path: Path) -> None:
    plans = [
        SinkPlan(bucket="Bad_Bucket", prefix="", source="a"),
        SinkPlan(bucket="ok-bucket", prefix="", source="b", format=StoreFormat.CSV, compression_codec="ZSTD"),
    ]
    with pytest.raises(ConfigError) as err:
        SinkTask().start({"name": "c", "connect.s3.kcql": "-"}, plans=plans)
    assert len(err.value.problems) == 2
    with pytest.raises(ConfigError, match=r"inside connect\.local\.root"):
        SinkTask().start(
            {"name": "c", "connect.s3.kcql": "-", "connect.storage": "local",
             "connect.local.root": str(tmp_path), "connect.s3.local.tmp.directory": str(tmp_path / "stage")},
            plans=[_plan()],
        )


def test_misuse_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(SinkError, match="not started"):
        SinkTask().open([TP])
    task = _start(tmp_path, _plan())
    try:
        with pytest.raises(SinkError, match="not open on this task"):
            put_records(task, [rec(0)])
        with pytest.raises(SinkError, match="Can't find the KCQL for source topic"):
            task.open([TopicPartition("other", 0)])
    finally:
        task.stop()
    assert "secret" not in repr(task)


def test_staging_of_dead_tasks_is_removed_but_live_tasks_are_kept(tmp_path: Path) -> None:
    from sink.commit.staging import StagingArea

    live = StagingArea(tmp_path, "conn", "live")
    (live.new_file(TP, "json")).write_bytes(b"x")
    dead = tmp_path / "conn" / "dead" / "t" / "0"
    dead.mkdir(parents=True)
    (dead / "leftover.json").write_bytes(b"uncommitted")
    fresh = StagingArea(tmp_path, "conn", "fresh")
    try:
        assert not (tmp_path / "conn" / "dead").exists()
        assert any(live.partition_dir(TP).iterdir())
    finally:
        fresh.close()
        live.close()
    assert not (tmp_path / "conn" / "live").exists()


def test_connector_wide_padding_pads_offsets_only_as_lenses_reads_it(tmp_path: Path) -> None:
    """Lenses' PaddingStrategySettings: connect.s3.padding.strategy (any case) pads the offset, with
    0, to connect.s3.padding.length; the partition stays unpadded."""
    plan = kcql.parse_one("INSERT INTO bkt:pre SELECT * FROM t PROPERTIES('flush.count'=2)")
    padding = {"connect.s3.padding.strategy": "rightpad", "connect.s3.padding.length": "5"}
    task = _start(tmp_path, plan, **padding)
    try:
        task.open([TP])
        put_records(task, [rec(i) for i in range(2)])
    finally:
        task.stop()
    assert sorted(_data(tmp_path)) == ["pre/t/0/10000_1000_1001.json"]


def test_connector_wide_padding_and_a_statements_padding_properties_are_refused_together(
    tmp_path: Path,
) -> None:
    plan = kcql.parse_one("INSERT INTO bkt:pre SELECT * FROM t PROPERTIES('padding.length.offset'=3)")
    with pytest.raises(ConfigError, match="Unable to process both padding"):
        _start(tmp_path, plan, **{"connect.s3.padding.strategy": "LeftPad"})
