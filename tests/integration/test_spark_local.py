"""Spark SQL over committed output on local storage: every format x every layout, pruning (the live
sink race is in test_spark_sink_e2e.py).

One shared Spark session; every check is batched into as few Spark jobs as possible.
"""

from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import pytest

from kcql.model import StoreFormat
from spark_reader import register
from spark_reader.views import view_frames
from tests.unit.spark_reader import lenses_data as ld

pytestmark = pytest.mark.spark


def _write_evolving(put, recs) -> list:
    """Two files per plan, the second with an extra optional field (BACKWARD-compatible evolution)."""
    import io

    import fastavro
    import pyarrow as pa
    import pyarrow.parquet as pq

    plans = [
        ld.plan(fmt, "default", prefix=f"evo_{fmt.value.lower()}")
        for fmt in (StoreFormat.AVRO, StoreFormat.PARQUET)
    ]
    new_schema = dict(
        ld.VALUE_SCHEMA, fields=[*ld.VALUE_SCHEMA["fields"], {"name": "note", "type": ["null", "string"]}]
    )
    first, second = recs[:4], recs[4:8]
    for p in plans:
        for chunk, schema in ((first, ld.VALUE_SCHEMA), (second, new_schema)):
            rows = [dict(r.value, note="n") if schema is new_schema else r.value for r in chunk]
            buf = io.BytesIO()
            if p.format == StoreFormat.AVRO:
                fastavro.writer(buf, fastavro.parse_schema(schema), rows)
                ext = "avro"
            else:
                pq.write_table(pa.Table.from_pylist(rows), buf)
                ext = "parquet"
            put(ld.file_key(p, chunk, ext), buf.getvalue())
    return plans


def test_every_format_and_layout_matches_the_files(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    put = ld.local_put(root / "bkt")
    recs = ld.records()
    plans = ld.every_plan()
    staging = tmp_path / "staging"
    staging.mkdir()
    written = {p.prefix: ld.write_with_sink_libs(p, recs, put, staging) for p in plans}
    config = {"connect.storage": "local", "connect.local.root": str(root)}

    evolving = _write_evolving(put, recs)
    views = register(spark, config, plans=[*plans, *evolving])

    assert sorted(views) == sorted(p.prefix for p in [*plans, *evolving])
    native = {v for v, d in views.items() if "spark native" in d}
    assert "parquet_values" in native and "json_kv" in native and "avro_kv" not in native
    ld.assert_views_match(spark, plans, written, lambda k: (root / "bkt" / k).read_bytes(), recs)

    # schema evolution: a field added in later files is NULL for the older rows, in both readers
    evo = spark.sql(
        " UNION ALL ".join(
            f"SELECT '{p.prefix}' v, COUNT(*) c, COUNT(note) n, SUM(id) s FROM {p.prefix}"  # noqa: S608
            for p in evolving
        )
    ).collect()
    assert {r["v"]: (r["c"], r["n"], r["s"]) for r in evo} == {
        p.prefix: (8, 4, sum(r.value["id"] for r in recs[:8])) for p in evolving
    }

    # typed partition columns: _partition and the KeysAndValues `partition` field are integers
    schema = spark.table("parquet_kv").schema
    assert schema["_partition"].dataType.typeName() == "integer"
    assert schema["partition"].dataType.typeName() == "long"
    assert schema["part_region"].dataType.typeName() == "string"
    # envelope views expose key, value, headers and metadata
    env = spark.table("env_avro").schema.fieldNames()
    assert {"key", "value", "headers", "metadata", "_topic", "_partition", "region"} <= set(env)


def test_partition_filter_prunes_files(spark, tmp_path: Path) -> None:
    root = tmp_path / "store"
    put = ld.local_put(root / "bkt")
    recs = ld.records()
    pq_plan = ld.plan(StoreFormat.PARQUET, "values", prefix="pq")
    av_plan = ld.plan(StoreFormat.AVRO, "kv", prefix="av")
    staging = tmp_path / "staging"
    staging.mkdir()
    pq_keys = ld.write_with_sink_libs(pq_plan, recs, put, staging)
    av_keys = ld.write_with_sink_libs(av_plan, recs, put, staging)
    scan_log = tmp_path / "scans.tsv"
    config = {"connect.storage": "local", "connect.local.root": str(root)}
    register(spark, config, plans=[pq_plan, av_plan], scan_log=str(scan_log))

    # native reader: Spark's own file list
    all_files = spark.table("pq").inputFiles()
    ap_files = spark.sql("SELECT * FROM pq WHERE part_region = 'ap/south %east'").inputFiles()
    assert len(all_files) == len(pq_keys)
    assert 0 < len(ap_files) < len(all_files)
    assert len(ap_files) == sum(1 for k in pq_keys if k.startswith("pq/ap%2Fsouth %25east/"))

    # python data source: the files its scan planned
    (full,) = spark.sql("SELECT COUNT(*) FROM av").collect()[0]
    (pruned,) = spark.sql("SELECT COUNT(*) FROM av WHERE part_region = 'eu' AND `partition` = 1").collect()[0]
    # a filter on the value field a PARTITIONBY entry came from prunes as well
    (by_value,) = spark.sql("SELECT COUNT(*) FROM av WHERE region IN ('eu', 'us')").collect()[0]
    lines = [line.split("\t") for line in scan_log.read_text().splitlines()]
    scans = [line[3:] for line in lines]
    assert len(scans) == 3
    assert sorted(scans[0]) == sorted(av_keys)
    assert 0 < len(scans[1]) < len(scans[0])
    assert all("/region=eu/partition=1/" in k for k in scans[1]), scans[1]
    assert all("/region=eu/" in k or "/region=us/" in k for k in scans[2]), lines[2][:3]
    assert 0 < len(scans[2]) < len(scans[0])
    assert full == len(recs)
    assert by_value == sum(1 for r in recs if r.value["region"] in ("eu", "us"))
    assert pruned == sum(1 for r in recs if r.value["region"] == "eu" and r.partition == 1)


def test_a_corrupt_committed_file_fails_the_query_naming_the_file(spark, tmp_path: Path) -> None:
    """A file that does not decode is an error naming it, never silently skipped rows."""
    from pyspark.errors import PythonException

    from sink.cli.sql import _spark_message

    root = tmp_path / "store"
    put = ld.local_put(root / "bkt")
    p = ld.plan(StoreFormat.AVRO, "default", prefix="corrupt")
    keys = ld.write_with_sink_libs(p, ld.records(partitions=1, per_partition=24), put, tmp_path)
    bad = sorted(keys)[3]  # not one of the files the schema is sampled from (first three, newest)
    put(bad, b"Obj\x01 truncated")
    register(spark, {"connect.local.root": str(root)}, plans=[p])
    with pytest.raises(PythonException) as info:
        spark.sql("SELECT COUNT(*) FROM corrupt").collect()
    message = _spark_message(info.value)
    assert message.startswith("query failed: cannot decode bkt/" + bad + " as AVRO"), message


def _two_topic_plan(fmt: StoreFormat, layout: str):
    """A plan of ``layout`` with ``FROM `*```, so one view holds every topic written under it."""
    plan = ld.plan(fmt, layout, prefix=f"tt_{fmt.value.lower()}_{layout.replace('-', '_')}")
    return dataclasses.replace(plan, source="*")


def test_native_views_equal_the_python_source_row_for_row(spark, tmp_path: Path) -> None:
    """Spark's own readers (one scan without PARTITIONBY, a union of scans with it) give the same
    columns, types and rows, per-file columns included, as the Python data source, which reads
    each file by itself; litter is never read, and awkward characters in the root path (which
    Spark percent-encodes in its file paths) do not break the per-file columns."""
    from pyspark.sql import functions as F

    root = tmp_path / "r o%25[t]é+,x" / "store"
    put = ld.local_put(root / "bkt")
    recs = ld.records("orders", partitions=3) + ld.records("refunds", partitions=2)
    # every layout once; JSON (one scan too when unpartitioned) in the default layout only, to stay quick
    plans = [_two_topic_plan(StoreFormat.PARQUET, layout) for layout in ld.LAYOUTS]
    plans.append(_two_topic_plan(StoreFormat.JSON, "default"))
    for p in plans:
        ld.write_with_sink_libs(p, recs, put, tmp_path, per_file=3)  # 3 files per partition, and litter
    config = {"connect.storage": "local", "connect.local.root": str(root)}
    native = view_frames(spark, config, plans=plans, native=True)
    python = view_frames(spark, config, plans=plans, native=False)

    sides = []
    for p in plans:
        name = p.prefix
        (df, description), (py, py_description) = native[name], python[name]
        assert "spark native" in description and "python reader" in py_description
        # the value has a `region` field, so PARTITIONBY region is `part_region`
        pcols = [{"region": "part_region"}.get(f.display_name, f.display_name) for f in p.partition_by or ()]
        tail = ["_topic", "_partition", "_file_first_offset", "_file_last_offset", "_file", *pcols]
        assert df.columns[-len(tail) :] == tail == py.columns[-len(tail) :], name
        assert dict(df.dtypes) == dict(py.dtypes), name
        df.createOrReplaceTempView(name)
        scans = spark.sql(f"EXPLAIN SELECT * FROM {name}").first()[0].count("FileScan ")  # noqa: S608
        assert (scans == 1) == (not pcols), (name, scans)
        for frame, side in ((df, 1), (py, -1)):
            row = F.to_json(F.struct(*sorted(frame.columns)))
            sides.append(frame.select(F.lit(name).alias("v"), row.alias("row"), F.lit(side).alias("side")))
    # every row as JSON, counted +1 per native and -1 per Python copy: all rows must cancel out
    rows = functools.reduce(lambda a, b: a.unionByName(b), sides).groupBy("v", "row")
    rows = rows.agg(F.sum("side").alias("surplus"), F.sum((F.col("side") > 0).cast("int")).alias("n"))
    views = rows.groupBy("v").agg(F.sum("n").alias("n"), F.sum(F.abs("surplus")).alias("unmatched"))
    got = {r["v"]: (r["n"], r["unmatched"]) for r in views.collect()}
    assert got == {p.prefix: (len(recs), 0) for p in plans}


def test_filters_on_topic_and_partition_skip_the_files_of_other_partitions(spark, tmp_path: Path) -> None:
    """Without PARTITIONBY a native view is one scan; a filter on ``_topic``/``_partition`` must
    still keep Spark from opening the other partitions' files (here: unreadable ones)."""
    from py4j.protocol import Py4JJavaError
    from pyspark.errors import PySparkException

    root = tmp_path / "store"
    put = ld.local_put(root / "bkt")
    recs = ld.records("orders", partitions=2) + ld.records("refunds", partitions=1)
    p = _two_topic_plan(StoreFormat.PARQUET, "default")
    keys = ld.write_with_sink_libs(p, recs, put, tmp_path)
    register(spark, {"connect.storage": "local", "connect.local.root": str(root)}, plans=[p])
    for key in keys:
        if "/orders/1/" not in key:
            put(key, b"not parquet at all")  # after register: the view's file list is fixed
    kept = [r for r in recs if r.topic == "orders" and r.partition == 1]
    row = spark.sql(
        f"SELECT COUNT(*) n, SUM(id) s, COUNT(DISTINCT _file) f FROM {p.prefix} "  # noqa: S608
        "WHERE _topic = 'orders' AND _partition = 1"
    ).first()
    files = sum(1 for k in keys if "/orders/1/" in k)
    assert (row["n"], row["s"], row["f"]) == (len(kept), sum(r.value["id"] for r in kept), files)
    assert files > 1 and len(keys) > 2 * files
    with pytest.raises((PySparkException, Py4JJavaError), match="FAILED_READ_FILE"):  # read, so it fails
        spark.sql(f"SELECT COUNT(*) FROM {p.prefix} WHERE _partition = 0").collect()  # noqa: S608
