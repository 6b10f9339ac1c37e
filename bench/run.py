"""``make bench`` (``QUICK=1`` for a ~1-minute version): kcql-sink against bare consume and quix-streams.

One run, one broker, data produced once: an embedded Tansu broker, SeaweedFS for the S3 run, the
test Schema Registry for Avro. Bare confluent-kafka consume sets the ceiling; every ``kcql-sink
run`` (a subprocess, fresh connector name and group) and quix-streams' file sink (its own venv) is
timed on the same topics (see :mod:`bench.harness` for the timing rule), in three rounds of which
each contender's fastest counts (:func:`best_of`). In each round every sink run follows a bare
consume of its topic (in a process of its own, :mod:`bench.bare`); the targets are judged on the
median of those paired ratios (:func:`paired_ratio`), with fastest/fastest beside it, after four
more paired rounds of the rows with a target (:data:`TARGET_ROUNDS`). Then peak
RSS with 1,000 open PARTITIONBY writers, the idle-partition visibility delay, and a Spark aggregate through
``spark_reader`` vs ``spark.read.parquet``. Prints one table and writes ``bench/results/latest.json``
and ``bench/results/latest.png``. ``--profile`` also runs JSON→JSON and JSON→PARQUET under cProfile
and prints where the time goes.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import pstats
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench import harness as h
from bench import s3_requests
from bench import staging as staging_bench
from kcql.errors import SinkError

__all__ = ["main", "run_bench", "table", "targets"]

RESULTS = Path(__file__).resolve().parent / "results"

TARGETS = {
    "json_to_json_local": ("ratio_paired", 0.70),
    "json_to_parquet_local": ("ratio_paired", 0.50),
    "avro_to_parquet_local": ("ratio_paired", 0.60),  # issue 24 (was 0.35)
    "json_to_avro_local": ("ratio_paired", 0.35),  # issue 24
    "avro_to_avro_local": ("ratio_paired", 0.80),  # issue 24
}
QUIX_PEER = {"json_to_json_local": "quix_json_local", "json_to_parquet_local": "quix_parquet_local"}
REPEAT = 3
"""Rounds of a full run, each timing every contender once, bare consume included; a contender's
fastest round counts (see :func:`best_of`)."""
TARGET_ROUNDS = 7
"""Paired rounds of each row with a ratio target (:data:`TARGETS`): the :data:`REPEAT` full rounds,
then more of those rows only. On this VM one row's paired ratios spread by 0.2-0.4 within a
minute (AVRO→AVRO 0.61-1.04 in five rounds, 2026-11-28), so the median of three moved by a tenth
from run to run and a floor's verdict went with it; the median of seven holds it closer for ~2
minutes more."""


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def s3_listing(client: Any, bucket: str, prefix: str) -> Any:
    return lambda: h.s3_keys(client, bucket, prefix)


def best_of(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The fastest of repeated timings of one contender, with every sample's seconds attached.

    On a shared 2-core machine a single timing can lose a third to a neighbour's burst, and the
    ratios divide two such timings. The fastest of a few is the least disturbed, and bare consume
    (the ceiling) gets the same treatment, so this raises the bar as much as the scores. Peak RSS
    is the highest of all samples.
    """
    best = dict(min(results, key=lambda r: r["seconds"]))
    best["samples_s"] = [round(r["seconds"], 3) for r in results]
    if all("peak_rss_mb" in r for r in results):  # memory: the worst round, not the fastest
        best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in results)
    return best


def paired_ratio(results: list[dict[str, Any]]) -> dict[str, Any]:
    """The median of a contender's rounds' ratios to the bare consume run just before each.

    Best-of on each side divides the fastest sink round by the fastest bare round, which may be
    minutes and a different machine speed apart: on this shared VM bare consume of the same topic
    ran at 483k-985k records/s across runs of the same code, and within one run its rounds spread
    twice as wide as the sink's. A pair is timed seconds apart, so the machine's speed divides out;
    the median of the rounds drops the one pair a neighbour's burst disturbed, whichever side it hit.
    Returns ``{"ratio_paired", "paired_ratios"}``, empty when the rounds have no paired bare run.
    """
    if not results or not all("paired_bare_rps" in r for r in results):
        return {}
    ratios = sorted(r["rps"] / r["paired_bare_rps"] for r in results)
    mid = len(ratios) // 2
    median = ratios[mid] if len(ratios) % 2 else (ratios[mid - 1] + ratios[mid]) / 2
    return {"ratio_paired": median, "paired_ratios": [round(x, 3) for x in ratios]}


def samples(result: dict[str, Any]) -> str:
    return "best of " + ", ".join(f"{s:.2f}" for s in result["samples_s"]) + " s"


def profile_summary(path: Path, top: int = 18) -> str:
    """The hottest functions of a cProfile dump by own time, as text."""
    import io

    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    text = out.getvalue()
    return text[text.find("   ncalls") :] if "   ncalls" in text else text


def run_bench(quick: bool, profile: bool, keep: Path | None) -> dict[str, Any]:
    from tests.fixtures.seaweedfs import make_client, start_seaweedfs

    repeat = 1 if quick else REPEAT
    small = 30_000 if quick else 300_000
    big = 6_000 if quick else 60_000
    wide = 10_000 if quick else 50_000
    work = Path(keep or tempfile.mkdtemp(prefix="kcql-bench-"))
    root = work / "local"
    root.mkdir(parents=True, exist_ok=True)
    result: dict[str, Any] = {"quick": quick, "started": datetime.now(UTC).isoformat(timespec="seconds"),
                              "machine": f"{platform.machine()} {platform.python_version()}",
                              "loadavg_start": os.getloadavg()[0]}
    from sink.quickstart.embedded import start_tansu

    broker = start_tansu()
    with contextlib.ExitStack() as stack:
        stack.callback(broker.stop)
        seaweed = start_seaweedfs()
        stack.callback(seaweed.stop)
        registry = stack.enter_context(h.start_registry())
        s3 = make_client(seaweed.endpoint)
        s3.create_bucket(Bucket="bench")
        say(f"broker {broker.bootstrap}, SeaweedFS {seaweed.endpoint.url}, registry {registry}")

        t = time.monotonic()
        json_small = h.produce(broker.bootstrap, "bench-json", small, pad=60)
        json_big = h.produce(broker.bootstrap, "bench-json1k", big, pad=900)
        avro = h.produce(broker.bootstrap, "bench-avro", small, pad=60, kind="avro", registry_url=registry)
        wide_data = h.produce(broker.bootstrap, "bench-wide", wide, pad=60, customers=0)
        # 10,000 customers over 2 partitions: each value lives in one partition, so exactly 10,000
        # topic-partition-paths, 6 records each
        wide10k_data = h.produce(broker.bootstrap, "bench-wide10k", 60_000, pad=60, customers=-10_000,
                                 partitions=2)
        million = h.produce(broker.bootstrap, "bench-json1m", 100_000 if quick else 1_000_000, pad=60,
                            partitions=4)  # local[2] runs the 4 partition tasks in two even waves
        say(f"produced {small:,} x ~{json_small.value_bytes // small} B JSON, {big:,} x "
            f"~{json_big.value_bytes // big} B JSON, {small:,} x ~{avro.value_bytes // small} B Avro, "
            f"{wide:,} wide in {time.monotonic() - t:.1f} s")

        local = h.local_storage(root)
        jc = h.JSON_CONVERTERS
        ac = h.avro_converters(registry)

        def local_keys(name: str) -> Any:
            return lambda: h.local_keys(root / "bench" / name)

        def s3_keys(name: str) -> Any:
            return s3_listing(s3, "bench", f"{name}/")

        s3_conf, local_poll, s3_poll = seaweed.endpoint.connect_config(), h.LOCAL_POLL_S, h.S3_POLL_S
        plan = [
            ("json_to_json_local", json_small, "JSON", jc, local, local_keys, local_poll),
            ("json_to_parquet_local", json_small, "PARQUET", jc, local, local_keys, local_poll),
            ("avro_to_parquet_local", avro, "PARQUET", ac, local, local_keys, local_poll),
            ("avro_to_json_local", avro, "JSON", ac, local, local_keys, local_poll),
            ("json_to_avro_local", json_small, "AVRO", jc, local, local_keys, local_poll),
            ("json_to_parquet_s3", json_small, "PARQUET", jc, s3_conf, s3_keys, s3_poll),
            ("avro_to_avro_local", avro, "AVRO", ac, local, local_keys, local_poll),
            ("avro_to_avro_s3", avro, "AVRO", ac, s3_conf, s3_keys, s3_poll),
            ("json1k_to_json_local", json_big, "JSON", jc, local, local_keys, local_poll),
            ("json1k_to_parquet_local", json_big, "PARQUET", jc, local, local_keys, local_poll),
            ("json_to_parquet_projection", json_small, "PARQUET", jc, local, local_keys, local_poll),
            ("json_to_parquet_mapper", json_small, "PARQUET", jc, local, local_keys, local_poll),
        ]
        reshaping = {  # issue 23: the same JSON->PARQUET run with a projection, and with a Python mapper
            "json_to_parquet_projection": {"select": "id, amount AS total, country, ts AS created"},
            "json_to_parquet_mapper": {"props": {
                "transforms": "lower",
                "transforms.lower.type": "kcql.sink.transforms.Python",
                "transforms.lower.function": "bench.mappers:lower_country",
            }},
        }
        quix = (("quix_json_local", "json"), ("quix_parquet_local", "parquet"))
        # Rounds, each timing every contender once: a slow minute of the machine then costs one
        # sample of several contenders, not every sample of one.
        bare_samples: dict[str, list[dict[str, Any]]] = {}
        samples_by_run: dict[str, list[dict[str, Any]]] = {}
        rounds = max(repeat, 1 if quick else TARGET_ROUNDS)
        for round_no in range(1, rounds + 1):
            for name, data, fmt, conv, storage, keys, poll_s in plan:
                if round_no > repeat and name not in TARGETS:
                    continue
                # bare consume of the same topic right before each sink run: the pair's ratio is
                # taken within seconds, whatever the machine's speed that minute (see paired_ratio)
                bare_now = h.bare_consume(broker.bootstrap, data)
                bare_samples.setdefault(data.topic, []).append(bare_now)
                # round 1 writes under the run's own name (Spark reads json_to_parquet_local)
                out = name if round_no == 1 else f"{name}-{round_no}"
                sample = h.run_sink(out, data, fmt, conv, storage, keys(out), broker.bootstrap, work / "logs",
                                    poll_s=poll_s, **reshaping.get(name, {}))
                sample["paired_bare_rps"] = bare_now["rps"]
                samples_by_run.setdefault(name, []).append(sample)
            for name, fmt in quix if round_no <= repeat else ():
                samples_by_run.setdefault(name, []).append(
                    h.run_quix(f"{name}{round_no}", json_small, fmt, broker.bootstrap, work / "quix"))
            if rounds > 1:
                say(f"round {round_no} of {rounds} done"
                    + (" (the rows with a ratio target only)" if round_no > repeat else ""))

        bare = {topic: best_of(got) for topic, got in bare_samples.items()}
        for topic, b in bare.items():
            say(f"bare consume {topic}: {b['rps']:,.0f} rec/s (first record {b['first_record_s']:.2f} s "
                f"after assignment; {samples(b)})")
        runs: list[dict[str, Any]] = []
        topics = {name: data.topic for name, data, *_ in plan} | {name: json_small.topic for name, _ in quix}
        for name in [*(item[0] for item in plan), *(name for name, _ in quix)]:
            r = best_of(samples_by_run[name])
            r["name"] = name
            r["bare_rps"] = bare[topics[name]]["rps"]
            r.update(paired_ratio(samples_by_run[name]))
            runs.append(r)
            say(f"{name}: {r['rps']:,.0f} rec/s, peak RSS {r['peak_rss_mb']:.0f} MB ({samples(r)})")

        # 1,000 values, each in all 3 partitions: 3,000 open writers
        wide_result = h.rss_with_open_partitions(wide_data, broker.bootstrap, root, work / "logs",
                                                 distinct=3_000)
        say(f"1,000 open partitions: peak RSS {wide_result['peak_rss_mb']:.0f} MB "
            f"({wide_result['directories']:.0f} PARTITIONBY directories committed at stop, "
            f"{wide_result['open_files']:.0f} files open)")
        wide10k = h.rss_with_open_partitions(wide10k_data, broker.bootstrap, root, work / "logs",
                                             distinct=10_000)
        say(f"10,000 open partitions: peak RSS {wide10k['peak_rss_mb']:.0f} MB "
            f"({wide10k['open_files']:.0f} staging files open at once)")
        idle_s = h.idle_visibility(broker.bootstrap, root, work / "logs", flush_interval=2)
        say(f"idle partition: records visible {idle_s:.2f} s after produce (flush.interval=2 s)")

        # S3 requests per committed file, the conditional protocol against upload-copy-delete
        requests = s3_requests.measure(broker.bootstrap, seaweed.endpoint, json_small, work / "requests")
        say("S3 requests (counted at the store through the proxy):\n" + s3_requests.table(requests))

        # local staging with flush.size = 1 GB on 50 partitions: streamed parts against whole files
        staging_results = []
        for label, gb, streaming in (("streaming_on", 0.5 if quick else 5.0, True),
                                     ("streaming_off", 0.2 if quick else 0.5, False)):
            topic = f"bench-staging-{label}"
            sdata = h.produce(broker.bootstrap, topic, staging_bench.records_for(gb), pad=staging_bench.PAD,
                              partitions=staging_bench.PARTITIONS)
            got = staging_bench.staging_run(label, sdata, broker.bootstrap, s3_conf, s3, "bench", work,
                                            streaming=streaming)
            staging_results.append(got)
            say(f"staging, flush.size=1 GB on {got['partitions']} partitions, {got['value_mb']:,.0f} MB, "
                f"{label}: peak staging {got['peak_staging_mb']:,.0f} MB, "
                f"peak RSS {got['peak_rss_mb']:.0f} MB, {got['seconds']:.0f} s")

        profiles: dict[str, str] = {}
        if profile:
            for name, fmt in (("json_to_json_local", "JSON"), ("json_to_parquet_local", "PARQUET")):
                pname = f"profile_{name}"
                dump = work / f"{pname}.prof"
                h.run_sink(pname, json_small, fmt, jc, local, local_keys(pname), broker.bootstrap,
                           work / "logs", profile=dump)
                for _ in range(50):
                    if dump.exists():
                        break
                    time.sleep(0.1)
                profiles[name] = profile_summary(dump)
                say(f"\n--- cProfile of kcql-sink run, {name} (own time) ---\n{profiles[name]}")

        # The same 1M-record topic through `run` and `spark-run --once`, best of `repeat` each,
        # alternating (every attempt a new connector and directory, so each writes everything).
        with h.spark_session() as spark:
            spark_result = h.spark_timing(spark, root, "json_to_parquet_local", json_small.topic)
            by_run, by_spark = [], []
            for attempt in range(1, repeat + 1):
                name = f"json1m_to_parquet_local-{attempt}"
                by_run.append(h.run_sink(name, million, "PARQUET", jc, local, local_keys(name),
                                         broker.bootstrap, work / "logs"))
                by_spark.append(h.spark_run_timing(spark, broker.bootstrap, million, root,
                                                   f"json1m_spark_run-{attempt}"))
        pipeline_run, pipeline_spark = best_of(by_run), best_of(by_spark)
        say(f"kcql-sink run, {million.records:,} records JSON->PARQUET: {pipeline_run['rps']:,.0f} rec/s "
            f"({samples(pipeline_run)})")
        say(f"kcql-sink spark-run --once on local[2], the same topic: {pipeline_spark['rps']:,.0f} rec/s "
            f"({samples(pipeline_spark)})")
    say(f"Spark aggregate: spark_reader {spark_result['reader_s']:.2f} s, spark.read.parquet "
        f"{spark_result['parquet_s']:.2f} s over {spark_result['files']} files (with registration "
        f"{spark_result['reader_total_s']:.2f} s vs {spark_result['parquet_total_s']:.2f} s)")

    bare_rps = bare[json_small.topic]["rps"]
    by_name = {r["name"]: r for r in runs}
    for r in runs:
        r["ratio_to_bare"] = r["rps"] / r["bare_rps"]
        peer = by_name.get(QUIX_PEER.get(r["name"], "") or "")
        if r["name"] == "json_to_parquet_s3":
            peer = by_name.get("quix_parquet_local")
        r["ratio_to_quix"] = r["rps"] / peer["rps"] if peer else None
    result.update({
        "bare_consume_rps": bare_rps,
        "bare_consume": dict(bare),
        "repeat": repeat,
        "target_rounds": rounds,
        "runs": [{k: r[k] for k in ("name", "records", "rps", "mb_s", "ratio_to_bare", "ratio_paired",
                                    "paired_ratios", "ratio_to_quix", "peak_rss_mb", "seconds", "bare_rps",
                                    "samples_s") if k in r} for r in runs],
        "rss_1000_partitions_mb": wide_result["peak_rss_mb"],
        "rss_1000_partitions_directories": int(wide_result["directories"]),
        "rss_10000_partitions_mb": wide10k["peak_rss_mb"],
        "rss_10000_partitions_open_files": int(wide10k["open_files"]),
        "idle_visible_s": idle_s,
        "s3_requests": requests,
        "staging": staging_results,
        "idle_flush_interval_s": 2,
        "spark_reader_ratio": spark_result["ratio"],
        "spark_run": {"records": million.records, "rps": pipeline_spark["rps"],
                      "seconds": pipeline_spark["seconds"], "samples_s": pipeline_spark["samples_s"],
                      "run_rps": pipeline_run["rps"], "run_samples_s": pipeline_run["samples_s"],
                      "ratio_to_run": pipeline_spark["rps"] / pipeline_run["rps"]},
        "spark": spark_result,
        "profiles": profiles,
        "loadavg_end": os.getloadavg()[0],
    })
    if keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return result


def targets(result: dict[str, Any]) -> list[tuple[str, bool]]:
    """Each target of issue 13 with whether this run met it."""
    by_name = {r["name"]: r for r in result["runs"]}
    checks: list[tuple[str, bool]] = []
    for name, (key, floor) in TARGETS.items():
        run = by_name[name]
        if key in run:  # the median of paired rounds, and the fastest/fastest ratio beside it
            label = (f"{name} >= {floor:.2f} x bare consume, median of paired rounds ({run[key]:.2f}; "
                     f"rounds {', '.join(f'{x:.2f}' for x in run['paired_ratios'])}; fastest/fastest "
                     f"{run['ratio_to_bare']:.2f})")
            checks.append((label, run[key] >= floor))
        else:  # a result written before rounds were paired
            checks.append((f"{name} >= {floor:.2f} x bare consume ({run['ratio_to_bare']:.2f})",
                           run["ratio_to_bare"] >= floor))
    for name in ("json_to_json_local", "json_to_parquet_local"):
        ratio = by_name[name]["ratio_to_quix"]
        checks.append((f"{name} >= 3 x quix-streams ({ratio:.2f})", ratio is not None and ratio >= 3))
    checks.append((f"peak RSS with 1,000 open partitions <= 512 MB ({result['rss_1000_partitions_mb']:.0f})",
                   result["rss_1000_partitions_mb"] <= 512))
    if "rss_10000_partitions_mb" in result:
        rss, files = result["rss_10000_partitions_mb"], result["rss_10000_partitions_open_files"]
        checks.append((f"peak RSS with 10,000 open partitions <= 1 GB ({rss:.0f} MB, {files:,} files open)",
                       rss <= 1024 and files == 10_000))
    if "s3_requests" in result:
        protocols = result["s3_requests"]["protocols"]
        new, old = protocols["conditional"], protocols["copy"]
        commit = new["per_file"]["commit"]
        label = (f"S3 requests per committed file <= 3, the run's start-up requests left out "
                 f"({commit:.2f}; {new['per_file']['total']:.2f} with them; upload-copy-delete "
                 f"{old['per_file']['commit']:.2f})")
        checks.append((label, commit <= 3))
    for run in result.get("staging", []):
        if run["streaming"]:
            bound = run["partitions"] * run["part_size"] * 1.25 / 1e6  # a part + one batch per open file
            label = (f"peak staging with flush.size=1 GB on {run['partitions']} partitions, "
                     f"{run['value_mb']:,.0f} MB through: <= {bound:,.0f} MB ({run['peak_staging_mb']:,.0f})")
            checks.append((label, run["peak_staging_mb"] <= bound))
    checks.append((f"idle data visible within flush.interval + 2 s ({result['idle_visible_s']:.2f} s)",
                   result["idle_visible_s"] <= result["idle_flush_interval_s"] + 2))
    checks.append((f"spark_reader within 1.2 x spark.read.parquet ({result['spark_reader_ratio']:.2f})",
                   result["spark_reader_ratio"] <= 1.2))
    if "spark_run" in result:
        ratio = result["spark_run"]["ratio_to_run"]
        checks.append((f"spark-run --once on local[2] >= 0.5 x kcql-sink run ({ratio:.2f})", ratio >= 0.5))
    return checks


def _spark_run_lines(result: dict[str, Any]) -> list[str]:
    run = result.get("spark_run")
    if not run:
        return []
    return [(f"spark-run --once, local[2], {run['records']:,} JSON->PARQUET: {run['rps']:,.0f} rec/s"
             f" ({run['seconds']:.1f} s) vs kcql-sink run {run['run_rps']:,.0f} rec/s:"
             f" {run['ratio_to_run']:.2f}")]


def _requests_lines(result: dict[str, Any]) -> list[str]:
    if "s3_requests" not in result:
        return []
    protocols = result["s3_requests"]["protocols"]
    per_file = {name: p["per_file"]["total"] for name, p in protocols.items()}
    commit = {name: p["per_file"]["commit"] for name, p in protocols.items()}
    usd = {name: p["usd_per_million_records"] for name, p in protocols.items()}
    return [(f"S3 requests per committed file: {commit['conditional']:.2f} (upload-copy-delete "
            f"{commit['copy']:.2f}); {per_file['conditional']:.2f} ({per_file['copy']:.2f}) with the run's "
            f"start-up requests; list price per million records ${usd['conditional']:.4f} "
            f"(${usd['copy']:.4f})")]


def table(result: dict[str, Any]) -> str:
    load = f"1-min load average {result['loadavg_start']:.1f} at start, {result['loadavg_end']:.1f} at end"
    bare = f"bare confluent-kafka consume: {result['bare_consume_rps']:,.0f} records/s (~170 B JSON)"
    if result.get("repeat", 1) > 1:
        more = result.get("target_rounds", result["repeat"])
        load += (f"; every sink timing the best of {result['repeat']}"
                 + (f" ({more} for the rows with a ratio target)" if more > result["repeat"] else "")
                 + " (bare consume: of every run paired with one); 'paired': the median of the rounds' "
                 "ratios to the bare consume run just before each")
    lines = [f"{bare}; {load}", "",
             (f"{'run':<26}{'records':>9}{'rec/s':>10}{'MB/s':>8}{'x bare':>8}{'paired':>8}{'x quix':>8}"
              f"{'RSS MB':>8}")]
    for r in result["runs"]:
        quix = f"{r['ratio_to_quix']:.2f}" if r["ratio_to_quix"] is not None else "-"
        paired = f"{r['ratio_paired']:.2f}" if "ratio_paired" in r else "-"
        lines.append(f"{r['name']:<26}{r['records']:>9,}{r['rps']:>10,.0f}{r['mb_s']:>8.1f}"
                     f"{r['ratio_to_bare']:>8.2f}{paired:>8}{quix:>8}{r['peak_rss_mb']:>8.0f}")
    spark = result["spark"]
    lines += [
        "",
        f"peak RSS, 1,000 open partitions: {result['rss_1000_partitions_mb']:.0f} MB",
        *([(f"peak RSS, 10,000 open partitions: {result['rss_10000_partitions_mb']:.0f} MB "
           f"({result['rss_10000_partitions_open_files']:,} staging files open)")]
          if "rss_10000_partitions_mb" in result else []),
        *_requests_lines(result),
        *[(f"peak staging, flush.size=1 GB, {r['partitions']} partitions, {r['value_mb']:,.0f} MB, "
           f"{'streamed parts' if r['streaming'] else 'whole files'}: {r['peak_staging_mb']:,.0f} MB")
          for r in result.get("staging", [])],
        (f"idle partition visible after: {result['idle_visible_s']:.2f} s"
        f" (flush.interval {result['idle_flush_interval_s']} s)"),
        (f"spark_reader / spark.read.parquet, query on a registered view: {result['spark_reader_ratio']:.2f}"
         f" ({spark['reader_s']:.2f} s vs {spark['parquet_s']:.2f} s, best of 5 after 3 warm-ups)"),
        (f"  registration + query: {spark['total_ratio']:.2f}"
         f" ({spark['reader_total_s']:.2f} s vs {spark['parquet_total_s']:.2f} s)"),
        *_spark_run_lines(result),
        "",
        "targets:",
    ]
    lines += [f"  [{'met' if ok else 'MISSED'}] {text}" for text, ok in targets(result)]
    return "\n".join(lines)


def chart(result: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = ["bare_consume", *(r["name"] for r in result["runs"])]
    values = [result["bare_consume_rps"], *(r["rps"] for r in result["runs"])]
    colors = ["#777777", *("#d9822b" if n.startswith("quix") else "#2b6cd9" for n in names[1:])]
    fig, ax = plt.subplots(figsize=(10, 4.8))
    ax.barh(names[::-1], values[::-1], color=colors[::-1])
    for i, v in enumerate(values[::-1]):
        ax.text(v, i, f" {v:,.0f}", va="center", fontsize=8)
    ax.set_xlabel("records/s (same broker, same data, one run)")
    ax.set_title("kcql-sink vs bare confluent-kafka consume vs quix-streams" + (" (QUICK)" if result["quick"]
                                                                                 else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="~1 minute: fewer records, no profile")
    parser.add_argument("--profile", action="store_true", help="also cProfile JSON->JSON and JSON->PARQUET")
    parser.add_argument("--keep", type=Path, default=None, help="keep output/logs in this directory")
    parser.add_argument("--out", type=Path, default=RESULTS / "latest.json")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        result = run_bench(args.quick, args.profile, args.keep)
    except (RuntimeError, OSError, SinkError) as exc:
        sys.stderr.write(f"bench failed: {exc}\n")
        return 1
    result["wall_s"] = round(time.monotonic() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    chart(result, args.out.with_suffix(".png"))
    say("\n" + table(result))
    say(f"\nwrote {args.out} and {args.out.with_suffix('.png')} in {result['wall_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

