"""Every object-key example of the Lenses reference §4.1 (and Confluent §1.3), byte for byte."""

from __future__ import annotations

import datetime as dt

import pytest

from kcql.model import FileNaming, Padding
from partitioners import Partitioner, object_key, parse_key

from .helpers import meta, plan, record

UTC = dt.UTC


def key_for(p, rec, **kw):
    return object_key(p, meta(Partitioner(p).path_for(rec), topic=rec.topic, partition=rec.partition, **kw))


def test_default_layout():
    p = plan()
    assert key_for(p, record({"a": 1}), last=1, min_ts=0, max_ts=1) == (
        "streamReactorBackups/myTopic/1/000000000001_0_1.json"
    )


def test_default_layout_padded_partition_only():
    # any padding.* property present → only the listed fields are padded (reference §2.1)
    p = plan(padding=Padding(offset=None, partition=12))
    assert key_for(p, record({"a": 1}), last=0) == ("streamReactorBackups/myTopic/000000000001/0_0_0.json")
    p = plan(padding=Padding(offset=12, partition=12))
    assert key_for(p, record({"a": 1}), last=0) == (
        "streamReactorBackups/myTopic/000000000001/000000000000_0_0.json"
    )


def test_default_layout_with_include_keys():
    p = plan(include_keys=True)
    assert key_for(p, record({"a": 1}), last=7, min_ts=5, max_ts=9) == (
        "streamReactorBackups/topic=myTopic/partition=1/000000000007_5_9.json"
    )


def test_default_layout_no_timestamps_and_suffix():
    p = plan(key_suffix="-east")
    assert key_for(p, record({"a": 1}, timestamp=None), last=3, min_ts=-1, max_ts=-1) == (
        "streamReactorBackups/myTopic/1/000000000003_-1_-1-east.json"
    )


def test_values_from_value_struct():
    p = plan("name", "title")
    rec = record({"name": "first", "title": "primary"}, offset=2)
    assert key_for(p, rec, last=2) == (
        "streamReactorBackups/name=first/title=primary/myTopic(1_000000000002).json"
    )


def test_whole_key_csv():
    p = plan("_key")
    assert key_for(p, record({"a": 1}, key=0), ext="csv") == (
        "streamReactorBackups/key=0/myTopic(1_000000000000).csv"
    )


def test_headers():
    p = plan("_header.phonePrefix", "_header.region")
    rec = record("x", headers=(("phonePrefix", "+44"), ("region", 8)))
    assert key_for(p, rec, ext="csv") == (
        "streamReactorBackups/phonePrefix=+44/region=8/myTopic(1_000000000000).csv"
    )


def test_date_values_with_padded_partition():
    p = plan(
        "_date.uuuu", "_date.LL", "_date.dd", include_keys=False, padding=Padding(offset=12, partition=12)
    )
    ts = int(dt.datetime(2010, 4, 2, 12, 0, tzinfo=UTC).timestamp() * 1000)
    assert key_for(p, record({"a": 1}, timestamp=ts)) == (
        "streamReactorBackups/2010/04/02/myTopic(000000000001_000000000000).json"
    )


def test_date_keys_and_values_shown_as_date():
    p = plan("_date.uuuu", "_date.LL")
    ts = int(dt.datetime(2010, 4, 2, tzinfo=UTC).timestamp() * 1000)
    assert key_for(p, record({"a": 1}, timestamp=ts)) == (
        "streamReactorBackups/date=2010/date=04/myTopic(1_000000000000).json"
    )


def test_nested_key_paths_with_dotted_name_and_space():
    p = plan("_key.favourites.band", "_key.|cost.centre.id")
    rec = record({"v": 1}, key={"favourites": {"band": "the killers"}, "cost.centre.id": 100})
    assert key_for(p, rec) == (
        "streamReactorBackups/favourites.band=the killers/cost.centre.id=100/myTopic(1_000000000000).json"
    )


def test_missing_field_and_java_double():
    p = plan("name", "title", "salary")
    rec = record({"name": "first", "salary": 200.0}, offset=2)
    assert key_for(p, rec, last=2) == (
        "streamReactorBackups/name=first/title=[missing]/salary=200.0/myTopic(1_000000000002).json"
    )


def test_nopartition():
    p = plan(nopartition=True)
    assert key_for(p, record({"a": 1})) == "streamReactorBackups/myTopic(1_000000000000).json"


def test_empty_prefix_has_no_leading_segment():
    assert key_for(plan(prefix=""), record(1), last=1) == "myTopic/1/000000000001_0_0.json"
    assert key_for(plan(prefix="", nopartition=True), record(1)) == "myTopic(1_000000000000).json"


def test_nested_prefix():
    assert key_for(plan(prefix="a/b/c"), record(1), last=1) == "a/b/c/myTopic/1/000000000001_0_0.json"


def test_confluent_default():
    p = plan(prefix="", naming=FileNaming.CONFLUENT)
    rec = record(1, topic="orders", partition=3, offset=1000)
    assert key_for(p, rec, first=1000, last=1999, ext="avro") == (
        "topics/orders/partition=3/orders+3+0000001000.avro"
    )
    p = plan(prefix="backup", naming=FileNaming.CONFLUENT)
    assert key_for(p, rec, first=1000, last=1999, ext="avro") == (
        "backup/orders/partition=3/orders+3+0000001000.avro"
    )


def test_confluent_partition_by():
    p = plan("country", "_key", prefix="", naming=FileNaming.CONFLUENT)
    rec = record({"country": "UK"}, key="k1", topic="orders", partition=3)
    assert key_for(p, rec, first=12, last=20) == "topics/orders/country=UK/key=k1/orders+3+0000000012.json"


@pytest.mark.parametrize(
    "p",
    [
        plan(),
        plan(include_keys=True),
        plan(padding=Padding(offset=12, partition=12)),
        plan("name", "title", "salary"),
        plan("_key"),
        plan("_date.uuuu", "_date.LL", "_date.dd", include_keys=False),
        plan(nopartition=True),
        plan(prefix="", naming=FileNaming.CONFLUENT),
        plan("name", naming=FileNaming.CONFLUENT),
    ],
)
def test_golden_keys_parse_back(p):
    rec = record({"name": "first", "salary": 200.0}, key=5, offset=9, timestamp=1_270_166_400_000)
    path = Partitioner(p).path_for(rec)
    parsed = parse_key(p, object_key(p, meta(path, first=3, last=9, min_ts=1, max_ts=2)))
    assert parsed is not None
    assert (parsed.topic, parsed.partition) == ("myTopic", 1)
