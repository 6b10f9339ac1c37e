"""Spark's own partition discovery decodes our escaped KeysAndValues layout (independent reader).

Files are written at the keys ``object_key`` produces for awkward values; Spark (not our code)
then lists the directory tree and must show every original value in the partition columns, and
must see every file (nothing hidden by a leading ``.`` or ``_``).
"""

from __future__ import annotations

import json

import pytest

from partitioners import Partitioner, object_key

from .helpers import meta, plan, record

VALUES = [
    "plain",
    "the killers",
    "+44",
    "a/b",
    "../../etc",
    "k=v",
    "12:30",
    "100%",
    "%2F",
    "_tmp",
    ".hidden",
    "..",
    "tab\there",
    "[x]",
    "a{b}c",
    "#?*^'\"\\",
    "été 東京",
]


@pytest.mark.spark
def test_spark_reads_escaped_partition_values(spark, tmp_path):
    p = plan("_value.v", "_key", prefix="out")
    partitioner = Partitioner(p)
    for offset, value in enumerate(VALUES):
        rec = record({"v": value, "n": offset}, key=f"k{offset % 2}", offset=offset)
        key = object_key(p, meta(partitioner.path_for(rec), first=offset, last=offset))
        target = tmp_path.joinpath(*key.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"n": offset}) + "\n", encoding="utf-8")

    previous = spark.conf.get("spark.sql.sources.partitionColumnTypeInference.enabled")
    spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", "false")
    try:
        rows = spark.read.json(str(tmp_path / "out")).select("n", "v", "key").collect()
    finally:
        spark.conf.set("spark.sql.sources.partitionColumnTypeInference.enabled", previous)

    seen = {row["n"]: (row["v"], row["key"]) for row in rows}
    assert seen == {n: (value, f"k{n % 2}") for n, value in enumerate(VALUES)}


@pytest.mark.spark
def test_spark_discovers_hive_style_date_directories(spark, tmp_path):
    p = plan("_date|'year='uuuu/'month='MM/'day='dd", include_keys=False, prefix="out")
    partitioner = Partitioner(p)
    stamps = [1_270_166_400_000, 1_270_252_800_000, 1_293_753_600_000]  # 2010-04-02, 2010-04-03, 2010-12-31
    for offset, ts in enumerate(stamps):
        rec = record({"n": offset}, offset=offset, timestamp=ts)
        key = object_key(p, meta(partitioner.path_for(rec), first=offset, last=offset))
        target = tmp_path.joinpath(*key.split("/"))
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps({"n": offset}) + "\n", encoding="utf-8")
    rows = spark.read.json(str(tmp_path / "out")).select("n", "year", "month", "day").collect()
    assert sorted(tuple(row) for row in rows) == [(0, 2010, 4, 2), (1, 2010, 4, 3), (2, 2010, 12, 31)]
