"""S3 requests (and their list price) per committed file, for each exactly-once commit protocol.

Lenses' sink users found that upload-copy-delete tripled their S3 request bill (stream-reactor
PR #1851). This runs ``kcql-sink run`` once per commit protocol (``connect.s3.commit.protocol``)
on the same produced topic, through :class:`chaos.proxy.FaultProxy` in front of SeaweedFS with no
fault rule, so the proxy only counts what the sink sends: per S3 operation and key area (index,
temporary upload, data). The counts cover the whole run (start, partition open and recovery,
every commit, close), so the per-file figures include the run's fixed requests spread over its
files; with tens of files per partition that is a few percent.

``python -m bench.s3_requests`` starts its own Tansu and SeaweedFS and prints old vs new.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from bench import harness as h
from chaos.proxy import FaultProxy
from partitioners import is_data_key

__all__ = ["PRICE_PER_1000", "PRICE_SOURCE", "measure", "price_per_request"]

PRICE_SOURCE = (
    "https://aws.amazon.com/s3/pricing/ (Requests & data retrievals, S3 Standard, US East (N. Virginia))"
)
"""Where the prices below come from (list prices as of 2024-2026; check before quoting)."""

PRICE_PER_1000 = {"tier1": 0.005, "tier2": 0.0004, "free": 0.0}
"""USD per 1,000 requests on S3 Standard in us-east-1 (:data:`PRICE_SOURCE`): PUT, COPY, POST
and LIST requests $0.005; GET, SELECT and all other requests (HEAD) $0.0004; "DELETE and CANCEL
requests are free"."""

_TIER1 = {
    "PutObject", "CopyObject", "PostObject", "CreateMultipartUpload", "UploadPart", "UploadPartCopy",
    "CompleteMultipartUpload", "ListObjectsV2", "ListObjects", "ListParts", "CreateBucket",
}
_FREE = {"DeleteObject", "DeleteObjects", "AbortMultipartUpload", "DeleteBucket"}


def price_per_request(operation: str) -> float:
    """The list price in USD of one request of the S3 ``operation`` (see :data:`PRICE_PER_1000`)."""
    tier = "tier1" if operation in _TIER1 else "free" if operation in _FREE else "tier2"
    return PRICE_PER_1000[tier] / 1000


class Endpoint(Protocol):
    """A SeaweedFS S3 endpoint as the project's fixtures give it."""

    @property
    def url(self) -> str: ...

    def connect_config(self) -> dict[str, str]: ...


def measure(
    bootstrap: str,
    endpoint: Endpoint,
    data: h.Dataset,
    workdir: Path,
    *,
    protocols: tuple[str, ...] = ("conditional", "copy"),
    files_per_partition: int = 40,
    converters: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run the sink over ``data`` once per protocol through a counting proxy; the requests per file.

    Args:
        bootstrap: the broker ``data`` was produced to (:func:`bench.harness.produce`).
        endpoint: SeaweedFS (``url`` and ``connect_config()``); a fresh bucket per protocol.
        data: the produced topic; JSON values unless ``converters`` say otherwise.
        workdir: configs and logs of the runs.
        files_per_partition: ``flush.count`` is set so that each partition commits about this many
            files (tails close on a 2 s ``flush.interval``).

    Returns:
        ``{"records", "price_source", "protocols": {protocol: {"files", "requests" (by operation),
        "by_area", "per_file" (by operation and "total"), "per_million_records" (likewise),
        "usd_per_million_records"}}}``.
    """
    from sink.quickstart.embedded import make_client

    client = make_client(endpoint)  # type: ignore[arg-type]  # list and create directly, uncounted
    per_partition = max(data.ends.values())
    flush_count = max(1, per_partition // files_per_partition)
    out: dict[str, Any] = {"records": data.records, "price_source": PRICE_SOURCE, "protocols": {}}
    with FaultProxy(endpoint.url) as proxy:
        for protocol in protocols:
            bucket = f"requests-{protocol}-{uuid.uuid4().hex[:8]}"
            client.create_bucket(Bucket=bucket)
            name = f"requests_{protocol}"
            kcql = (
                f"INSERT INTO {bucket}:{name} SELECT * FROM {data.topic} STOREAS `JSON` "
                f"PROPERTIES('flush.count'={flush_count}, 'flush.interval'=2, 'flush.size'=2000000000)"
            )
            props = {
                **(converters or h.JSON_CONVERTERS), **endpoint.connect_config(),
                "connect.s3.custom.endpoint": proxy.url, "connect.s3.commit.protocol": protocol,
            }
            run = h.start_sink(name, kcql, data.topic, props, bootstrap, workdir)
            def listing(bucket: str = bucket, name: str = name) -> Iterator[str]:
                return h.s3_keys(client, bucket, f"{name}/")

            try:
                h.wait_all_committed(run, data, listing, interval=h.S3_POLL_S)
            finally:
                run.stop()
            files = sum(1 for key in h.s3_keys(client, bucket, "") if is_data_key(key, name))
            out["protocols"][protocol] = summarise(
                proxy.operations_of(bucket), proxy.operations_of(bucket, by_area=True), files, data.records,
                partitions=len(data.ends),
            )
    return out


def startup_requests(by_area: Counter[str] | dict[str, int], partitions: int) -> int:
    """Requests a run makes whatever it commits: every bucket-level one (HeadBucket at start, the
    LISTs of temporary uploads at open), the index reads at open, and one index write per
    partition at open (the take-over that raises the epoch). The rest are the commits'."""
    bucket = sum(n for area, n in by_area.items() if area.startswith("bucket:"))
    return bucket + by_area.get("index:GetObject", 0) + partitions


def summarise(
    requests: Counter[str], by_area: Counter[str], files: int, records: int, *, partitions: int
) -> dict[str, Any]:
    """Per-file and per-million-record figures of one run's request counts; ``per_file["commit"]``
    leaves out the run's :func:`startup_requests`."""
    total = sum(requests.values())
    usd = sum(n * price_per_request(op) for op, n in requests.items())
    startup = startup_requests(by_area, partitions)
    return {
        "files": files,
        "requests": dict(sorted(requests.items())),
        "by_area": dict(sorted(by_area.items())),
        "startup_requests": startup,
        "per_file": {**{op: round(n / files, 3) for op, n in sorted(requests.items())},
                     "total": round(total / files, 3), "commit": round((total - startup) / files, 3)},
        "per_million_records": {**{op: round(n * 1e6 / records) for op, n in sorted(requests.items())},
                                "total": round(total * 1e6 / records)},
        "usd_per_million_records": round(usd * 1e6 / records, 6),
    }


def table(result: dict[str, Any]) -> str:
    """Old vs new as text: requests per file by operation, and the list price per million records."""
    protocols = result["protocols"]
    operations = sorted({op for p in protocols.values() for op in p["requests"]})
    names = list(protocols)
    lines = [f"{'per committed file':<24}" + "".join(f"{n:>14}" for n in names)]
    lines.extend(
        f"{op:<24}" + "".join(f"{protocols[n]['per_file'].get(op, 0):>14}" for n in names)
        for op in [*operations, "total", "commit"]
    )
    lines.append(f"{'files':<24}" + "".join(f"{protocols[n]['files']:>14}" for n in names))
    lines.append(f"{'requests / 1M records':<24}"
                 + "".join(f"{protocols[n]['per_million_records']['total']:>14,}" for n in names))
    lines.append(f"{'USD / 1M records':<24}"
                 + "".join(f"{protocols[n]['usd_per_million_records']:>14.4f}" for n in names))
    lines.append(f"prices: {result['price_source']}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.s3_requests", description=__doc__)
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--files-per-partition", type=int, default=40)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON too")
    args = parser.parse_args(argv)
    from sink.quickstart.embedded import start_seaweedfs, start_tansu

    broker = start_tansu()
    try:
        weed = start_seaweedfs()
        try:
            data = h.produce(broker.bootstrap, f"requests-{uuid.uuid4().hex[:6]}", args.records)
            with tempfile.TemporaryDirectory(prefix="s3-requests-") as work:
                result = measure(
                    broker.bootstrap, weed.endpoint, data, Path(work),
                    files_per_partition=args.files_per_partition,
                )
        finally:
            weed.stop()
    finally:
        broker.stop()
    sys.stdout.write(table(result) + "\n")
    if args.json:
        sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
