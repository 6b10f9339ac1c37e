"""One ``make bench`` row into PARQUET, timed against bare consume in the same run, best of N.

``python -m bench.focus_parquet ROW [--rounds N] [--records N] [--profile DIR] [--py-spy DIR]``,
ROW one of :data:`ROWS`. The full bench takes ~20 minutes and every row in it; working on one row's speed
needs its ratio in a minute, measured exactly as the bench measures it: the same data
(:func:`bench.harness.produce`), the same bare consume and the same timed ``kcql-sink run``
(:func:`bench.harness.run_sink`), rounds alternating bare and sink so a neighbour's burst costs
both, the fastest round of each counting. ``--profile DIR`` adds one cProfile'd run of the sink
(its dump and a summary by own time in DIR); ``--py-spy DIR`` one run sampled by py-spy, every
thread (the Arrow parse runs on a helper thread, commits on others, which cProfile does not see),
as a flame graph and a per-thread text summary in DIR.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench import harness as h

__all__ = ["ROWS", "main"]

ROWS: dict[str, tuple[str, int, str]] = {
    # row: (kind of data, pad, storage) as bench.run makes them
    "json_to_parquet_local": ("json", 60, "local"),
    "avro_to_parquet_local": ("avro", 60, "local"),
    "json1k_to_parquet_local": ("json", 900, "local"),
    "json_to_parquet_s3": ("json", 60, "s3"),
}


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _sink_child(deadline: float) -> int | None:
    """The pid of this process's ``kcql-sink run`` child, once it exists."""
    while time.monotonic() < deadline:
        for pid in h._children(os.getpid()):
            with contextlib.suppress(OSError):
                if b"sink.cli" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    return pid
        time.sleep(0.01)
    return None


def _py_spy(out: Path, started: threading.Event) -> None:
    """Attach py-spy to the sink child as soon as it starts; sample every thread until it exits."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    pid = _sink_child(time.monotonic() + 30)
    started.set()
    if pid is None:
        return
    cmd = [spy, "record", "--pid", str(pid), "--threads", "--idle", "--rate", "200", "--format", "raw",
           "-o", str(out)]
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def spy_summary(raw: Path, top: int = 25) -> str:
    """Per thread, its samples and its hottest leaf frames (own time) from a py-spy raw dump."""
    threads: collections.Counter[str] = collections.Counter()
    leaves: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        thread = frames[0]
        threads[thread] += int(count)
        leaves[thread][frames[-1]] += int(count)
    out = []
    for thread, n in threads.most_common():
        out.append(f"{thread}: {n} samples")
        out += [f"    {c:6d}  {frame}" for frame, c in leaves[thread].most_common(top)]
    return "\n".join(out)


def measure(row: str, rounds: int, records: int, profile: Path | None,
            spy: Path | None = None) -> dict[str, Any]:
    from sink.quickstart.embedded import start_tansu

    kind, pad, where = ROWS[row]
    work = Path(tempfile.mkdtemp(prefix="kcql-focus-parquet-"))
    root = work / "local"
    with contextlib.ExitStack() as stack:
        broker = start_tansu()
        stack.callback(broker.stop)
        registry = stack.enter_context(h.start_registry()) if kind == "avro" else None
        data = h.produce(broker.bootstrap, f"focus-{row}", records, pad=pad, kind=kind, registry_url=registry)
        converters = h.avro_converters(registry) if registry else h.JSON_CONVERTERS
        if where == "s3":
            from tests.fixtures.seaweedfs import make_client, start_seaweedfs

            seaweed = start_seaweedfs()
            stack.callback(seaweed.stop)
            s3 = make_client(seaweed.endpoint)
            s3.create_bucket(Bucket="bench")
            storage, poll = seaweed.endpoint.connect_config(), h.S3_POLL_S

            def keys(name: str) -> Any:
                return lambda: h.s3_keys(s3, "bench", f"{name}/")
        else:
            storage, poll = h.local_storage(root), h.LOCAL_POLL_S

            def keys(name: str) -> Any:
                return lambda: h.local_keys(root / "bench" / name)

        bare: list[float] = []
        sink: list[float] = []
        for n in range(1, rounds + 1):
            bare.append(h.bare_consume(broker.bootstrap, data)["rps"])
            name = f"{row}-{n}"
            got = h.run_sink(name, data, "PARQUET", converters, storage, keys(name), broker.bootstrap,
                             work / "logs", poll_s=poll)
            sink.append(got["rps"])
            say(f"round {n}: bare {bare[-1]:,.0f} rec/s, {row} {sink[-1]:,.0f} rec/s "
                f"({sink[-1] / bare[-1]:.2f})")
        if profile is not None:
            profile.mkdir(parents=True, exist_ok=True)
            dump = profile / f"{row}.prof"
            name = f"{row}-profile"
            h.run_sink(name, data, "PARQUET", converters, storage, keys(name), broker.bootstrap,
                       work / "logs", poll_s=poll, profile=dump)
            deadline = time.monotonic() + 10
            while not dump.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            from bench.run import profile_summary

            summary = profile_summary(dump, top=30)
            (profile / f"{row}.txt").write_text(summary)
            say(summary)
        if spy is not None:
            spy.mkdir(parents=True, exist_ok=True)
            raw = spy / f"{row}.raw"
            started = threading.Event()
            watcher = threading.Thread(target=_py_spy, args=(raw, started), daemon=True)
            watcher.start()
            name = f"{row}-spy"
            got = h.run_sink(name, data, "PARQUET", converters, storage, keys(name), broker.bootstrap,
                             work / "logs", poll_s=poll)
            watcher.join(30)
            say(f"py-spy'd run: {got['rps']:,.0f} rec/s")
            if raw.exists():
                summary = spy_summary(raw)
                (spy / f"{row}.txt").write_text(summary)
                say(summary)
    best_bare, best_sink = max(bare), max(sink)
    rounds_ratio = sorted(s / b for s, b in zip(sink, bare, strict=True))
    return {"row": row, "records": records, "bare_rps": best_bare, "rps": best_sink,
            "ratio": best_sink / best_bare, "median_round_ratio": rounds_ratio[len(rounds_ratio) // 2]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.focus_parquet",
                                     description=(__doc__ or "").splitlines()[0])
    parser.add_argument("row", choices=sorted(ROWS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--records", type=int, default=0,
                        help="default: the bench's (300,000; 60,000 for 1k)")
    parser.add_argument("--profile", type=Path, default=None, help="also one cProfile'd run, dumped here")
    parser.add_argument("--py-spy", type=Path, default=None, help="also one py-spy'd run, dumped here")
    args = parser.parse_args(argv)
    records = args.records or (60_000 if ROWS[args.row][1] > 100 else 300_000)
    result = measure(args.row, args.rounds, records, args.profile, args.py_spy)
    say(f"{result['row']}: best {result['rps']:,.0f} rec/s vs bare {result['bare_rps']:,.0f} rec/s "
        f"= {result['ratio']:.2f} x bare ({result['records']:,} records, best of {args.rounds}; "
        f"median of the rounds' own ratios {result['median_round_ratio']:.2f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
