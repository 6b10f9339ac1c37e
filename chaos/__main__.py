"""``python -m chaos`` (``make chaos``): the full crash-chaos matrix against real servers.

Starts one Tansu broker and one SeaweedFS (stopped by PID at the end), runs every cell of
flush {count, size, interval} x storage {local, s3} x {default layout, PARTITIONBY} with the
default commit protocol (conditional on both), the S3 cells again with ``--protocols`` (default:
``copy``, the weaker mode's upload-copy-delete), a ``multipart`` cell whose files stream to S3 in
5 MiB parts while they are written (kills mid-part and before completion), the
two cells of Confluent Avro written through as it came (STOREAS AVRO from the Avro converter, on
local disk and on S3; the project's test Schema Registry serves the schema), plus the
headline cell (S3, PARTITIONBY, count flush) with ``--records`` records and ``--kills`` kills,
prints a summary table and writes it to ``chaos/results/latest.json``. Exit status 1 if any
cell lost, duplicated or invented a record.
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chaos.crash import REPO, S3Target, Scenario, run_scenario
from chaos.proxy import FaultProxy
from sink.quickstart.embedded import make_client, start_seaweedfs, start_tansu
from tests.fixtures.schema_registry import serve_registry

log = logging.getLogger("chaos")

RESULTS = REPO / "chaos" / "results" / "latest.json"


def _in_flight(row: dict[str, Any]) -> int:
    return sum(row["kills"].get(k, 0) for k in ("upload", "late-upload", "index"))


def table(rows: list[dict[str, Any]]) -> str:
    """The summary as a fixed-width text table."""
    head = ("cell", "records", "kills", "in-flight", "checked", "lost", "dup", "files", "exit", "s", "ok")
    lines = [
        (
            r["cell"],
            r["records"],
            sum(v for k, v in r["kills"].items() if k != "exited-before-kill"),
            _in_flight(r),
            r["checked"],
            r["lost"],
            r["duplicated"] + r["unexpected"],
            r["files"],
            r["final_exit"],
            r["seconds"],
            "yes" if r["ok"] else "NO",
        )
        for r in rows
    ]
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines, strict=False)]
    fmt = "  ".join(f"{{:>{w}}}" for w in widths)
    return "\n".join(fmt.format(*map(str, line)) for line in (head, *lines))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m chaos", description=__doc__)
    parser.add_argument("--records", type=int, default=200_000, help="records of the headline cell")
    parser.add_argument("--kills", type=int, default=20, help="SIGKILLs in the headline cell")
    parser.add_argument("--cell-records", type=int, default=20_000, help="records of each matrix cell")
    parser.add_argument("--cell-kills", type=int, default=4, help="SIGKILLs in each matrix cell")
    parser.add_argument("--no-matrix", action="store_true", help="only the headline cell")
    parser.add_argument(
        "--protocols", default="copy",
        help="commit protocols to run the S3 cells with besides the default (comma-separated; '' for none)",
    )
    parser.add_argument("--only", default="", help="run only the matrix cells whose name contains this")
    parser.add_argument("--seed", type=int, default=int(time.time()))
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    scenarios = [
        Scenario(
            flush="count",
            storage="s3",
            partition_by=True,
            records=args.records,
            partitions=4,
            kills=args.kills,
            kill_window=(2.0, 10.0),
            drain_timeout=900,
            seed=args.seed,
            name="headline-s3-count-partitionby",
        )
    ]
    if not args.no_matrix:
        cells = [
            (protocol, flush, storage, pby)
            for protocol in ("auto", *filter(None, args.protocols.split(",")))
            for flush, storage, pby in itertools.product(
                ("count", "size", "interval"), ("local", "s3"), (False, True)
            )
            if protocol == "auto" or storage == "s3"
        ]
        for i, (protocol, flush, storage, pby) in enumerate(cells):
            scenarios.append(
                Scenario(
                    flush=flush,
                    storage=storage,
                    partition_by=pby,
                    records=args.cell_records,
                    kills=args.cell_kills,
                    kill_window=(1.5, 7.0),
                    seed=args.seed + i + 1,
                    protocol=protocol,
                )
            )
        # Confluent Avro written through as it came (STOREAS AVRO, no envelope: the pass-through's
        # blocks of raw bodies), on local disk and on S3 with its in-flight kills
        scenarios.extend(
            Scenario(
                flush="count",
                storage=storage,
                values="avro",
                records=args.cell_records,
                kills=args.cell_kills,
                kill_window=(1.5, 7.0),
                seed=args.seed + len(cells) + (3 if storage == "s3" else 2),
            )
            for storage in ("local", "s3")
        )
        # files streamed to S3 as multipart uploads while written: kills land mid-part, between
        # parts, before completion (2 partitions x 2 files of ~3 parts each at 2 KB values)
        scenarios.append(
            Scenario(
                flush="multipart",
                storage="s3",
                records=min(args.cell_records, 24_000),
                partitions=2,
                pad=2_000,
                kills=args.cell_kills,
                kill_window=(1.5, 7.0),
                seed=args.seed + len(cells) + 1,
            )
        )
        if args.only:
            scenarios = [s for s in scenarios if args.only in s.name]

    began = datetime.now(UTC)
    rows: list[dict[str, Any]] = []
    broker = start_tansu()
    weed = start_seaweedfs()
    try:
        with (
            FaultProxy(weed.endpoint.url) as proxy,
            tempfile.TemporaryDirectory(prefix="chaos-") as tmp,
            serve_registry("chaos-schema-registry") as registry,
        ):
            target = S3Target(weed.endpoint.connect_config(), make_client(weed.endpoint), proxy)
            for scn in scenarios:
                log.info("cell %s: %d records, %d kills", scn.name, scn.records, scn.kills)
                row = run_scenario(
                    scn, broker.bootstrap, Path(tmp), target if scn.storage == "s3" else None, registry.url
                )
                rows.append(row)
                log.info(
                    "cell %s: %s", scn.name, {k: row[k] for k in ("checked", "lost", "duplicated", "ok")}
                )
    finally:
        weed.stop()
        broker.stop()

    summary = {
        "started": began.isoformat(timespec="seconds"),
        "finished": datetime.now(UTC).isoformat(timespec="seconds"),
        "seed": args.seed,
        "totals": {
            "cells": len(rows),
            "faults_injected": sum(r["faults_injected"] for r in rows),
            "in_flight_kills": sum(_in_flight(r) for r in rows),
            "records_checked": sum(r["checked"] for r in rows),
            "lost": sum(r["lost"] for r in rows),
            "duplicated": sum(r["duplicated"] for r in rows),
            "unexpected": sum(r["unexpected"] for r in rows),
            "all_ok": all(r["ok"] for r in rows),
        },
        "cells": [{k: v for k, v in r.items() if k != "workdir"} for r in rows],
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary, indent=2) + "\n")
    sys.stdout.write(f"{table(rows)}\n{json.dumps(summary['totals'])}\nsummary written to {args.out}\n")
    return 0 if summary["totals"]["all_ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
