"""Read-only access to the sink's object store: list committed keys, fetch their bytes.

The reader deliberately does not reuse ``sink.storage``: it must run inside Spark executors and
on machines that only have the output, and it needs only two operations. Settings are a plain
picklable dataclass so they can travel to executors; clients are created lazily per process.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from kcql.errors import ConfigError, SinkError

__all__ = ["ObjectInfo", "ReaderStorageError", "StorageSettings", "open_store"]

log = logging.getLogger(__name__)


class ReaderStorageError(SinkError):
    """Listing or reading the committed output failed (missing bucket, bad credentials, ...)."""

    retriable = True


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed object."""

    key: str
    size: int


@dataclass(frozen=True)
class StorageSettings:
    """Where the committed output lives, from the same keys the sink's config uses."""

    kind: Literal["local", "s3"] = "local"
    root: str = ""
    """Local storage: the directory holding one sub-directory per bucket."""
    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = None
    path_style: bool = False

    def __repr__(self) -> str:  # never print credentials
        return f"StorageSettings(kind={self.kind!r}, root={self.root!r}, endpoint={self.endpoint!r})"

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StorageSettings:
        """Build from Connect config keys (``connect.storage``, ``connect.local.root``, ``connect.s3.*``).

        Raises:
            ConfigError: listing every missing or invalid storage key.
        """
        cfg = {
            str(k).lower() if str(k).lower().startswith("connect.") else str(k): v for k, v in config.items()
        }
        kind = str(cfg.get("connect.storage", "") or "").strip().lower()
        if not kind:
            kind = "local" if cfg.get("connect.local.root") else "s3"
        problems: list[tuple[str, str, str]] = []
        if kind not in ("local", "s3"):
            problems.append(("connect.storage", kind, "must be 'local' or 's3'"))
            raise ConfigError(problems)
        if kind == "local":
            root = str(cfg.get("connect.local.root", "") or "")
            if not root:
                problems.append(("connect.local.root", "", "required when connect.storage=local"))
                raise ConfigError(problems)
            return cls(kind="local", root=root)
        path_style_raw = cfg.get("connect.s3.path.style.access")
        if path_style_raw is None:
            path_style_raw = cfg.get(
                "connect.s3.vhost.bucket", False
            )  # inverted legacy meaning: true = path style
        auth_mode = str(cfg.get("connect.s3.aws.auth.mode", "Default") or "Default").lower()
        access = cfg.get("connect.s3.aws.access.key") or None
        secret = cfg.get("connect.s3.aws.secret.key") or None
        if auth_mode == "credentials" and not (access and secret):
            problems.append(
                ("connect.s3.aws.auth.mode", "Credentials", "needs connect.s3.aws.access.key and .secret.key")
            )
            raise ConfigError(problems)
        return cls(
            kind="s3",
            endpoint=str(cfg.get("connect.s3.custom.endpoint") or "") or None,
            region=str(cfg.get("connect.s3.aws.region") or "") or None,
            access_key=str(access) if access else None,
            secret_key=str(secret) if secret else None,
            path_style=str(path_style_raw).strip().lower() == "true",
        )


class _LocalStore:
    def __init__(self, settings: StorageSettings) -> None:
        self._root = Path(settings.root)

    def path(self, bucket: str, key: str) -> Path:
        return self._root / bucket / key

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        base = self._root / bucket
        if not base.is_dir():
            raise ReaderStorageError(f"bucket directory {str(base)!r} does not exist (connect.local.root)")
        # Walk from the deepest directory the prefix names, skipping hidden trees (.indexes, .temp-upload)
        # early so large index trees cost nothing.
        start_dir, _, name_prefix = prefix.rpartition("/")
        start = base / start_dir if start_dir else base
        if not start.is_dir():
            return
        for dirpath, dirnames, filenames in os.walk(start):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            rel_dir = Path(dirpath).relative_to(base).as_posix()
            rel_dir = "" if rel_dir == "." else rel_dir + "/"
            for name in sorted(filenames):
                key = rel_dir + name
                if key.startswith(prefix):
                    try:
                        size = (Path(dirpath) / name).stat().st_size
                    except FileNotFoundError:  # deleted between walk and stat (a staging file)
                        continue
                    yield ObjectInfo(key, size)
            if name_prefix and Path(dirpath) == start:
                dirnames[:] = [d for d in dirnames if d.startswith(name_prefix)]

    def read(self, bucket: str, key: str) -> bytes:
        try:
            return self.path(bucket, key).read_bytes()
        except OSError as exc:
            raise ReaderStorageError(f"cannot read {bucket}/{key}: {exc.strerror or exc}") from exc

    def url(self, bucket: str, key: str) -> str:
        return self.path(bucket, key).resolve().as_uri()


class _S3Store:
    def __init__(self, settings: StorageSettings) -> None:
        import boto3
        from botocore.config import Config

        self._client = boto3.client(
            "s3",
            endpoint_url=settings.endpoint,
            region_name=settings.region or "us-east-1",
            aws_access_key_id=settings.access_key,
            aws_secret_access_key=settings.secret_key,
            config=Config(
                s3={"addressing_style": "path" if settings.path_style else "auto"},
                retries={"max_attempts": 5},
            ),
        )

    def list(self, bucket: str, prefix: str) -> Iterator[ObjectInfo]:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            pages = self._client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
            for page in pages:
                for obj in page.get("Contents", ()):
                    yield ObjectInfo(obj["Key"], int(obj["Size"]))
        except (BotoCoreError, ClientError) as exc:
            raise ReaderStorageError(f"cannot list s3://{bucket}/{prefix}: {exc}") from exc

    def read(self, bucket: str, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self._client.get_object(Bucket=bucket, Key=key)["Body"].read()
        except (BotoCoreError, ClientError) as exc:
            raise ReaderStorageError(f"cannot read s3://{bucket}/{key}: {exc}") from exc

    def url(self, bucket: str, key: str) -> str:
        return f"s3://{bucket}/{key}"


Store = _LocalStore | _S3Store
_STORES: dict[StorageSettings, Store] = {}


def open_store(settings: StorageSettings) -> Store:
    """A (per-process cached) store for ``settings``; boto3 clients are expensive to build."""
    store = _STORES.get(settings)
    if store is None:
        store = _LocalStore(settings) if settings.kind == "local" else _S3Store(settings)
        _STORES[settings] = store
    return store
