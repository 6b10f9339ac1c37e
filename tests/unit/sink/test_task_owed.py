"""Rolling an interrupted conditional commit forward by replay (the index's ``owed`` files).

A first task announces a file (step 1 of the conditional protocol) and dies before its PUT. The
next owner cannot roll that back, since a zombie may still PUT it, so it must re-produce exactly
that file from the replay and commit it under the announced key, whatever its own flush limits,
timer, staging budget or writer limit say; a replay that cannot give exactly those records is an
error naming the file. Real local storage; files read back with the json module and fastavro.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import fastavro
import pytest

from kcql.model import FlushSettings, PartitionField, SinkPlan, StoreFormat
from sink.commit.committer import CommitError
from sink.commit.index import IndexState, PendingCommit
from tests.batches import put_records
from tests.unit.sink.test_task import TP, _data, _json_ids, _plan, _start, rec

INDEX = Path("root") / "bkt" / ".indexes" / "c" / "t" / "0.json"
ANNOUNCED = "pre/t/0/000000000002_1000_1002.json"
"""The first file of a count=3 run: offsets 0..2 (the name holds the last offset and timestamps)."""


class Died(Exception):
    pass


def _announce_and_die(tmp_path: Path, plan: SinkPlan, records: list[Any]) -> None:
    """A task announces its first file in the index and dies before uploading it."""
    task = _start(tmp_path, plan, **{"connect.s3.commit.protocol": "conditional"})

    def die(step: str) -> None:
        if step == "after-pending-recorded":
            raise Died(step)

    task.fault_hook = die
    try:
        task.open([TP])
        with pytest.raises(Died):
            put_records(task, records)
    finally:
        task.stop()
    assert _data(tmp_path) == {}, "nothing may be visible: the PUT never happened"


def _index(tmp_path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((tmp_path / INDEX).read_bytes())
    return doc


def _count(n: int, **kw: Any) -> SinkPlan:
    return _plan(flush=FlushSettings(count=n, size=10**9, interval=kw.pop("interval", 3600)), **kw)


def test_the_owed_file_is_re_produced_exactly_whatever_the_new_flush_limits(tmp_path: Path) -> None:
    _announce_and_die(tmp_path, _count(3), [rec(i) for i in range(5)])
    # the successor flushes at every record, on a timer that is always due, with a staging budget
    # of one byte and one open writer: none of it may cut the owed file short
    task = _start(
        tmp_path, _count(1, interval=0),
        **{"connect.s3.local.tmp.max.bytes": "1", "connect.s3.max.open.writers": "1"},
    )
    try:
        assert task.open([TP]) == {}  # nothing committed yet: replay from the beginning
        owed = _index(tmp_path)["owed"]
        assert [(o["finalKey"], o["firstOffset"], o["lastOffset"]) for o in owed] == [(ANNOUNCED, 0, 2)]
        assert _index(tmp_path)["pending"] is None
        put_records(task, [rec(0), rec(1)])
        task.flush_due()  # the timer: the owed writer is not complete, so it stays open
        assert _data(tmp_path) == {}
        assert TP not in task.pre_commit({TP: 2}), "Kafka offsets passed records of the owed file"
        put_records(task, [rec(2), rec(3), rec(4)])
        task.close([TP])
    finally:
        task.stop()
    files = _data(tmp_path)
    assert [json.loads(line)["id"] for line in files[ANNOUNCED].decode().splitlines()] == [0, 1, 2]
    later = ["pre/t/0/000000000003_1003_1003.json", "pre/t/0/000000000004_1004_1004.json"]
    assert sorted(files) == [ANNOUNCED, *later]
    assert _json_ids(tmp_path) == dict.fromkeys(range(5), 1)
    state = _index(tmp_path)
    assert state["pending"] is None and "owed" not in state and state["committedOffset"] == 4


def test_a_zombie_upload_of_the_owed_file_before_the_replay_counts_as_done(tmp_path: Path) -> None:
    _announce_and_die(tmp_path, _count(3), [rec(i) for i in range(5)])
    task = _start(tmp_path, _count(2))
    try:
        task.open([TP])
        # the zombie's PUT lands now, with the announced records (bytes of its own)
        zombie_file = tmp_path / "root" / "bkt" / ANNOUNCED
        zombie_file.parent.mkdir(parents=True)
        zombie_file.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(3)))
        put_records(task, [rec(i) for i in range(6)])  # its own PUT of the owed file gets 412
        task.close([TP])
    finally:
        task.stop()
    assert _json_ids(tmp_path) == dict.fromkeys(range(6), 1)
    assert "owed" not in _index(tmp_path)


def test_an_owed_file_already_stored_at_open_is_counted_without_a_replay_of_it(tmp_path: Path) -> None:
    _announce_and_die(tmp_path, _count(3), [rec(i) for i in range(5)])
    first = _start(tmp_path, _count(3))
    first.open([TP])  # owes it, then dies before the replay
    first.stop()
    assert [o["finalKey"] for o in _index(tmp_path)["owed"]] == [ANNOUNCED]
    zombie_file = tmp_path / "root" / "bkt" / ANNOUNCED
    zombie_file.parent.mkdir(parents=True)
    zombie_file.write_text("".join(json.dumps({"id": i}) + "\n" for i in range(3)))
    task = _start(tmp_path, _count(3))
    try:
        assert task.open([TP]) == {TP: 3}  # the late upload is found: the index advances past it
        put_records(task, [rec(i) for i in range(3, 5)])
        task.close([TP])
    finally:
        task.stop()
    assert _json_ids(tmp_path) == dict.fromkeys(range(5), 1)


def test_records_gone_from_kafka_are_an_error_naming_the_owed_file(tmp_path: Path) -> None:
    _announce_and_die(tmp_path, _count(3), [rec(i) for i in range(5)])
    task = _start(tmp_path, _count(3))
    try:
        task.open([TP])
        with pytest.raises(CommitError, match=r"cannot re-produce .*000000000002_1000_1002\.json.*"
                                              r"records 0\.\.2.*first record is now offset 1"):
            put_records(task, [rec(i) for i in range(1, 5)])  # retention removed offset 0
    finally:
        task.stop()
    assert _data(tmp_path) == {}


def test_a_replay_that_passes_the_owed_range_without_its_last_record_is_an_error(tmp_path: Path) -> None:
    kind = _plan(flush=FlushSettings(count=2, size=10**9, interval=3600),
                 partition_by=(PartitionField("kind", "value", ("kind",)),), include_keys=True)
    a, b = {"kind": "a"}, {"kind": "b"}
    # "a" records at 0 and 1 make the announced file; "b" at 2 stays open
    first = [rec(0, {"id": 0, **a}), rec(1, {"id": 1, **a}), rec(2, {"id": 2, **b})]
    _announce_and_die(tmp_path, kind, first)
    task = _start(tmp_path, kind)
    try:
        task.open([TP])
        put_records(task, [rec(0, {"id": 0, **a})])
        with pytest.raises(CommitError, match=r"path 'kind=a'.*the replay reached offset 2 without it"):
            # offset 1 now belongs to "b" (a transform that is not deterministic): "a" never gets it
            put_records(task, [rec(1, {"id": 1, **b}), rec(2, {"id": 2, **b})])
    finally:
        task.stop()


def test_a_schema_roll_inside_the_owed_range_is_an_error_right_after_it_is_not(tmp_path: Path) -> None:
    schema_a = {"type": "record", "name": "A", "fields": [{"name": "id", "type": "long"}]}
    optional_x = {"name": "x", "type": ["null", "string"], "default": None}
    schema_b = {"type": "record", "name": "A", "fields": [{"name": "id", "type": "long"}, optional_x]}
    avro = _count(3, format=StoreFormat.AVRO)
    _announce_and_die(tmp_path, avro, [rec(i, value_schema=schema_a) for i in range(3)])

    task = _start(tmp_path, avro)
    try:
        task.open([TP])
        with pytest.raises(CommitError, match="the format starts a new file at offset 1"):
            changed = rec(1, {"id": 1, "x": "y"}, value_schema=schema_b)
            put_records(task, [rec(0, value_schema=schema_a), changed])
    finally:
        task.stop()

    task = _start(tmp_path, avro)
    try:
        task.open([TP])  # the announced file is cut before the new schema, which starts the next
        put_records(task, [*(rec(i, value_schema=schema_a) for i in range(3)),
                           rec(3, {"id": 3, "x": "y"}, value_schema=schema_b)])
        task.close([TP])
    finally:
        task.stop()
    files = _data(tmp_path)
    owed, after = "pre/t/0/000000000002_1000_1002.avro", "pre/t/0/000000000003_1003_1003.avro"
    assert sorted(files) == [owed, after]
    rows = {k: [r["id"] for r in fastavro.reader(io.BytesIO(v))] for k, v in files.items()}  # type: ignore[index]
    assert rows == {owed: [0, 1, 2], after: [3]}


def test_index_keeps_committed_offset_below_an_owed_file() -> None:
    owed = PendingCommit(None, "k", 20, "a", None, 9, first_offset=12)
    state = IndexState(owner="me", epoch=2, committed_offset=9, owed=(owed,))
    later = state.after_commit("b", last_offset=30, committed_after=29)  # another path commits meanwhile
    assert later.committed_offset == 11 and later.paths == {"b": 30}
    done = later.after_commit("a", 20, 9, final_key="k")
    assert done.owed == () and done.committed_offset == 11  # b's committedAfter was capped, not kept
    assert IndexState.from_bytes(later.to_bytes(), "x") == later
    copy_pending = PendingCommit(".temp-upload/x", "f", 9, "p", '"e"', 7)
    legacy = IndexState(owner="me", pending=copy_pending)
    assert IndexState.from_bytes(legacy.to_bytes(), "x") == legacy


def test_auto_is_conditional_only_where_the_store_enforces_conditional_writes(tmp_path: Path) -> None:
    from sink.commit.committer import Committer
    from sink.storage.local import LocalStorage

    strong = LocalStorage(tmp_path)
    assert Committer(strong, "c").protocol == "conditional"
    assert Committer(strong, "c", "copy").protocol == "copy"
    weak = LocalStorage(tmp_path)
    weak.supports_conditional_writes = False
    assert Committer(weak, "c").protocol == "copy"


def test_a_spark_micro_batch_that_would_cut_an_owed_file_ends_after_it(tmp_path: Path) -> None:
    """A stream that starts anew (say, a new checkpoint) plans capped ranges from the index's
    committed offset; one ending inside an owed file's range could not re-produce it, so the plan
    moves that end just past the file. Ends outside the range, and other partitions, stay."""
    from sink.config.settings import parse_settings
    from sink.records.record import TopicPartition
    from sink.spark.offsets import owed_ranges, past_owed

    plan = _count(3)
    _announce_and_die(tmp_path, plan, [rec(i) for i in range(5)])
    task = _start(tmp_path, _count(3))
    try:
        task.open([TP])  # the take-over turns the announced file into an owed one
    finally:
        task.stop()
    settings = parse_settings({
        "name": "c", "connect.s3.kcql": "-", "connect.storage": "local",
        "connect.local.root": str(tmp_path / "root"),
    })
    other = TopicPartition("t", 1)
    owed = owed_ranges(settings, [plan], [TP, other])
    assert owed == {TP: [(0, 2, ANNOUNCED)]}
    assert past_owed({TP: 2, other: 2}, owed) == {TP: 3, other: 2}  # would end after offset 1: inside
    assert past_owed({TP: 3}, owed) == {TP: 3}  # ends right after the file: nothing to move
    assert past_owed({TP: 0}, owed) == {TP: 0}  # an empty range before it
