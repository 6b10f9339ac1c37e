"""Local staging and memory with large files on many partitions: streamed uploads on and off.

The case of Lenses #1053: ``flush.size`` = 1 GB on 50 partitions. Staged whole, every open file
sits on local disk until its commit, so staging grows with the data in flight (up to
``flush.size`` x partitions). Streamed (:mod:`sink.commit.parts`), each open file keeps at most
about one part (``connect.s3.multipart.part.size``) locally while the rest is already in S3.

:func:`staging_run` runs ``kcql-sink run`` against SeaweedFS on a 50-partition topic, samples
the staging directory's size and the sink's RSS while the data flows, and returns their peaks.
Streaming is turned off by a part size above ``flush.size`` (no file ever fills a part, so each
is staged whole and uploaded at commit, as before streaming existed).

``python -m bench.staging [--gb 5] [--off-gb 0.5]`` starts Tansu and SeaweedFS, produces the data
(~1 KB JSON values) and prints both runs as JSON.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from bench import harness as h

__all__ = ["StagingPoller", "main", "staging_run"]

PARTITIONS = 50
FLUSH_SIZE = 1_000_000_000
PAD = 900
"""Hex characters of padding: ~1 KB JSON values (see :func:`bench.harness.produce`)."""
OFF_PART_SIZE = 2 * FLUSH_SIZE
"""A part size no file reaches under ``flush.size``: every file is staged whole (streaming off)."""


def directory_bytes(root: Path) -> int:
    """Bytes the files under ``root`` hold on disk now (allocated blocks: sparse files count as used)."""
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            with contextlib.suppress(OSError):  # a file committed and removed meanwhile
                total += (Path(dirpath) / name).stat().st_blocks * 512
    return total


class StagingPoller:
    """Samples a directory's size every ``interval`` seconds on a thread; ``peak`` is the maximum."""

    def __init__(self, root: Path, interval: float = 0.1) -> None:
        self.root = root
        self.interval = interval
        self.peak = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="staging-poller", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, directory_bytes(self.root))
            self.samples += 1
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def staging_run(
    name: str,
    data: h.Dataset,
    bootstrap: str,
    s3_config: dict[str, str],
    s3_client: Any,
    bucket: str,
    workdir: Path,
    *,
    streaming: bool = True,
    part_size: int = 16 << 20,
) -> dict[str, Any]:
    """Sink ``data`` into ``bucket:<name>`` as JSON with ``flush.size`` = 1 GB; peaks of staging and RSS.

    ``flush.count`` is one partition's record count (``data`` must spread evenly), so each
    partition's file commits exactly when its last record arrives, and the run ends then.
    """
    per_partition = max(data.ends.values())
    if any(end != per_partition for end in data.ends.values()):
        raise ValueError(f"{data.topic}: partitions hold different counts {sorted(set(data.ends.values()))}")
    staging = workdir / f"staging-{name}"
    staging.mkdir(parents=True, exist_ok=True)
    kcql = (
        f"INSERT INTO {bucket}:{name} SELECT * FROM {data.topic} STOREAS `JSON` "
        f"PROPERTIES('flush.count'={per_partition}, 'flush.size'={FLUSH_SIZE}, 'flush.interval'=3600)"
    )
    props = {
        **h.JSON_CONVERTERS, **s3_config,
        "connect.s3.local.tmp.directory": str(staging),
        "connect.s3.multipart.part.size": str(part_size if streaming else OFF_PART_SIZE),
    }
    run = h.start_sink(name, kcql, data.topic, props, bootstrap, workdir)
    poller = StagingPoller(staging)
    try:
        end = h.wait_all_committed(
            run, data, lambda: h.s3_keys(s3_client, bucket, f"{name}/"), timeout=3600, interval=0.5
        )
        seconds = end - (run.assigned_at or end)
    finally:
        peak_staging = poller.stop()
        peak_rss = run.stop()
    return {
        "name": name,
        "streaming": streaming,
        "part_size": part_size if streaming else None,
        "partitions": len(data.ends),
        "records": data.records,
        "value_mb": round(data.mb, 1),
        "seconds": round(seconds, 1),
        "peak_staging_mb": round(peak_staging / 1e6, 1),
        "peak_rss_mb": round(peak_rss, 1),
        "staging_samples": poller.samples,
    }


def records_for(gb: float) -> int:
    """Records of ~1 KB for ``gb`` gigabytes, a multiple of the partition count (even spread)."""
    per_partition = max(1, int(gb * 1e9 / 1000 / PARTITIONS))
    return per_partition * PARTITIONS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gb", type=float, default=5.0,
                        help="data through the streaming run (GB); 0 skips it")
    parser.add_argument("--off-gb", type=float, default=0.5,
                        help="data through the staged-whole run; 0 skips it")
    parser.add_argument("--part-size", type=int, default=16 << 20, help="connect.s3.multipart.part.size")
    args = parser.parse_args(argv)

    from sink.quickstart.embedded import make_client, start_seaweedfs, start_tansu

    work = Path(tempfile.mkdtemp(prefix="kcql-bench-staging-"))
    results: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        broker = start_tansu()
        stack.callback(broker.stop)
        seaweed = start_seaweedfs()
        stack.callback(seaweed.stop)
        client = make_client(seaweed.endpoint)
        client.create_bucket(Bucket="bench")
        runs = [("streaming_on", args.gb, True)] if args.gb > 0 else []
        if args.off_gb > 0:
            runs.append(("streaming_off", args.off_gb, False))
        for name, gb, streaming in runs:
            topic = f"bench-staging-{uuid.uuid4().hex[:6]}"
            started = time.monotonic()
            data = h.produce(broker.bootstrap, topic, records_for(gb), pad=PAD, partitions=PARTITIONS)
            took = time.monotonic() - started
            print(f"produced {data.records:,} records, {data.mb:,.0f} MB in {took:.0f} s", flush=True)
            result = staging_run(
                name, data, broker.bootstrap, seaweed.endpoint.connect_config(), client, "bench", work,
                streaming=streaming, part_size=args.part_size,
            )
            results.append(result)
            print(json.dumps(result), flush=True)
    print(json.dumps({"staging": results, "loadavg": os.getloadavg()[0]}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
