"""The benchmark harness on a few hundred records, so ``make bench`` cannot rot silently.

It runs the real pieces (produce with delivery-report end offsets, bare consume with the sink's
consumer settings, a timed ``kcql-sink run`` subprocess with RSS polling and commit detection
from the storage listing, the Spark timing with its answer cross-check, the table/targets and
the PNG). quix-streams is left out on purpose: it lives in its own venv that ``make test`` must
not install.
"""

from __future__ import annotations

import json
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench import harness as h
from bench import run as bench_run


def test_bench_pieces_end_to_end(
    kafka_bootstrap: str, schema_registry_url: str, spark: Any, tmp_path: Path
) -> None:
    suffix = uuid.uuid4().hex[:6]
    data = h.produce(kafka_bootstrap, f"bsmoke-avro-{suffix}", 300, pad=60, kind="avro",
                     registry_url=schema_registry_url)
    assert data.ends == {0: 100, 1: 100, 2: 100}
    assert 90 < data.value_bytes / data.records < 160

    json_data = h.produce(kafka_bootstrap, f"bsmoke-json-{suffix}", 300, pad=60, partitions=4)

    # The bare consume and the spark-run of the JSON topic run beside the sink run: the two
    # processes mostly wait for their group joins (about 3 s each on Tansu) while Spark works, and
    # none reads what another writes (fresh groups, their own topic or output directory), so only
    # the wall time changes; the timings are checked for being measured, not for their size.
    root = tmp_path / "local"
    with ThreadPoolExecutor(2) as pool:
        bare_future = pool.submit(h.bare_consume, kafka_bootstrap, data)
        out = root / "bench" / "avro_to_parquet_local"
        run_future = pool.submit(
            h.run_sink, "avro_to_parquet_local", data, "PARQUET", h.avro_converters(schema_registry_url),
            h.local_storage(root), lambda: h.local_keys(out), kafka_bootstrap, tmp_path / "logs",
        )
        pipeline = h.spark_run_timing(spark, kafka_bootstrap, json_data, root, "json_spark_run")
        bare, run = bare_future.result(), run_future.result()
    assert bare["rps"] > 0 and bare["first_record_s"] >= 0
    assert run["records"] == 300 and run["rps"] > 0 and run["mb_s"] > 0
    assert 20 < run["peak_rss_mb"] < 2000  # the sink's process tree was measured, not this process
    lasts = h.committed_lasts(h.local_keys(root / "bench" / "avro_to_parquet_local"))
    assert lasts == {0: 99, 1: 99, 2: 99}
    assert pipeline["rps"] > 0 and pipeline["seconds"] > 0
    lasts = h.committed_lasts(h.local_keys(root / "bench" / "json_spark_run"))
    assert lasts == {0: 74, 1: 74, 2: 74, 3: 74}  # every record of every partition committed by Spark

    timing = h.spark_timing(spark, root, "avro_to_parquet_local", data.topic, repeats=1, warm_ups=1)
    assert timing["rows"] == 300 and timing["files"] == 6  # flush.count = half a partition
    assert timing["ratio"] > 0 and timing["total_ratio"] > 0


def test_the_reshaping_runs_write_what_they_say(kafka_bootstrap: str, tmp_path: Path) -> None:
    """``json_to_parquet_projection`` and ``json_to_parquet_mapper`` (issue 23) as the bench runs them."""
    import pyarrow.parquet as pq

    data = h.produce(kafka_bootstrap, f"bsmoke-shape-{uuid.uuid4().hex[:6]}", 200, pad=10, partitions=2)
    root = tmp_path / "local"
    shapes = {
        "projection": {"select": "id, amount AS total, country"},
        "mapper": {"props": {"transforms": "lower", "transforms.lower.type": "kcql.sink.transforms.Python",
                             "transforms.lower.function": "bench.mappers:lower_country"}},
    }

    def run(name: str, shape: dict[str, Any]) -> dict[str, Any]:
        return h.run_sink(name, data, "PARQUET", h.JSON_CONVERTERS, h.local_storage(root),
                          lambda: h.local_keys(root / "bench" / name), kafka_bootstrap,
                          tmp_path / "logs", **shape)

    # the two runs side by side: their own connector (group), output directory and log, and each
    # process mostly waits for its group join, so one after the other only costs wall time
    with ThreadPoolExecutor(len(shapes)) as pool:
        runs = dict(zip(shapes, pool.map(run, shapes, shapes.values()), strict=True))
    tables = {}
    for name, result in runs.items():
        assert result["records"] == 200, name
        tables[name] = pq.read_table(root / "bench" / name).to_pylist()
    assert len(tables["projection"]) == 200 and set(tables["projection"][0]) == {"id", "total", "country"}
    assert all(row["country"].islower() for row in tables["mapper"])
    assert {row["id"] for row in tables["mapper"]} == set(range(200))


def test_committed_lasts_reads_the_default_layout_only() -> None:
    keys = ["t/0/000000049_1_2.parquet", "t/0/000000099_3_4.parquet", "t/1/12_5_6.json",
            ".indexes/t/0/x", "t/2/.kcql-tmp/000000100_1_2.parquet", "t/notapartition/5_1_1.json"]
    assert h.committed_lasts(iter(keys)) == {0: 99, 1: 12}


def test_table_targets_and_chart(tmp_path: Path) -> None:
    names = ["json_to_json_local", "json_to_parquet_local", "avro_to_parquet_local", "json_to_avro_local",
             "json_to_parquet_s3", "avro_to_avro_local", "quix_json_local", "quix_parquet_local"]
    rps = [150_000, 110_000, 130_000, 80_000, 90_000, 170_000, 30_000, 40_000]
    runs = [{"name": n, "records": 1000, "rps": r, "mb_s": r / 6000, "ratio_to_bare": r / 200_000,
             "ratio_to_quix": None, "peak_rss_mb": 100.0} for n, r in zip(names, rps, strict=True)]
    runs[0]["ratio_to_quix"], runs[1]["ratio_to_quix"] = 5.0, 2.75
    result = {"quick": True, "bare_consume_rps": 200_000.0, "runs": runs, "rss_1000_partitions_mb": 300.0,
              "idle_visible_s": 2.5, "idle_flush_interval_s": 2, "spark_reader_ratio": 1.05,
              "spark": {"reader_s": 1.05, "parquet_s": 1.0, "reader_total_s": 1.5, "parquet_total_s": 1.2,
                        "total_ratio": 1.25},
              "loadavg_start": 1.0, "loadavg_end": 1.5,
              "rss_10000_partitions_mb": 420.0, "rss_10000_partitions_open_files": 10_000,
              "s3_requests": {"protocols": {
                  "conditional": {"per_file": {"total": 3.08, "commit": 3.0},
                                  "usd_per_million_records": 0.031},
                  "copy": {"per_file": {"total": 6.08, "commit": 6.0}, "usd_per_million_records": 0.041}}},
              "staging": [{"streaming": True, "partitions": 50, "part_size": 16 << 20, "value_mb": 5000.0,
                           "peak_staging_mb": 731.0},
                          {"streaming": False, "partitions": 50, "part_size": None, "value_mb": 500.0,
                           "peak_staging_mb": 498.0}],
              "spark_run": {"records": 1000, "rps": 60_000.0, "seconds": 0.02, "run_rps": 110_000.0,
                            "ratio_to_run": 60_000 / 110_000}}
    checks = dict(bench_run.targets(result))
    assert list(checks.values()).count(False) == 1  # only JSON->PARQUET x quix (2.75 < 3)
    assert checks["spark-run --once on local[2] >= 0.5 x kcql-sink run (0.55)"]
    assert not checks["json_to_parquet_local >= 3 x quix-streams (2.75)"]
    assert checks["peak RSS with 10,000 open partitions <= 1 GB (420 MB, 10,000 files open)"]
    assert checks["S3 requests per committed file <= 3, the run's start-up requests left out (3.00; "
                  "3.08 with them; upload-copy-delete 6.00)"]
    assert [k for k in checks if k.startswith("peak staging")] == [
        "peak staging with flush.size=1 GB on 50 partitions, 5,000 MB through: <= 1,049 MB (731)"]
    text = bench_run.table(result)
    assert "json_to_parquet_s3" in text and "[MISSED]" in text and "spark-run --once" in text
    assert "S3 requests per committed file: 3.00 (upload-copy-delete 6.00); 3.08 (6.08) with the run" in text
    assert "whole files: 498 MB" in text
    png = tmp_path / "chart.png"
    bench_run.chart(result, png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    json.dumps(result)  # the shape latest.json is written in


def test_paired_ratio_is_the_median_of_each_rounds_ratio_to_its_own_bare_run() -> None:
    rounds = [{"rps": 80.0, "paired_bare_rps": 100.0},  # 0.80
              {"rps": 90.0, "paired_bare_rps": 200.0},  # 0.45: bare ran in a fast minute
              {"rps": 95.0, "paired_bare_rps": 100.0}]  # 0.95
    got = bench_run.paired_ratio(rounds)
    assert got == {"ratio_paired": 0.8, "paired_ratios": [0.45, 0.8, 0.95]}
    assert bench_run.paired_ratio(rounds[:2])["ratio_paired"] == (0.45 + 0.8) / 2
    assert bench_run.paired_ratio([{"rps": 1.0}]) == {}  # quix-streams rounds have no paired bare run

    # the target reads the paired median, and says what fastest/fastest would have been
    runs = [{"name": n, "ratio_to_bare": 0.1, "ratio_paired": 0.9, "paired_ratios": [0.85, 0.9, 0.95],
             "ratio_to_quix": 10.0} for n in bench_run.TARGETS]
    runs[-1].update(ratio_to_bare=0.95, ratio_paired=0.75, paired_ratios=[0.7, 0.75, 0.9])
    result = {"runs": runs, "rss_1000_partitions_mb": 1.0, "idle_visible_s": 1.0, "idle_flush_interval_s": 2,
              "spark_reader_ratio": 1.0}
    checks = dict(bench_run.targets(result))
    name = list(bench_run.TARGETS)[-1]
    floor = bench_run.TARGETS[name][1]
    label = (f"{name} >= {floor:.2f} x bare consume, median of paired rounds (0.75; rounds 0.70, 0.75, 0.90; "
             "fastest/fastest 0.95)")
    assert checks[label] is False
    assert sum(1 for ok in checks.values() if not ok) == 1


def test_best_of_keeps_the_fastest_timing_and_every_sample() -> None:
    runs = [{"name": "x", "seconds": 1.2, "rps": 250.0, "peak_rss_mb": 120.0},
            {"name": "x", "seconds": 0.9, "rps": 333.3, "peak_rss_mb": 100.0},
            {"name": "x", "seconds": 1.0, "rps": 300.0, "peak_rss_mb": 140.0}]
    best = bench_run.best_of(runs)
    assert best["seconds"] == 0.9 and best["rps"] == 333.3 and best["samples_s"] == [1.2, 0.9, 1.0]
    assert best["peak_rss_mb"] == 140.0  # memory: the worst round
    assert "peak_rss_mb" not in bench_run.best_of([{"seconds": 1.0}])  # bare consume has none
    assert bench_run.samples(best) == "best of 1.20, 0.90, 1.00 s"
    assert "samples_s" not in runs[1]  # the inputs are left as they were


def test_the_open_partitions_run_counts_the_writers_it_held_open(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """The 10,000-open-partitions row on 40: 40 values over 2 partitions are 40 open files."""
    data = h.produce(kafka_bootstrap, f"bsmoke-wide-{uuid.uuid4().hex[:6]}", 240, pad=10, customers=-40,
                     partitions=2)
    got = h.rss_with_open_partitions(data, kafka_bootstrap, tmp_path / "local", tmp_path / "logs",
                                     distinct=40)
    assert got["open_files"] == 40
    assert got["directories"] == 40, "SIGTERM committed every open file"
    assert 20 < got["peak_rss_mb"] < 2000
