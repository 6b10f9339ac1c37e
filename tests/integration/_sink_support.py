"""Shared helpers for the sink integration tests: one storage per backend, independent read-back.

Read-back never uses our own code beyond the layout contract: objects are listed raw, filtered
with ``partitioners.is_data_key`` and decoded with ``json``/``gzip`` from the standard library.
"""

from __future__ import annotations

import gzip
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from partitioners import is_data_key
from sink.storage.base import Storage


@dataclass
class Backend:
    """A storage backend under test, the bucket to use and the connector keys that reach it."""

    kind: str
    storage: Storage
    bucket: str
    config: dict[str, str]
    raw_list: Callable[[], list[str]]
    """Every key in the bucket, listed without our storage code (os.walk / boto3)."""
    raw_read: Callable[[str], bytes]


def make_backend(kind: str, tmp_path: Path, request: Any) -> Backend:
    if kind == "local":
        from sink.storage.local import LocalStorage

        root = tmp_path / "store"
        storage = LocalStorage(root)
        bucket = "bucket-one"
        storage.check_bucket(bucket)
        base = root / bucket

        def walk() -> list[str]:
            return sorted(
                (Path(d) / f).relative_to(base).as_posix() for d, _, files in os.walk(base) for f in files
            )

        return Backend(
            "local", storage, bucket, {"connect.storage": "local", "connect.local.root": str(root)},
            walk, lambda key: (base / key).read_bytes(),
        )
    from sink.config import parse_settings
    from sink.storage.s3 import S3Storage

    endpoint = request.getfixturevalue("s3_endpoint")
    bucket = request.getfixturevalue("s3_bucket_factory")("sink")
    config = endpoint.connect_config() | {"connect.s3.http.max.retries": "1"}
    settings = parse_settings({"name": "probe", "connect.s3.kcql": "x"} | config)
    client = request.getfixturevalue("s3_client")

    def listing() -> list[str]:
        keys: list[str] = []
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
            keys.extend(item["Key"] for item in page.get("Contents", []))
        return sorted(keys)

    return Backend(
        "s3", S3Storage(settings.storage.s3), bucket, config,
        listing, lambda key: client.get_object(Bucket=bucket, Key=key)["Body"].read(),
    )


def raw_keys(backend: Backend) -> list[str]:
    return backend.raw_list()


def data_keys(backend: Backend, prefix: str = "") -> list[str]:
    return [key for key in raw_keys(backend) if is_data_key(key, prefix)]


def read_json_records(backend: Backend, prefix: str = "") -> list[tuple[str, Any]]:
    """Every JSON line of every committed data file as (key, parsed value), read independently."""
    out: list[tuple[str, Any]] = []
    for key in data_keys(backend, prefix):
        data = backend.raw_read(key)
        if key.endswith(".gz"):
            data = gzip.decompress(data)
        out.extend((key, json.loads(line)) for line in data.decode("utf-8").splitlines() if line.strip())
    return out
