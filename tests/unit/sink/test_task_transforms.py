"""Transforms and the KCQL projection on the write path: consumed messages → BatchBuilder with the
connector's chain → the error policy's put → committed files, read back with the json module and
pyarrow. Real local storage; the exactly-once index is on (the default).

What is pinned here: filtered and fanned-out records land once each, a fan-out group never spans
two files (a count roll takes the whole group, and a replay after a crash neither loses nor
duplicates a group's records), a failing transform is a record error at its own place, a
projection gives exactly the selected fields (and schema), and one that cannot be applied is a
record error.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message

import kcql
from kcql.errors import ConfigError, RecordError
from partitioners import is_data_key
from sink.config.errors import parse_error_settings
from sink.events import NO_OBSERVER
from sink.records.converters import RecordConverter, StringConverter, record_converter
from sink.records.intake import BatchBuilder
from sink.records.record import TopicPartition
from sink.runtime.policy import RecordPolicy, TaskFailedError, put_tolerating
from sink.task.task import SinkTask
from sink.transforms import PYTHON_TRANSFORM, parse_transforms
from tests.unit.sink.consumed import avro_converter, messages, wire

M = "tests.unit.transforms.mappers"
TP = TopicPartition("t", 0)
STRING = "org.apache.kafka.connect.storage.StringConverter"


def python(alias: str, function: str) -> dict[str, str]:
    return {f"transforms.{alias}.type": PYTHON_TRANSFORM, f"transforms.{alias}.function": function}


class Sink:
    """One task, fed as the runtime feeds it: BatchBuilder with the chain, put through the policy."""

    def __init__(self, root: Path, kcql_text: str, *, converter: Any = None, **props: str) -> None:
        self.root = root
        self.props = {
            "name": "c",
            "connect.s3.kcql": kcql_text,
            "connect.storage": "local",
            "connect.local.root": str(root / "store"),
            "connect.s3.local.tmp.directory": str(root / "staging"),
            "key.converter": STRING,
            "errors.tolerance": "all",
            **props,
        }
        chain = parse_transforms(self.props)
        self.builder = BatchBuilder(converter or record_converter(self.props), transforms=chain)
        self.policy = RecordPolicy(parse_error_settings(self.props)[0], NO_OBSERVER)
        self.task = SinkTask()
        self.task.start(self.props, plans=kcql.parse(kcql_text))
        self.resume = self.task.open([TP])
        self.written = 0

    def put(self, msgs: Sequence[Message]) -> None:
        for batch in self.builder.build("t", 0, msgs):
            self.written += put_tolerating(self.task, batch, self.policy)

    def stop(self, *, commit: bool = True) -> None:
        if commit:
            self.task.close([TP])
        self.task.stop()


def files(root: Path, bucket: str = "b") -> dict[str, bytes]:
    base = root / "store" / bucket
    out = {}
    for directory, _, names in os.walk(base):
        for name in names:
            key = (Path(directory) / name).relative_to(base).as_posix()
            if is_data_key(key, "p"):
                out[key] = (Path(directory) / name).read_bytes()
    return dict(sorted(out.items()))


def json_rows(data: dict[str, bytes]) -> list[Any]:
    return [json.loads(line) for body in data.values() for line in body.splitlines()]


def doc(i: int, items: Sequence[str] = ("x", "y")) -> bytes:
    return json.dumps({"id": i, "name": f"n{i}", "items": list(items)}).encode()


# ------------------------------------------------------------------------------- Python mappers


def test_a_mapper_that_filters_and_fans_out_writes_each_record_once(tmp_path: Path) -> None:
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT * FROM t STOREAS JSON PROPERTIES('flush.count'=3)",
        transforms="even,split",
        **python("even", f"{M}:only_even"),
        **python("split", f"{M}:one_per_item"),
    )
    sink.put(messages([doc(i) for i in range(6)]))
    sink.stop()
    data = files(tmp_path)
    rows = json_rows(data)
    assert rows == [{"id": i, "item": item} for i in (0, 2, 4) for item in ("x", "y")]
    # flush.count=3 with groups of two: a file takes a whole group rather than split it
    assert [len(body.splitlines()) for body in data.values()] == [4, 2]
    assert len(set(data)) == 2 and sink.written == 6


def test_a_fan_out_group_never_spans_two_files_and_a_replay_neither_loses_nor_duplicates(
    tmp_path: Path,
) -> None:
    props = {"transforms": "split", **python("split", f"{M}:one_per_item")}
    text = "INSERT INTO b:p SELECT * FROM t STOREAS JSON PROPERTIES('flush.count'=2)"
    msgs = messages([doc(i, ("a", "b", "c")) for i in range(4)])
    first = Sink(tmp_path, text, **props)
    first.put(msgs[:3])
    first.stop(commit=False)  # a crash: what is not committed is lost, the index says what is
    committed_before = files(tmp_path)
    assert [len(body.splitlines()) for body in committed_before.values()] == [3, 3, 3]
    second = Sink(tmp_path, text, **props)
    assert second.resume == {TP: 3}
    second.put(msgs)  # the consumer may hand the same messages again: a rewind
    second.stop()
    rows = json_rows(files(tmp_path))
    assert rows == [{"id": i, "item": item} for i in range(4) for item in "abc"]


def test_a_failing_mapper_is_a_record_error_in_its_place(tmp_path: Path) -> None:
    props = {"transforms": "odd", **python("odd", f"{M}:fail_on_three")}
    sink = Sink(tmp_path, "INSERT INTO b:p SELECT * FROM t STOREAS JSON", **props)
    sink.put(messages([doc(i) for i in range(5)]))
    sink.stop()
    rows = json_rows(files(tmp_path))
    assert [r["id"] for r in rows] == [0, 1, 2, 4]
    assert sink.policy.tolerated == 1


def test_a_failing_mapper_stops_the_task_naming_the_record_and_stage(tmp_path: Path) -> None:
    props = {"transforms": "odd", **python("odd", f"{M}:fail_on_three"), "errors.tolerance": "none"}
    sink = Sink(tmp_path, "INSERT INTO b:p SELECT * FROM t STOREAS JSON", **props)
    says = r"transform 'odd' failed .* partition 0 offset 3: ValueError"
    with pytest.raises(TaskFailedError, match=says) as caught:
        sink.put(messages([doc(i) for i in range(5)]))
    cause = caught.value.__cause__
    assert isinstance(cause, RecordError) and cause.stage == "TRANSFORMATION"
    sink.stop()


def test_a_mapper_changes_the_written_json_not_the_raw_text(tmp_path: Path) -> None:
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT * FROM t STOREAS JSON",
        transforms="up",
        **python("up", f"{M}:upper_in_place"),
    )
    sink.put(messages([doc(1)]))
    sink.stop()
    assert json_rows(files(tmp_path)) == [{"id": 1, "name": "N1", "items": ["x", "y"]}]


# ------------------------------------------------------------------------------- projection


def parquet(data: dict[str, bytes]) -> pa.Table:
    return pa.concat_tables([pq.read_table(io.BytesIO(body)) for body in data.values()])


def test_a_projection_with_aliases_writes_exactly_those_columns(tmp_path: Path) -> None:
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT id, name AS who, meta.city AS city, _.offset FROM t STOREAS JSON",
    )
    values = [
        json.dumps({"id": 1, "name": "a", "meta": {"city": "Lyon"}, "secret": 1}).encode(),
        json.dumps({"id": 2, "name": "b", "secret": 2}).encode(),
    ]
    sink.put(messages(values))
    sink.stop()
    assert json_rows(files(tmp_path)) == [
        {"id": 1, "who": "a", "city": "Lyon", "offset": 0},
        {"id": 2, "who": "b", "city": None, "offset": 1},  # sparse JSON: a missing path is null
    ]


def test_ignore_removes_fields_and_projection_can_be_turned_off(tmp_path: Path) -> None:
    value = json.dumps({"id": 1, "secret": "s", "meta": {"city": "Lyon", "pin": 1234}}).encode()
    sink = Sink(tmp_path / "on", "INSERT INTO b:p SELECT * FROM t IGNORE secret, meta.pin STOREAS JSON")
    sink.put(messages([value]))
    sink.stop()
    assert json_rows(files(tmp_path / "on")) == [{"id": 1, "meta": {"city": "Lyon"}}]
    off = Sink(
        tmp_path / "off",
        "INSERT INTO b:p SELECT id FROM t IGNORE secret STOREAS JSON PROPERTIES('projection.enabled'=false)",
    )
    off.put(messages([value]))
    off.stop()
    assert json_rows(files(tmp_path / "off")) == [json.loads(value)]  # Lenses: the whole value


ORDER = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "secret", "type": "string"},
        {
            "name": "customer",
            "type": {
                "type": "record",
                "name": "Customer",
                "fields": [{"name": "name", "type": "string"}, {"name": "email", "type": ["null", "string"]}],
            },
        },
    ],
}


def test_a_projection_of_avro_into_parquet_has_exactly_the_projected_schema(tmp_path: Path) -> None:
    converter = RecordConverter(StringConverter(), avro_converter({1: ORDER})[0])
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT id, amount AS total, customer.email AS email FROM t STOREAS PARQUET",
        converter=converter,
    )
    orders = [
        {"id": i, "amount": i + 0.5, "secret": "s", "customer": {"name": "n", "email": None if i else "e@x"}}
        for i in range(3)
    ]
    sink.put(messages([wire(1, ORDER, o) for o in orders]))
    sink.stop()
    table = parquet(files(tmp_path))
    assert table.schema.names == ["id", "total", "email"]
    assert table.schema.field("id").type == pa.int64() and not table.schema.field("id").nullable
    assert table.schema.field("total").type == pa.float64()
    assert table.schema.field("email").type == pa.string() and table.schema.field("email").nullable
    assert table.to_pylist() == [
        {"id": 0, "total": 0.5, "email": "e@x"},
        {"id": 1, "total": 1.5, "email": None},
        {"id": 2, "total": 2.5, "email": None},
    ]


def test_a_path_missing_from_the_schema_is_a_record_error(tmp_path: Path) -> None:
    converter = RecordConverter(StringConverter(), avro_converter({1: ORDER})[0])
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT id, nope FROM t STOREAS PARQUET",
        converter=converter,
        **{"errors.tolerance": "none"},
    )
    order = {"id": 1, "amount": 1.0, "secret": "s", "customer": {"name": "n", "email": None}}
    with pytest.raises(Exception, match=r"'nope' is not in the schema.*offset 0|offset 0.*'nope'"):
        sink.put(messages([wire(1, ORDER, order)]))
    sink.stop(commit=False)


def test_two_entries_with_one_name_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="two SELECT entries give the field 'a'"):
        Sink(tmp_path, "INSERT INTO b:p SELECT a, b.a FROM t STOREAS JSON")


def test_record_errors_carry_the_transformation_stage(tmp_path: Path) -> None:
    converter = RecordConverter(StringConverter(), avro_converter({1: ORDER})[0])
    sink = Sink(tmp_path, "INSERT INTO b:p SELECT id, nope FROM t STOREAS PARQUET", converter=converter)
    order = {"id": 1, "amount": 1.0, "secret": "s", "customer": {"name": "n", "email": None}}
    batch = sink.builder.build("t", 0, messages([wire(1, ORDER, order)]))[0]
    with pytest.raises(RecordError) as caught:
        sink.task.put(batch)
    assert caught.value.stage == "TRANSFORMATION" and caught.value.offset == 0
    sink.stop(commit=False)


FLAT = {
    "type": "record",
    "name": "Flat",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": ["null", "string"]},
        {"name": "amount", "type": "double"},
        {"name": "secret", "type": "string"},
    ],
}


class CountingConverter(RecordConverter):
    calls = 0

    def convert(self, msg: Any) -> Any:
        CountingConverter.calls += 1
        return super().convert(msg)


def test_a_projection_of_flat_avro_takes_the_arrow_columns_and_writes_what_records_write(
    tmp_path: Path,
) -> None:
    """The Arrow fast path (decoded columns, selected and renamed) against the per-record path."""
    text = (
        "INSERT INTO b:p SELECT amount AS total, id, name FROM t STOREAS PARQUET "
        "PROPERTIES('flush.count'=500)"
    )
    values = [
        wire(3, FLAT, {"id": i, "name": None if i % 4 else f"n{i}", "amount": i / 8, "secret": "s"})
        for i in range(1000)
    ]
    out: dict[bool, Any] = {}
    for fast in (True, False):
        CountingConverter.calls = 0
        converter = CountingConverter(StringConverter(), avro_converter({3: FLAT})[0])
        sink = Sink(tmp_path / str(fast), text, converter=converter)
        sink.builder = BatchBuilder(converter, cheap_forms=fast)
        sink.put(messages(values))
        sink.stop()
        data = files(tmp_path / str(fast))
        out[fast] = (list(data), parquet(data))
        if fast:
            assert CountingConverter.calls <= 2  # the first record freezes the schema; the rest are columns
        else:
            assert CountingConverter.calls == 1000
    assert out[True][0] == out[False][0]  # the same object keys (offsets and timestamps in names)
    fast_table, slow_table = out[True][1], out[False][1]
    assert fast_table.schema.equals(slow_table.schema) and fast_table.equals(slow_table)
    assert fast_table.schema.names == ["total", "id", "name"]
    assert fast_table.column("total").to_pylist() == [i / 8 for i in range(1000)]


def test_a_renamed_topic_picks_its_statement_and_names_the_files(tmp_path: Path) -> None:
    text = (
        "INSERT INTO b:p SELECT * FROM t STOREAS JSON PROPERTIES('flush.count'=2);"
        "INSERT INTO b:p SELECT id FROM `orders-v2` STOREAS JSON PROPERTIES('flush.count'=2)"
    )
    props = {
        "transforms": "route",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "t",
        "transforms.route.replacement": "orders-v2",
    }
    msgs = messages([doc(i) for i in range(4)])
    first = Sink(tmp_path, text, **props)
    first.put(msgs[:3])
    first.stop(commit=False)  # a crash after the first file: the second is replayed
    second = Sink(tmp_path, text, **props)
    second.put(msgs)
    second.stop()
    data = files(tmp_path)
    assert [key.split("/")[:3] for key in data] == [["p", "orders-v2", "0"]] * 2
    assert json_rows(data) == [{"id": i} for i in range(4)]  # the renamed topic's statement: SELECT id


# ------------------------------------------------------------------ per topic: cheap forms kept

TOPIC_MATCHES = "org.apache.kafka.connect.transforms.predicates.TopicNameMatches"


def builder_for(props: dict[str, str]) -> tuple[BatchBuilder, CountingConverter]:
    CountingConverter.calls = 0
    base = record_converter({"key.converter": STRING})
    converter = CountingConverter(base.key, base.value)
    return BatchBuilder(converter, transforms=parse_transforms(props)), converter


def test_a_topic_the_transforms_leave_alone_keeps_its_cheap_forms() -> None:
    props = {
        "transforms": "split",
        **python("split", f"{M}:one_per_item"),
        "transforms.split.predicate": "other",
        "predicates": "other",
        "predicates.other.type": TOPIC_MATCHES,
        "predicates.other.pattern": "other.*",
    }
    builder, _ = builder_for(props)
    (plain,) = builder.build("t", 0, messages([doc(1), doc(2)]))
    assert plain.json_lines() == doc(1) + b"\n" + doc(2)  # untouched: the JSON text form
    split = builder.build("other-1", 0, messages([doc(1)], topic="other-1"))
    assert [r.value for b in split for r in b.records()] == [{"id": 1, "item": "x"}, {"id": 1, "item": "y"}]
    negated, _ = builder_for({**props, "transforms.split.negate": "true"})
    (kept,) = negated.build("other-1", 0, messages([doc(1)], topic="other-1"))
    assert kept.json_lines() == doc(1)


def test_a_filter_on_the_topic_drops_its_batches_without_converting() -> None:
    props = {
        "transforms": "drop",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.drop.predicate": "audit",
        "predicates": "audit",
        "predicates.audit.type": TOPIC_MATCHES,
        "predicates.audit.pattern": "audit",
    }
    builder, _ = builder_for(props)
    assert builder.build("audit", 0, messages([doc(1)] * 3, topic="audit")) == []
    assert CountingConverter.calls == 0
    assert len(builder.build("t", 0, messages([doc(1)]))) == 1


def test_after_a_rename_a_topic_predicate_looks_at_each_record() -> None:
    props = {
        "transforms": "route,drop",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "t",
        "transforms.route.replacement": "audit",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.drop.predicate": "audit",
        "predicates": "audit",
        "predicates.audit.type": TOPIC_MATCHES,
        "predicates.audit.pattern": "audit",
    }
    builder, _ = builder_for(props)
    assert builder.build("t", 0, messages([doc(1)])) == []  # renamed to audit, then filtered
    assert CountingConverter.calls == 1


# ---------------------------------------------------------------------------- batch callables

BATCH = "kcql.sink.transforms.PythonBatch"


def test_a_batch_callable_sees_the_run_at_once_and_its_errors_land_on_their_records(tmp_path: Path) -> None:
    props = {
        "transforms": "up,boom",
        "transforms.up.type": BATCH,
        "transforms.up.function": f"{M}:batch_upper",
        "transforms.boom.type": BATCH,
        "transforms.boom.function": f"{M}:batch_fails_on_three",
    }
    sink = Sink(tmp_path, "INSERT INTO b:p SELECT * FROM t STOREAS JSON", **props)
    sink.put(messages([doc(i) for i in range(6)]))
    sink.stop()
    assert [(r["id"], r["name"]) for r in json_rows(files(tmp_path))] == [(0, "N0"), (2, "N2"), (4, "N4")]
    assert sink.policy.tolerated == 0  # 3 was dropped by the first step: the second never failed
    again = Sink(
        tmp_path / "2",
        "INSERT INTO b:p SELECT * FROM t STOREAS JSON",
        transforms="boom",
        **{"transforms.boom.type": BATCH, "transforms.boom.function": f"{M}:batch_fails_on_three"},
    )
    again.put(messages([doc(i) for i in range(6)]))
    again.stop()
    assert [r["id"] for r in json_rows(files(tmp_path / "2"))] == [0, 1, 2, 4, 5]
    assert again.policy.tolerated == 1  # retried one by one: only offset 3 is the error


def test_a_batch_callable_must_keep_the_offsets_it_was_given(tmp_path: Path) -> None:
    sink = Sink(
        tmp_path,
        "INSERT INTO b:p SELECT * FROM t STOREAS JSON",
        **{
            "errors.tolerance": "none",
            "transforms": "bad",
            "transforms.bad.type": BATCH,
            "transforms.bad.function": f"{M}:batch_wrong_offset",
        },
    )
    with pytest.raises(
        TaskFailedError, match="returned a record with offset 1000, which no record given had"
    ):
        sink.put(messages([doc(0)]))
    sink.stop(commit=False)
