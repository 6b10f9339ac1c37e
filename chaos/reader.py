"""Independent read-back: which (topic, partition, offset) triples are in committed files.

Independent of the sink's code on purpose: files are listed with ``os.walk`` or boto3's
``list_objects_v2`` and decoded with json/gzip/fastavro/pyarrow. The only project code used is
the layout contract ``partitioners.layout.is_data_key`` (which keys are data), the same rule
Spark readers apply. Records are identified by the envelope's ``metadata`` so a duplicate or a
gap is a fact about offsets, not about values; files without an envelope (the Avro pass-through
cells) by their value's ``n``, mapped to the offset the broker acknowledged for it.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq

from partitioners.layout import is_data_key

__all__ = ["Triple", "compare", "decode_rows", "read_local", "read_s3"]

Triple = tuple[str, int, int]


def decode_rows(key: str, data: bytes) -> Iterator[dict[str, Any]]:
    """Rows of one committed file, chosen by its extension, decoded by a third-party reader."""
    if key.endswith(".gz"):
        data = gzip.decompress(data)
        key = key[:-3]
    if key.endswith(".avro"):
        yield from fastavro.reader(io.BytesIO(data))  # type: ignore[misc]
    elif key.endswith(".parquet"):
        yield from pq.read_table(io.BytesIO(data)).to_pylist()
    elif key.endswith((".json", ".jsonl")):
        for line in data.splitlines():
            if line.strip():
                yield json.loads(line)
    else:
        raise ValueError(f"{key}: unexpected extension for an envelope file")


def _triples(rows: Iterable[dict[str, Any]], by_n: dict[int, Triple] | None = None) -> Iterator[Triple]:
    """Each row's (topic, partition, offset): from its envelope, or with ``by_n`` from its ``n``
    (a value never produced counts as an unexpected triple)."""
    for row in rows:
        if by_n is not None:
            yield by_n.get(int(row["n"]), ("?", -1, int(row["n"])))
            continue
        meta = row["metadata"]
        yield (meta["topic"], int(meta["partition"]), int(meta["offset"]))


def read_local(
    root: Path, bucket: str, prefix: str, by_n: dict[int, Triple] | None = None
) -> tuple[Counter[Triple], int]:
    """Triples in the data files under ``root/bucket`` and the number of files read (``by_n``:
    see :func:`_triples`)."""
    base = Path(root) / bucket
    seen: Counter[Triple] = Counter()
    files = 0
    for dirpath, _dirs, names in os.walk(base):
        for name in names:
            path = Path(dirpath, name)
            key = path.relative_to(base).as_posix()
            if is_data_key(key, prefix):
                files += 1
                seen.update(_triples(decode_rows(key, path.read_bytes()), by_n))
    return seen, files


def read_s3(
    client: Any, bucket: str, prefix: str, by_n: dict[int, Triple] | None = None
) -> tuple[Counter[Triple], int]:
    """Triples in the data objects of ``bucket`` (listing paginated) and the number of files read
    (``by_n``: see :func:`_triples`)."""
    seen: Counter[Triple] = Counter()
    files = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for obj in page.get("Contents", []):
            key = obj["Key"]
            if is_data_key(key, prefix):
                files += 1
                body = client.get_object(Bucket=bucket, Key=key)["Body"].read()
                seen.update(_triples(decode_rows(key, body), by_n))
    return seen, files


def compare(expected: Iterable[Triple], seen: Counter[Triple]) -> dict[str, int]:
    """``{checked, lost, duplicated, unexpected}``: duplicated counts extra copies, not records."""
    want = set(expected)
    lost = sum(1 for t in want if seen[t] == 0)
    duplicated = sum(n - 1 for t, n in seen.items() if n > 1)
    unexpected = sum(n for t, n in seen.items() if t not in want)
    return {"checked": len(want), "lost": lost, "duplicated": duplicated, "unexpected": unexpected}
