"""The reader contract: ``is_data_key`` and ``parse_key`` on real and foreign keys."""

from __future__ import annotations

import pytest

from kcql.model import FileNaming, Padding
from partitioners import ParsedKey, is_data_key, parse_key

from .helpers import plan


@pytest.mark.parametrize(
    ("key", "ok"),
    [
        ("p/myTopic/1/000000000001_0_1.json", True),
        ("p/.indexes/conn/myTopic/00001/00000000000000000001", False),
        ("p/.temp-upload/x/y.json", False),
        ("p/_staging/x.json", False),
        ("p/myTopic/1/_SUCCESS", False),
        ("p/myTopic/1/.hidden.json", False),
        ("p//myTopic/1/x.json", False),
        ("/p/myTopic/1/x.json", False),
        ("p/myTopic/1/", False),
        ("", False),
        ("p/a=_x/y(1_2).json", True),  # "_" inside a segment is fine
    ],
)
def test_is_data_key(key, ok):
    assert is_data_key(key) is ok


def test_parse_default_layout():
    parsed = parse_key(plan(), "streamReactorBackups/myTopic/1/000000000001_0_1.json")
    assert parsed == ParsedKey("myTopic", 1, {}, (), None, 1, 0, 1, "json")
    parsed = parse_key(plan(), "streamReactorBackups/myTopic/1/000000000001_-1_-1.json.gz")
    assert parsed is not None
    assert (parsed.min_timestamp, parsed.max_timestamp, parsed.extension) == (-1, -1, "json.gz")
    p = plan(padding=Padding(offset=12, partition=12))
    parsed = parse_key(p, "streamReactorBackups/myTopic/000000000001/000000000000_0_0.json")
    assert parsed is not None
    assert (parsed.partition, parsed.last_offset) == (1, 0)


def test_parse_partitioned_layouts():
    p = plan("name", "title", "salary")
    parsed = parse_key(
        p, "streamReactorBackups/name=first/title=[missing]/salary=200.0/myTopic(1_000000000002).json"
    )
    assert parsed is not None
    assert parsed.partition_values == {"name": "first", "title": "[missing]", "salary": "200.0"}
    assert list(parsed.partition_values) == ["name", "title", "salary"]
    assert parsed.values is parsed.partition_values
    p = plan(
        "_date.uuuu", "_date.LL", "_date.dd", include_keys=False, padding=Padding(offset=12, partition=12)
    )
    parsed = parse_key(p, "streamReactorBackups/2010/04/02/myTopic(000000000001_000000000000).json")
    assert parsed is not None
    assert parsed.partition_items == (("date", "2010"), ("date", "04"), ("date", "02"))
    assert (parsed.partition, parsed.last_offset) == (1, 0)
    p = plan("a")
    parsed = parse_key(p, "streamReactorBackups/a=x%2Fy%3Dz/myTopic(1_000000000000).json")
    assert parsed is not None
    assert parsed.partition_values == {"a": "x/y=z"}


def test_parse_confluent():
    p = plan(prefix="", naming=FileNaming.CONFLUENT)
    parsed = parse_key(p, "topics/myTopic/partition=3/myTopic+3+0000001000.snappy.parquet")
    assert parsed == ParsedKey("myTopic", 3, {}, (), 1000, None, None, None, "snappy.parquet")


@pytest.mark.parametrize(
    ("p", "key"),
    [
        (plan(), "other/myTopic/1/000000000001_0_1.json"),  # another prefix
        (plan(), "streamReactorBackups/otherTopic/1/000000000001_0_1.json"),  # another topic
        (plan(), "streamReactorBackups/myTopic/1/000000000001.json"),  # 5.x-7.1 name
        (plan(), "streamReactorBackups/myTopic/1/x/000000000001_0_1.json"),  # extra directory
        (plan(), "streamReactorBackups/myTopic/one/000000000001_0_1.json"),
        (plan(), "streamReactorBackups/myTopic/1/1_0_1.json"),  # not padded like the plan says
        (plan(), "streamReactorBackups/.indexes/myTopic/1/000000000001_0_1.json"),
        (plan(), "streamReactorBackups/myTopic/1/000000000001_0_1"),  # no extension
        (plan(include_keys=True), "streamReactorBackups/myTopic/1/000000000001_0_1.json"),
        (plan(key_suffix="-dc1"), "streamReactorBackups/myTopic/1/000000000001_0_1.json"),
        (plan("a"), "streamReactorBackups/b=1/myTopic(1_000000000000).json"),  # another field name
        (plan("a"), "streamReactorBackups/a=1/b=2/myTopic(1_000000000000).json"),
        (plan("a"), "streamReactorBackups/a=1/myTopic(1-000000000000).json"),
        (plan("a", include_keys=False), "streamReactorBackups/myTopic(1_000000000000).json"),
        (plan(nopartition=True), "streamReactorBackups/x/myTopic(1_000000000000).json"),
        (
            plan(naming=FileNaming.CONFLUENT),
            "streamReactorBackups/myTopic/partition=2/myTopic+3+0000000000.json",
        ),
        (
            plan(naming=FileNaming.CONFLUENT),
            "streamReactorBackups/other/partition=3/myTopic+3+0000000000.json",
        ),
        (plan(naming=FileNaming.CONFLUENT), "streamReactorBackups/myTopic/partition=3/myTopic+3+000.json"),
    ],
)
def test_parse_rejects_foreign_keys(p, key):
    assert parse_key(p, key) is None


def test_wildcard_source_accepts_any_topic():
    parsed = parse_key(plan(source="*"), "streamReactorBackups/orders/0/000000000005_1_2.avro")
    assert parsed is not None
    assert parsed.topic == "orders"


def test_prefix_segments_may_look_hidden():
    p = plan(prefix="_archive/.v1")
    key = "_archive/.v1/myTopic/1/000000000001_0_1.json"
    assert parse_key(p, key) is not None
    assert is_data_key(key, prefix="_archive/.v1")
    assert not is_data_key(key)
    assert not is_data_key("_archive/.v1/.indexes/x", prefix="_archive/.v1")
    assert not is_data_key("elsewhere/myTopic/1/x.json", prefix="_archive/.v1")
    assert parse_key(p, "_archive/.v1/.temp-upload/myTopic/1/000000000001_0_1.json") is None


def test_date_pattern_with_slash_spans_directories():
    p = plan("_date.uuuu/MM/dd", "a")
    key = "streamReactorBackups/date=2010/04/02/a=x/myTopic(1_000000000000).json"
    parsed = parse_key(p, key)
    assert parsed is not None
    assert parsed.partition_items == (("date", "2010/04/02"), ("a", "x"))
    assert parse_key(p, "streamReactorBackups/date=2010/04/a=x/myTopic(1_000000000000).json") is None


def test_hive_style_date_pattern_parses_back():
    p = plan("_date|'year='uuuu/'month='MM", include_keys=False)
    parsed = parse_key(p, "streamReactorBackups/year=2010/month=04/myTopic(1_000000000000).json")
    assert parsed is not None
    assert parsed.partition_values == {"date": "year=2010/month=04"}
