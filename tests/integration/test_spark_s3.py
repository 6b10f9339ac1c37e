"""Spark SQL over committed output on S3 (a real SeaweedFS): every format x every layout through the
Python data source, and pruning (the live sink race on S3 is in test_spark_sink_e2e.py).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from kcql.model import StoreFormat
from spark_reader import register
from tests.unit.spark_reader import lenses_data as ld

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def bucket(s3_client) -> str:
    """One bucket for the module: each SeaweedFS bucket is a collection that pre-allocates volumes."""
    name = f"spark-reader-{uuid.uuid4().hex[:8]}"
    s3_client.create_bucket(Bucket=name)
    return name


def _put(client, bucket: str):
    return lambda key, data: client.put_object(Bucket=bucket, Key=key, Body=data)


def _read(client, bucket: str):
    return lambda key: client.get_object(Bucket=bucket, Key=key)["Body"].read()


def test_every_format_and_layout_on_s3(spark, s3_endpoint, s3_client, bucket: str, tmp_path: Path) -> None:
    recs = ld.records()
    plans = [_in_bucket(p, bucket) for p in ld.every_plan("all_")]
    written = {p.prefix: ld.write_with_sink_libs(p, recs, _put(s3_client, bucket), tmp_path) for p in plans}
    config = s3_endpoint.connect_config()

    views = register(spark, config, plans=plans)

    assert sorted(views) == sorted(p.prefix for p in plans)
    assert all("python reader" in d and "s3:" in d for d in views.values())
    ld.assert_views_match(spark, plans, written, _read(s3_client, bucket), recs)


def _in_bucket(p, bucket: str):
    import dataclasses

    return dataclasses.replace(p, bucket=bucket)


def test_pruning_on_s3_reads_fewer_objects(
    spark, s3_endpoint, s3_client, bucket: str, tmp_path: Path
) -> None:
    recs = ld.records()
    p = _in_bucket(ld.plan(StoreFormat.PARQUET, "kv", prefix="pruned"), bucket)
    keys = ld.write_with_sink_libs(p, recs, _put(s3_client, bucket), tmp_path)
    scan_log = tmp_path / "scans.tsv"
    register(spark, s3_endpoint.connect_config(), plans=[p], scan_log=str(scan_log))

    queries = {
        "all": "SELECT COUNT(*) FROM pruned",
        "ap": "SELECT COUNT(*) FROM pruned WHERE region = 'ap/south %east'",  # the value field
        "p0": "SELECT COUNT(*) FROM pruned WHERE _partition = 0 AND part_region IN ('eu', 'us')",
    }
    counts = {name: spark.sql(q).collect()[0][0] for name, q in queries.items()}
    scans = dict(
        zip(queries, (line.split("\t")[3:] for line in scan_log.read_text().splitlines()), strict=True)
    )

    assert sorted(scans["all"]) == sorted(keys)
    assert 0 < len(scans["ap"]) < len(keys)
    assert all(k.startswith("pruned/region=ap%2Fsouth %25east/") for k in scans["ap"])
    assert 0 < len(scans["p0"]) < len(keys)
    assert all("/partition=0/" in k and "/region=ap" not in k for k in scans["p0"])
    assert counts["all"] == len(recs)
    assert counts["ap"] == sum(1 for r in recs if r.value["region"] == "ap/south %east")
    assert counts["p0"] == sum(1 for r in recs if r.partition == 0 and r.value["region"] in ("eu", "us"))
