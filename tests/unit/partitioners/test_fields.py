"""Field extraction, value rendering and the Lenses error texts."""

from __future__ import annotations

from decimal import Decimal

import pytest
from confluent_kafka import Message

from kcql.model import FileNaming, Padding
from partitioners import Partitioner, PartitionError
from partitioners.partitioner import MAX_PATH_BYTES, MAX_SEGMENT_BYTES
from sink.records.batch import RecordBatch, Source
from sink.records.record import SinkRecord

from .helpers import plan, record


def path(p, rec):
    return Partitioner(p).path_for(rec)


@pytest.mark.parametrize(
    ("spec", "rec", "reason"),
    [
        ("_key", record({"a": 1}, key=None), "Key is null, but requested to partition by whole key"),
        (
            "_key",
            record({"a": 1}, key={"s": 1}),
            "Non primitive struct provided, PARTITIONBY _key requested in KCQL",
        ),
        (
            "_key",
            record({"a": 1}, key=[1, 2]),
            "Non primitive struct provided, PARTITIONBY _key requested in KCQL",
        ),
        ("_key.a", record({"a": 1}, key=None), "Key is null."),
        ("_value.a", record(None, key=1), "Value is null."),
        ("a", record(None, key=1), "Value is null."),
        ("_header.h", record(1, headers=(("x", "1"),)), "Header 'h' not found in message"),
        ("_date.uuuu", record(1, timestamp=None), "Timestamp not found in message"),
    ],
)
def test_lenses_error_texts_carry_the_record_position(spec, rec, reason):
    rec.offset = 42
    with pytest.raises(PartitionError) as info:
        path(plan(spec), rec)
    assert info.value.reason == reason
    assert info.value.where == "topic 'myTopic' partition 1 offset 42"
    assert str(info.value) == f"{reason} (topic 'myTopic' partition 1 offset 42)"
    assert info.value.record is rec


def test_split_yields_the_slices_before_the_record_it_cannot_place_then_raises():
    p = Partitioner(plan("_key"))
    records = [record(1, key="a", offset=0), record(1, key="a", offset=1), record(1, key="b", offset=2),
               record(1, key=None, offset=3), record(1, key="a", offset=4)]
    slices = []
    with pytest.raises(PartitionError, match="offset 3") as info:
        for path_, part in p.split(RecordBatch.of(records)):
            slices.append((path_, [r.offset for r in part.records()]))
    assert slices == [("key=a", [0, 1]), ("key=b", [2])]
    assert (info.value.offset, info.value.index, info.value.stage) == (3, 3, "TASK_PUT")


def test_split_of_the_default_layout_is_the_batch_itself_and_converts_nothing():
    def unconvertible(message: Message) -> SinkRecord:
        raise AssertionError("the default layout read a record")

    messages = [Message(topic="myTopic", partition=1, offset=i, value=b"{}") for i in range(2)]
    batch = RecordBatch("myTopic", 1, Source(messages, [None, None], unconvertible))
    assert list(Partitioner(plan()).split(batch)) == [("myTopic/1", batch)]
    assert list(Partitioner(plan(nopartition=True)).split(batch)) == [("", batch)]


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("text", "text"),
        (True, "true"),
        (False, "false"),
        (7, "7"),
        (-7, "-7"),
        (200.0, "200.0"),
        (1e7, "1.0E7"),
        (0.5, "0.5"),
        (Decimal("12.50"), "12.50"),
        (b"bytes", "bytes"),
        (b"\xff\x00", "0xff00"),
        ({"b": 1, "a": [1, "x"]}, "%7B%22b%22%3A1,%22a%22%3A%5B1,%22x%22%5D}"),
        ([1, 2], "%5B1,2%5D"),
        ({}, "%7B}"),
    ],
)
def test_value_rendering(value, text):
    assert path(plan("v", include_keys=False), record({"v": value})) == text


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": {"b": {"c": "deep"}}}, "deep"),
        ({"a": {"b": None}}, "[missing]"),  # a null field renders like an absent one (Lenses' Option)
        ({"a": {"x": 1}}, "[missing]"),
        ({"a": "not a struct"}, "[missing]"),
        ({"a": {"b": [{"c": 1}, {"c": 2}]}}, "[missing]"),
        ({}, "[missing]"),
    ],
)
def test_nested_paths(value, expected):
    assert path(plan("a.b.c", include_keys=False), record(value)) == expected


def test_list_index_in_path():
    assert path(plan("_value.a.1.c", include_keys=False), record({"a": [{"c": 1}, {"c": 2}]})) == "2"


def test_key_path_and_whole_key_types():
    assert path(plan("_key.id"), record(1, key={"id": "k-1"})) == "id=k-1"
    assert path(plan("_key.id"), record(1, key="primitive")) == "id=[missing]"
    assert path(plan("_key"), record(1, key=b"raw")) == "key=raw"
    assert path(plan("_key"), record(1, key=3.25)) == "key=3.25"


def test_header_last_value_wins_and_header_paths():
    headers = (("h", "first"), ("h", "last"), ("s", {"x": {"y": 5}}), ("n", None))
    assert path(plan("_header.h"), record(1, headers=headers)) == "h=last"
    assert path(plan("_header.s.x.y"), record(1, headers=headers)) == "s.x.y=5"
    assert path(plan("_header.s.z"), record(1, headers=headers)) == "s.z=[missing]"
    assert path(plan("_header.n"), record(1, headers=headers)) == "n=[missing]"
    assert path(plan("_header.h"), record(1, headers=(("h", b"+44"),))) == "h=+44"


def test_topic_and_partition_fields_with_padding():
    p = plan("_topic", "_partition", padding=Padding(offset=12, partition=4))
    assert path(p, record(1, topic="orders", partition=3)) == "topic=orders/partition=0003"
    p = plan("_topic", "_partition", include_keys=False)
    assert path(p, record(1, topic="_internal", partition=3)) == "%5Finternal/3"


def test_date_field_uses_utc():
    ts = 1_270_166_400_000 + 23 * 3600 * 1000  # 2010-04-02T23:00Z
    assert path(plan("_date.uuuu-MM-dd HH"), record(1, timestamp=ts)) == "date=2010-04-02 23"
    assert path(plan("_date.|HH:mm", include_keys=False), record(1, timestamp=ts)) == "23%3A00"


def test_date_out_of_range_is_a_partition_error():
    with pytest.raises(PartitionError, match="cannot be formatted"):
        path(plan("_date.uuuu"), record(1, timestamp=10**18))


def test_values_never_add_directories():
    p = plan("a", "b", include_keys=False)
    assert path(p, record({"a": "../../etc", "b": "x/y\\z"})) == "%2E.%2F..%2Fetc/x%2Fy%5Cz"
    assert path(plan("a"), record({"a": "k=v"})) == "a=k%3Dv"
    assert path(plan("a"), record({"a": ""})) == 'a=""'


def test_long_values_are_rejected_with_a_clear_error():
    with pytest.raises(PartitionError, match=f"{MAX_SEGMENT_BYTES}-byte limit"):
        path(plan("a"), record({"a": "é" * 200}))
    p = plan("a", "b", "c", "d", include_keys=False)
    value = dict.fromkeys("abcd", "x" * 250)
    with pytest.raises(PartitionError, match=f"{MAX_PATH_BYTES}-byte limit"):
        path(p, record(value))


def test_default_layout_fast_path_is_cached_per_topic_partition():
    p = Partitioner(plan())
    assert p.is_default
    records = [
        record(i, topic=t, partition=n, offset=i) for i, (t, n) in enumerate([("a", 0), ("b", 1), ("a", 0)])
    ]
    assert [p.path_for(r) for r in records] == ["a/0", "b/1", "a/0"]
    assert p.path_for(records[0]) is p.path_for(records[2])  # same cached string


def test_nopartition_and_confluent_paths():
    assert [Partitioner(plan(nopartition=True)).path_for(r) for r in [record(1), record(2)]] == ["", ""]
    assert path(plan(naming=FileNaming.CONFLUENT), record(1, partition=4)) == "myTopic/partition=4"
    assert path(plan("a", naming=FileNaming.CONFLUENT), record({"a": 1})) == "myTopic/a=1"
    assert path(plan(nopartition=True, naming=FileNaming.CONFLUENT), record(1)) == ""


def test_topic_partition_only_partitionby_uses_the_cache():
    p = Partitioner(plan("_topic", "_partition", include_keys=False))
    assert p.is_default
    records = [
        record(1, topic="a", partition=0),
        record(2, topic="b", partition=7),
        record(3, topic="a", partition=0),
    ]
    assert [p.path_for(r) for r in records] == ["a/0", "b/7", "a/0"]
    assert not Partitioner(plan("_topic", "_key")).is_default


def test_slash_in_date_pattern_makes_directories_from_the_pattern_only():
    ts = 1_270_166_400_000  # 2010-04-02T00:00Z
    assert path(plan("_date.uuuu/MM/dd", include_keys=False), record(1, timestamp=ts)) == "2010/04/02"
    assert path(plan("_date.uuuu/MM"), record(1, timestamp=ts)) == "date=2010/04"
    # a quoted "/" is literal text of one directory, and literal pieces are escaped
    assert path(plan("_date.uuuu'/'MM", include_keys=False), record(1, timestamp=ts)) == "2010%2F04"
    assert path(plan("_date|'..'/uuuu", include_keys=False), record(1, timestamp=ts)) == "%2E./2010"


def test_hive_style_date_directories_keep_their_equals_sign():
    ts = 1_270_166_400_000  # 2010-04-02T00:00Z
    p = plan("_date|'year='uuuu/'month='MM/'day='dd", include_keys=False)
    assert path(p, record(1, timestamp=ts)) == "year=2010/month=04/day=02"
    # record data never keeps "=": only _date pieces (pattern text) do
    assert path(plan("a", include_keys=False), record({"a": "year=2010"})) == "year%3D2010"
