"""Measure one ``make bench`` row quickly: ``python -m bench.focus avro_to_avro_local [--rounds 5]``.

The whole benchmark takes ~12 minutes; tuning one path needs its ratio to bare consume in a
minute. This starts the same broker (and SeaweedFS for ``*_s3`` rows, the test registry for Avro
rows), produces the row's topic as :mod:`bench.run` does, then alternates bare confluent-kafka
consume and the ``kcql-sink run`` of the row, ``--rounds`` times, with the harness's own functions
(same timing rule, same settings). Each side's fastest round counts, as in ``make bench``
(:func:`bench.run.best_of`), and the ratio of the two is printed.

``--profile cprofile`` runs one more sink under cProfile and prints its hottest functions;
``--profile py-spy`` samples one more sink with py-spy (when installed) into a flame graph /
top-functions text file, without cProfile's per-call overhead distorting cheap Python calls.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from bench import harness as h

__all__ = ["ROWS", "main"]

ROWS: dict[str, tuple[str, str, str]] = {
    # row: (data set, STOREAS, storage) as bench.run's plan has them
    "json_to_json_local": ("json", "JSON", "local"),
    "json_to_parquet_local": ("json", "PARQUET", "local"),
    "avro_to_parquet_local": ("avro", "PARQUET", "local"),
    "avro_to_json_local": ("avro", "JSON", "local"),
    "json_to_avro_local": ("json", "AVRO", "local"),
    "json_to_parquet_s3": ("json", "PARQUET", "s3"),
    "avro_to_avro_local": ("avro", "AVRO", "local"),
    "avro_to_avro_s3": ("avro", "AVRO", "s3"),
    "json1k_to_json_local": ("json1k", "JSON", "local"),
    "json1k_to_parquet_local": ("json1k", "PARQUET", "local"),
}


def say(text: str = "") -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def best(results: list[dict[str, Any]]) -> dict[str, Any]:
    return min(results, key=lambda r: r["seconds"])


def _py_spy(run: h.SinkRun, out: Path, stop: threading.Event) -> subprocess.Popen[bytes] | None:
    """Attach py-spy to the sink (once it is assigned; native frames off: Python time only)."""
    spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    if not Path(spy).exists():
        say("py-spy is not installed: pip install py-spy")
        return None
    return subprocess.Popen(
        # --gil: only samples holding the GIL, so a thread waiting for it is not counted where it waits
        [spy, "record", "-r", "1000", "--gil", "-f", "raw", "-o", str(out), "--pid", str(run.proc.pid),
         "--threads"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.focus", description=__doc__.splitlines()[0])
    parser.add_argument("rows", nargs="+", choices=sorted(ROWS), metavar="row", help=", ".join(ROWS))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--records", type=int, default=300_000, help="as make bench (json1k rows: a fifth)")
    parser.add_argument("--profile", choices=("cprofile", "py-spy"), default=None)
    parser.add_argument("--threads", action="store_true",
                        help="print the sink's CPU seconds by thread (bench/thread_names names them)")
    parser.add_argument("--keep", type=Path, default=None, help="keep output, logs and profiles here")
    args = parser.parse_args(argv)
    if args.threads:  # the sink processes inherit it: their threads get OS-level names
        names = str(Path(__file__).resolve().parent / "thread_names")
        os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [names, os.environ.get("PYTHONPATH")]))

    from sink.quickstart.embedded import make_client, start_seaweedfs, start_tansu

    work = Path(args.keep or tempfile.mkdtemp(prefix="kcql-focus-"))
    root = work / "local"
    root.mkdir(parents=True, exist_ok=True)
    kinds = {ROWS[r][0] for r in args.rows}
    with contextlib.ExitStack() as stack:
        broker = start_tansu()
        stack.callback(broker.stop)
        s3: Any = None
        s3_conf: dict[str, str] = {}
        if any(ROWS[r][2] == "s3" for r in args.rows):
            seaweed = start_seaweedfs()
            stack.callback(seaweed.stop)
            s3 = make_client(seaweed.endpoint)
            s3.create_bucket(Bucket="bench")
            s3_conf = seaweed.endpoint.connect_config()
        registry = stack.enter_context(h.start_registry()) if "avro" in kinds else None
        data: dict[str, h.Dataset] = {}
        started = time.monotonic()
        for kind in sorted(kinds):
            if kind == "avro":
                data[kind] = h.produce(broker.bootstrap, "focus-avro", args.records, pad=60, kind="avro",
                                       registry_url=registry)
            elif kind == "json1k":
                data[kind] = h.produce(broker.bootstrap, "focus-json1k", args.records // 5, pad=900)
            else:
                data[kind] = h.produce(broker.bootstrap, "focus-json", args.records, pad=60)
        say(f"produced {', '.join(f'{d.records:,} {k}' for k, d in data.items())} "
            f"in {time.monotonic() - started:.1f} s")

        def keys_of(row: str, out: str) -> tuple[dict[str, str], Callable[[], Iterator[str]], float]:
            if ROWS[row][2] == "s3":
                return s3_conf, (lambda: h.s3_keys(s3, "bench", f"{out}/")), h.S3_POLL_S
            return h.local_storage(root), (lambda: h.local_keys(root / "bench" / out)), h.LOCAL_POLL_S

        def sink(row: str, out: str, profile: Path | None = None, spy: Path | None = None) -> dict[str, Any]:
            """:func:`bench.harness.run_sink` of ``row``, also measuring the CPU seconds the sink
            process used from its assignment to its last file (``cpu_s``: a figure the machine's
            other load disturbs less than the wall time), with py-spy attached if ``spy``."""
            kind, fmt, _ = ROWS[row]
            d = data[kind]
            conv = h.avro_converters(registry) if kind == "avro" and registry else h.JSON_CONVERTERS
            storage, keys, poll_s = keys_of(row, out)
            start_sink, wait_all = h.start_sink, h.wait_all_committed
            spies: list[subprocess.Popen[bytes] | None] = []
            stop = threading.Event()
            cpu: dict[str, float] = {}
            threads: dict[str, dict[str, float]] = {}

            def at_assignment(run: h.SinkRun) -> None:
                while run.assigned_at is None and not stop.is_set() and run.proc.poll() is None:
                    time.sleep(0.001)
                cpu["start"] = _cpu_seconds(run.proc.pid)
                threads["start"] = _thread_cpu(run.proc.pid)
                if spy is not None:
                    spies.append(_py_spy(run, spy, stop))

            def start_watched(*a: Any, **kw: Any) -> h.SinkRun:
                run = start_sink(*a, **kw)
                threading.Thread(target=at_assignment, args=(run,), daemon=True).start()
                return run

            def wait_watched(run: h.SinkRun, *a: Any, **kw: Any) -> float:
                end = wait_all(run, *a, **kw)
                cpu["end"] = _cpu_seconds(run.proc.pid)
                threads["end"] = _thread_cpu(run.proc.pid)
                for p in spies:  # the samples cover the timed part only, not the stop
                    if p is not None:
                        p.send_signal(signal.SIGINT)
                return end

            h.start_sink, h.wait_all_committed = start_watched, wait_watched  # type: ignore[assignment]
            try:
                got = h.run_sink(out, d, fmt, conv, storage, keys, broker.bootstrap, work / "logs",
                                 profile=profile, poll_s=poll_s)
            finally:
                h.start_sink, h.wait_all_committed = start_sink, wait_all  # type: ignore[assignment]
                stop.set()
                for p in spies:
                    if p is not None:
                        p.wait(30)
            if "start" in cpu and "end" in cpu:
                got["cpu_s"] = cpu["end"] - cpu["start"]
                got["threads_cpu_s"] = {
                    name: end - threads["start"].get(name, 0.0) for name, end in threads["end"].items()
                }
            return got

        bare: dict[str, list[dict[str, Any]]] = {}
        runs: dict[str, list[dict[str, Any]]] = {}
        for round_no in range(1, args.rounds + 1):
            line = []
            for kind in sorted(kinds):
                broker_before = _cpu_seconds(broker.pid)
                got = h.bare_consume(broker.bootstrap, data[kind])
                got["broker_cpu_s"] = _cpu_seconds(broker.pid) - broker_before
                bare.setdefault(kind, []).append(got)
                line.append(f"bare {kind} {got['rps']:,.0f} (first {got['first_record_s']:.3f} s, "
                            f"cpu {got.get('cpu_s', 0):.2f} s, "
                            f"broker {got['broker_cpu_s']:.2f} s)")
            for row in args.rows:
                broker_before = _cpu_seconds(broker.pid)
                got = sink(row, f"{row}-{round_no}")
                got["broker_cpu_s"] = _cpu_seconds(broker.pid) - broker_before
                runs.setdefault(row, []).append(got)
                b = best(bare[ROWS[row][0]])["rps"]
                line.append(f"{row} {got['rps']:,.0f} ({got['rps'] / bare[ROWS[row][0]][-1]['rps']:.2f}; "
                            f"best so far {best(runs[row])['rps'] / b:.2f}; cpu {got.get('cpu_s', 0):.2f} s, "
                            f"broker {got['broker_cpu_s']:.2f} s)")
            say(f"round {round_no}: " + ", ".join(line))
            if args.threads:
                for row in args.rows:
                    spent = sorted(runs[row][-1].get("threads_cpu_s", {}).items(), key=lambda kv: -kv[1])
                    say(f"  {row} CPU s by thread: " + ", ".join(f"{n} {s:.3f}" for n, s in spent if s))

        say("")
        for kind in sorted(kinds):
            b = best(bare[kind])
            say(f"bare consume {kind}: {b['rps']:,.0f} rec/s (best of "
                + ", ".join(f"{r['seconds']:.3f}" for r in bare[kind]) + " s)")
        for row in args.rows:
            r, b = best(runs[row]), best(bare[ROWS[row][0]])
            say(f"{row}: {r['rps']:,.0f} rec/s, {r['rps'] / b['rps']:.2f} x bare (best of "
                + ", ".join(f"{x['seconds']:.3f}" for x in runs[row]) + " s; sink CPU seconds in the window "
                + ", ".join(f"{x.get('cpu_s', 0):.2f}" for x in runs[row]) + ")")

        if args.profile:
            for row in args.rows:
                if args.profile == "cprofile":
                    from bench.run import profile_summary

                    dump = work / f"{row}.prof"
                    sink(row, f"{row}-profile", profile=dump)
                    for _ in range(100):
                        if dump.exists():
                            break
                        time.sleep(0.1)
                    say(f"\n--- cProfile of {row} (own time), {dump} ---\n{profile_summary(dump, 30)}")
                else:
                    out = work / f"{row}.spy.txt"
                    sink(row, f"{row}-spy", spy=out)
                    say(f"\n--- py-spy of {row}: {out} ---")
                    say(_spy_top(out))
    if args.keep is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (all its threads), from /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _thread_cpu(pid: int) -> dict[str, float]:
    """User + system CPU seconds so far of each thread of ``pid``, summed by thread name without
    its trailing number (``rdk:broker`` is librdkafka's; with ``bench/thread_names`` a Python
    thread shows the last 15 characters of its name, the kernel's limit, e.g. ``ql-sink-ahead``
    for the parse-ahead thread; without it, every Python thread is ``python``)."""
    out: dict[str, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")].rstrip("0123456789_")
        fields = text.rsplit(")", 1)[1].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def _spy_top(path: Path, top: int = 30) -> str:
    """Own-time and total-time leaders of a py-spy raw (collapsed stacks) file."""
    if not path.exists():
        return "(no py-spy output)"
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    samples = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        samples += n
        frames = stack.split(";")
        own[frames[-1]] = own.get(frames[-1], 0) + n
        for frame in set(frames):
            total[frame] = total.get(frame, 0) + n
    lines = [f"{samples} samples; own time:"]
    lines += [f"  {n / samples:6.1%}  {f}" for f, n in sorted(own.items(), key=lambda x: -x[1])[:top]]
    lines.append("total time:")
    lines += [f"  {n / samples:6.1%}  {f}" for f, n in sorted(total.items(), key=lambda x: -x[1])[:top]]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
