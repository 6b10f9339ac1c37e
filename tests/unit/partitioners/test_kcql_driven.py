"""The §4.1 layouts again, this time from KCQL text through ``kcql.parse_one`` (compiler + partitioner)."""

from __future__ import annotations

import datetime as dt

import pytest

from kcql import parse_one
from partitioners import Partitioner, example_key, object_key, parse_key

from .helpers import meta, record

TS_2010_04_02 = int(dt.datetime(2010, 4, 2, 12, tzinfo=dt.UTC).timestamp() * 1000)
SRC = "INSERT INTO bucket:streamReactorBackups SELECT * FROM myTopic"
# PARTITIONBY statements below are the Lenses integration tests' own KCQL (CoreSinkTaskTestCases.scala
# at 6.3.1, legacy dialect): nothing chooses the display, and Lenses writes KeysAndValues.

CASES = [
    (
        SRC,
        record({"a": 1}, offset=1, timestamp=1),
        {"last": 1, "max_ts": 1},
        "json",
        "streamReactorBackups/myTopic/1/000000000001_0_1.json",
    ),
    (
        SRC + " PROPERTIES('padding.length.partition'='12', 'padding.length.offset'='12')",
        record({"a": 1}),
        {},
        "json",
        "streamReactorBackups/myTopic/000000000001/000000000000_0_0.json",
    ),
    (
        SRC + " PROPERTIES('partition.include.keys'=true)",
        record({"a": 1}, offset=4),
        {"last": 4},
        "json",
        "streamReactorBackups/topic=myTopic/partition=1/000000000004_0_0.json",
    ),
    (
        SRC + " PARTITIONBY name,title WITH_FLUSH_COUNT = 2",
        record({"name": "first", "title": "primary"}, offset=2),
        {"last": 2},
        "json",
        "streamReactorBackups/name=first/title=primary/myTopic(1_000000000002).json",
    ),
    (
        SRC + " PARTITIONBY _key STOREAS `CSV` WITH_FLUSH_COUNT = 1",
        record({"a": 1}, key=0),
        {},
        "csv",
        "streamReactorBackups/key=0/myTopic(1_000000000000).csv",
    ),
    (
        SRC + " PARTITIONBY _header.phonePrefix,_header.region STOREAS `CSV` WITH_FLUSH_COUNT = 1",
        record("x", headers=(("phonePrefix", "+44"), ("region", 8))),
        {},
        "csv",
        "streamReactorBackups/phonePrefix=+44/region=8/myTopic(1_000000000000).csv",
    ),
    (
        SRC + " PARTITIONBY _date.uuuu,_date.LL,_date.dd WITHPARTITIONER=Values WITH_FLUSH_COUNT = 1"
        " PROPERTIES('padding.length.partition'='12', 'padding.length.offset'='12')",
        record({"a": 1}, timestamp=TS_2010_04_02),
        {},
        "json",
        "streamReactorBackups/2010/04/02/myTopic(000000000001_000000000000).json",
    ),
    (  # the same layout in the >= 7 dialect (11.7.2 CoreSinkTaskTestCases)
        SRC + " PARTITIONBY _date.uuuu,_date.LL,_date.dd"
        " PROPERTIES('flush.count'=1,'padding.length.partition'='12', 'padding.length.offset'='12',"
        "'partition.include.keys'=false)",
        record({"a": 1}, timestamp=TS_2010_04_02),
        {},
        "json",
        "streamReactorBackups/2010/04/02/myTopic(000000000001_000000000000).json",
    ),
    (
        SRC + " PARTITIONBY _key.favourites.band, _key.`cost.centre.id`"
        " PROPERTIES('padding.length.partition'='12','padding.length.offset'='12')",
        record({"v": 1}, key={"favourites": {"band": "the killers"}, "cost.centre.id": 100}),
        {},
        "json",
        (
            "streamReactorBackups/favourites.band=the killers/cost.centre.id=100"
            "/myTopic(000000000001_000000000000).json"
        ),
    ),
    (
        SRC + " PARTITIONBY name,title,salary WITH_FLUSH_COUNT = 1",
        record({"name": "first", "salary": 200.0}, offset=2),
        {"last": 2},
        "json",
        "streamReactorBackups/name=first/title=[missing]/salary=200.0/myTopic(1_000000000002).json",
    ),
    (SRC + " NOPARTITION", record({"a": 1}), {}, "json", "streamReactorBackups/myTopic(1_000000000000).json"),
    (
        SRC + " PARTITIONBY _date.uuuu, _date.LL",
        record({"a": 1}, timestamp=TS_2010_04_02),
        {},
        "json",
        "streamReactorBackups/date=2010/date=04/myTopic(1_000000000000).json",
    ),
    (
        SRC + " PARTITIONBY _date.`uuuu/MM/dd` PROPERTIES('partition.include.keys'=false)",
        record({"a": 1}, timestamp=TS_2010_04_02),
        {},
        "json",
        "streamReactorBackups/2010/04/02/myTopic(1_000000000000).json",
    ),
    (  # Lenses PaddingService: any padding.length.<field> replaces the default {offset: 12}
        SRC + " PROPERTIES('padding.length.topic'=3)",
        record({"a": 1}, offset=3),
        {"last": 3},
        "json",
        "streamReactorBackups/myTopic/1/3_0_0.json",
    ),
    (
        SRC + " PARTITIONBY _key PROPERTIES('padding.length.offset'=-1, 'padding.length.partition'='+3')",
        record({"a": 1}, key="k", offset=7),
        {"last": 7},
        "json",
        "streamReactorBackups/key=k/myTopic(001_7).json",
    ),
    (
        SRC + " PROPERTIES('key.suffix'='-dc1')",
        record({"a": 1}, offset=3),
        {"last": 3},
        "json",
        "streamReactorBackups/myTopic/1/000000000003_0_0-dc1.json",
    ),
    (
        "INSERT INTO bucket SELECT * FROM orders PROPERTIES('file.naming'='confluent')",
        record({"a": 1}, topic="orders", partition=3, offset=1000),
        {"first": 1000, "last": 1500},
        "avro",
        "topics/orders/partition=3/orders+3+0000001000.avro",
    ),
    (
        (
            "INSERT INTO bucket:backup SELECT * FROM orders PARTITIONBY country"
            " PROPERTIES('file.naming'='confluent', 'partition.include.keys'=true)"
        ),
        record({"country": "UK"}, topic="orders", partition=3),
        {"first": 12, "last": 20},
        "json",
        "backup/orders/country=UK/orders+3+0000000012.json",
    ),
]


@pytest.mark.parametrize(("kcql", "rec", "file", "ext", "expected"), CASES)
def test_kcql_to_key_and_back(kcql, rec, file, ext, expected):
    plan = parse_one(kcql)
    key = object_key(
        plan, meta(Partitioner(plan).path_for(rec), topic=rec.topic, partition=rec.partition, ext=ext, **file)
    )
    assert key == expected
    parsed = parse_key(plan, key)
    assert parsed is not None
    assert (parsed.topic, parsed.partition, parsed.extension) == (rec.topic, rec.partition, ext)


@pytest.mark.parametrize(
    ("kcql", "expected"),
    [
        (SRC, "streamReactorBackups/myTopic/0/000000000000_<minTs>_<maxTs>.json"),
        (
            (
                "INSERT INTO b:p SELECT * FROM `*` PARTITIONBY _topic, _partition STOREAS PARQUET"
                " PROPERTIES('partition.include.keys'=true)"
            ),
            "p/topic=<topic>/partition=0/<topic>(0_000000000000).parquet",
        ),
        (
            SRC + " PARTITIONBY a.b, _key, _header.h, _date.`uuuu-MM-dd` STOREAS AVRO",
            "streamReactorBackups/a.b=<a.b>/key=<_key>/h=<_header.h>/date=<_date.uuuu-MM-dd>/myTopic(0_000000000000).avro",
        ),
        (SRC + " NOPARTITION", "streamReactorBackups/myTopic(0_000000000000).json"),
    ],
)
def test_example_key_from_kcql(kcql, expected):
    plan = parse_one(kcql)
    ext = {"JSON": "json", "PARQUET": "parquet", "AVRO": "avro"}[plan.format.value]
    assert example_key(plan, ext) == expected
