"""End to end: the real SinkTask writes (local storage and SeaweedFS), Spark SQL and `kcql-sink
sql`/`cat` read back from the connector config alone, and queries racing the live task never see a
partial file or a duplicate.
"""

from __future__ import annotations

import contextlib
import io
import json
import threading
import time
import uuid
from pathlib import Path

import pytest

from sink.cli import main as cli_main
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from spark_reader import register
from spark_reader.catalog import list_files, view_specs
from tests.batches import put_records
from tests.unit.spark_reader import lenses_data as ld

pytestmark = pytest.mark.spark

# one statement per topic (the task routes a topic to one statement); every format and layout
STATEMENTS = {
    "o_json": "INSERT INTO {b}:e2e/json SELECT * FROM o_json STOREAS `JSON`",
    "o_avro": "INSERT INTO {b}:e2e/avro SELECT * FROM o_avro PARTITIONBY region STOREAS `AVRO`",
    "o_parquet": "INSERT INTO {b}:e2e/parquet SELECT * FROM o_parquet PARTITIONBY region, _partition "
    "STOREAS `PARQUET` PROPERTIES('partition.include.keys'=false)",
    "o_csv": "INSERT INTO {b}:e2e/csv SELECT * FROM o_csv NOPARTITION STOREAS `CSV_WITHHEADERS`",
    "o_env": "INSERT INTO {b}:e2e/env SELECT * FROM o_env PARTITIONBY region STOREAS `PARQUET` "
    "PROPERTIES('store.envelope'=true)",
    "o_text": "INSERT INTO {b}:e2e/text SELECT * FROM o_text STOREAS `TEXT`",
    "o_bytes": "INSERT INTO {b}:e2e/bytes SELECT * FROM o_bytes NOPARTITION STOREAS `BYTES` "
    "PROPERTIES('flush.count'=1)",
}
FLUSH = " PROPERTIES('flush.count'=4)"


def _kcql(bucket: str) -> str:
    parts = []
    for stmt in STATEMENTS.values():
        text = stmt.format(b=bucket)
        if "flush.count" not in text:
            text = (
                text.replace(" PROPERTIES(", " PROPERTIES('flush.count'=4, ")
                if "PROPERTIES(" in text
                else text + FLUSH
            )
        parts.append(text + ";")
    return "\n".join(parts)


def _run_sink(config: dict[str, str], recs_by_topic: dict[str, list[ld.Rec]]) -> SinkTask:
    task = SinkTask()
    task.start(config)
    task.open([TopicPartition(t, p) for t in recs_by_topic for p in (0, 1)])
    plans = {p.source: p for p in task._plans}
    for topic, recs in recs_by_topic.items():
        put_records(task, [ld.sink_record(plans[topic], r) for r in recs])
    return task


@pytest.fixture(params=["local", "s3"])
def backend(request, tmp_path: Path):
    if request.param == "local":
        root = tmp_path / "store"
        (root / "e2e-bucket").mkdir(parents=True)
        config = {"connect.storage": "local", "connect.local.root": str(root)}

        def read(key: str) -> bytes:
            return (root / "e2e-bucket" / key).read_bytes()

        return "e2e-bucket", config, read
    endpoint = request.getfixturevalue("s3_endpoint")
    client = request.getfixturevalue("s3_client")
    bucket = f"e2e-{uuid.uuid4().hex[:8]}"
    client.create_bucket(Bucket=bucket)
    return (
        bucket,
        endpoint.connect_config(),
        lambda key: client.get_object(Bucket=bucket, Key=key)["Body"].read(),
    )


def test_sink_output_queried_from_the_connector_config(spark, backend, tmp_path: Path) -> None:
    bucket, storage, read = backend
    config = {
        "name": f"e2e-{uuid.uuid4().hex[:6]}",
        "connect.s3.kcql": _kcql(bucket),
        "connect.s3.local.tmp.directory": str(tmp_path / "staging"),
        **storage,
    }
    recs = {t: ld.records(t, partitions=2, per_partition=24) for t in STATEMENTS}
    task = _run_sink(config, recs)
    task.stop()

    specs = {s.plan.source: s for s in view_specs(config)}
    written = {
        specs[t].name: [f.key for f in list_files(specs[t].plan, specs[t].storage)] for t in STATEMENTS
    }
    assert all(written.values()), written
    views = register(spark, config)  # KCQL + storage keys only: no plans handed over
    assert (
        sorted(views)
        == sorted(s.name for s in specs.values())
        == sorted(["json", "avro", "parquet", "csv", "env", "text", "bytes"])
    )

    plans = [_renamed(specs[t]) for t in STATEMENTS]
    ld.assert_views_match(spark, plans, written, read, recs["o_json"])
    # every record the task committed is there: 2 partitions x 24, flush.count 4 divides each writer's share;
    # a bare COUNT(*) reads no column at all (another scan than the aggregates above), one job for all views
    names = ("json", "avro", "parquet", "csv", "env", "text")
    counts = spark.sql(
        " UNION ALL ".join(f"SELECT '{name}' AS v, COUNT(*) AS c FROM {name}" for name in names)  # noqa: S608
    ).collect()
    assert {r["v"]: r["c"] for r in counts} == dict.fromkeys(names, 48)

    # the CLI: sql (table + json) and cat, from a config file, sharing this session
    cfg_file = tmp_path / "connector.json"
    cfg_file.write_text(json.dumps({"name": config["name"], "config": config}))
    out = io.StringIO()
    _capture(
        out,
        [
            "sql",
            "SELECT region, COUNT(*) AS n FROM avro GROUP BY region ORDER BY region",
            "--config",
            str(cfg_file),
            "--format",
            "json",
        ],
    )
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert got == [{"region": r, "n": 16} for r in sorted(ld.REGIONS)]
    out = io.StringIO()
    _capture(out, ["sql", "--config", str(cfg_file)])
    assert (
        "avro: AVRO KeysAndValues PARTITIONBY region" in out.getvalue()
        and "  part_region: string" in out.getvalue()
    )
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert cli_main(["sql", "SELECT nope FROM avro", "--config", str(cfg_file)]) == 1
    assert err.getvalue().startswith("kcql-sink sql: query failed:") and "nope" in err.getvalue()
    assert "Traceback" not in err.getvalue()
    out = io.StringIO()
    _capture(out, ["cat", "--config", str(cfg_file), "--topic", "o_json", "--from-offset", "20"])
    lines = [json.loads(x) for x in out.getvalue().splitlines()]
    assert sorted((x["partition"], x["offset"]) for x in lines) == [
        (p, o) for p in (0, 1) for o in range(20, 24)
    ]
    assert all(x["value"]["id"] == x["partition"] * 1000 + x["offset"] for x in lines)


def _renamed(spec):
    """The plan with its prefix replaced by the view name, as assert_views_match keys views by prefix."""
    import dataclasses

    return dataclasses.replace(spec.plan, prefix=spec.name)


def _capture(out: io.StringIO, argv: list[str]) -> None:
    with contextlib.redirect_stdout(out):
        assert cli_main(argv) == 0


def test_queries_racing_the_live_sink_see_whole_files_once(spark, backend, tmp_path: Path) -> None:
    bucket, storage, _ = backend
    config = {
        "name": f"live-{uuid.uuid4().hex[:6]}",
        "connect.s3.kcql": (
            f"INSERT INTO {bucket}:live SELECT * FROM live STOREAS `AVRO` PROPERTIES('flush.count'=8)"  # noqa: S608
        ),
        "connect.s3.local.tmp.directory": str(tmp_path / "staging"),
        **storage,
    }
    recs = ld.records("live", partitions=1, per_partition=400)
    task = SinkTask()
    task.start(config)
    task.open([TopicPartition("live", 0)])
    plan = task._plans[0]
    put_records(task, [ld.sink_record(plan, r) for r in recs[:8]])

    def produce() -> None:
        for i in range(8, len(recs), 8):
            put_records(task, [ld.sink_record(plan, r) for r in recs[i : i + 8]])
            time.sleep(0.2)

    register(spark, config)
    spark.sql("SELECT COUNT(*) FROM live").collect()  # warm the Python workers
    t = threading.Thread(target=produce, daemon=True)
    t.start()
    seen = []
    try:
        deadline = time.monotonic() + 120
        while t.is_alive() and time.monotonic() < deadline:
            register(spark, config)  # a view is a snapshot of the committed files: re-list
            r = spark.sql("SELECT COUNT(*) c, COUNT(DISTINCT id) d, MAX(id) m FROM live").collect()[0]
            assert r["c"] == r["d"], f"duplicate rows: {r}"
            assert r["c"] % 8 == 0, f"partial file visible: {r}"
            assert r["c"] == 0 or r["m"] == r["c"] - 1, f"gap: {r}"
            seen.append(r["c"])
    finally:
        t.join(60)
        task.stop()
    assert len(set(seen)) >= 2, f"the queries never overlapped the commits: {seen}"
    register(spark, config)
    final = spark.sql("SELECT COUNT(*) c, COUNT(DISTINCT id) d FROM live").collect()[0]
    assert final["c"] == final["d"] == len(recs)
