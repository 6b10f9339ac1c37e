"""The one small storage interface the committer and the exactly-once index need.

Both backends (a local directory and S3) offer the same operations with the same guarantees, so
the commit protocol in :mod:`sink.commit.committer` is written once:

* objects appear atomically (no reader ever sees half a file);
* ``put_*`` and ``copy`` can be conditional (``if_none_match``: only if the key does not exist;
  ``if_match``: only if its current etag is the given one), which is what fences zombie tasks;
* every backend error surfaces as :class:`StorageError` (``retriable`` says whether trying again
  may help) or :class:`PreconditionFailed`, never as a raw ``botocore``/``OSError`` exception.

A backend whose staging disk is not its target (S3) also offers multipart uploads
(:attr:`Storage.supports_streaming`), so a large file can go up part by part while it is written
(:mod:`sink.commit.parts`) instead of being staged whole on local disk.
"""

from __future__ import annotations

import contextlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, ClassVar

from kcql.errors import SinkError

__all__ = [
    "AccessDenied",
    "MultipartUpload",
    "ObjectInfo",
    "ObjectNotFound",
    "PreconditionFailed",
    "Storage",
    "StorageError",
    "StoredObject",
    "TransientStorageError",
    "map_exceptions",
]


class StorageError(SinkError):
    """A storage operation failed. The message names the operation and the object (never a secret)."""

    retriable: ClassVar[bool] = False


class TransientStorageError(StorageError):
    """A failure that may go away when retried (throttling, a 5xx, a dropped connection, a timeout)."""

    retriable: ClassVar[bool] = True


class AccessDenied(StorageError):
    """The store refused the request itself: wrong or expired credentials, a policy that denies the
    action, or a bucket that does not exist. Retrying the same request at once cannot help (so the
    transport does not), but a person can fix it while the sink waits: under
    ``connect.s3.error.policy=RETRY`` the runtime retries it every ``connect.s3.retry.interval``, up
    to ``connect.s3.max.retries`` times, as Lenses' RetryErrorPolicy retries any error."""


class PreconditionFailed(StorageError):
    """A conditional write or copy was refused: the object exists (``if_none_match``) or changed
    (``if_match``). For the index this means another task took the partition over."""


class ObjectNotFound(StorageError):
    """The object (or, for ``copy``, its source) does not exist."""


@dataclass(frozen=True, slots=True)
class ObjectInfo:
    """One listed or HEAD-ed object."""

    key: str
    size: int
    etag: str


@dataclass(frozen=True, slots=True)
class MultipartUpload:
    """One multipart upload that was started and neither completed nor aborted."""

    key: str
    upload_id: str


@dataclass(frozen=True, slots=True)
class StoredObject:
    """An object's bytes and the etag to pass as ``if_match`` when replacing it."""

    data: bytes
    etag: str


@contextlib.contextmanager
def map_exceptions(
    describe: str, classify: Callable[[BaseException], type[StorageError] | None]
) -> Iterator[None]:
    """Translate backend exceptions into :class:`StorageError` subclasses (httpx's idea).

    Args:
        describe: what was attempted, e.g. ``"put s3://b/k"``; prefixed to the message.
        classify: maps a raised exception to the error class to raise, or ``None`` to let it
            through unchanged (programming errors must not be disguised as storage errors).
    """
    try:
        yield
    except StorageError:
        raise
    except Exception as exc:
        target = classify(exc)
        if target is None:
            raise
        raise target(f"{describe} failed: {exc}") from exc


class Storage(ABC):
    """A bucket-addressed object store (S3, or directories under a local root)."""

    supports_conditional_writes: bool = True
    """True when ``if_none_match``/``if_match`` are enforced atomically by the store. When False
    the conditions are checked by a read before the write (a race window remains); see
    ``docs/exactly-once.md``, *weaker mode*."""

    @abstractmethod
    def uri(self, bucket: str, key: str = "") -> str:
        """``s3://bucket/key`` or ``file:///root/bucket/key``, for messages."""

    @abstractmethod
    def check_bucket(self, bucket: str) -> None:
        """Raise :class:`StorageError` with a clear message unless ``bucket`` exists and is usable."""

    @abstractmethod
    def put_file(
        self, bucket: str, key: str, path: Path, *, if_none_match: bool = False, if_match: str | None = None,
        adopt: bool = False, etag: bool = True,
    ) -> str:
        """Upload a local file (multipart when large) and return the new object's etag.

        ``adopt``: the caller hands the (complete, fsynced) file over and will only delete it, never
        change it; a backend on the same file system may then link it instead of copying its bytes.
        ``etag=False``: the caller does not use the etag, so a backend that would have to compute
        it (the local one hashes the whole file) may return ``""`` instead; S3 returns it anyway.
        """

    @abstractmethod
    def put_bytes(
        self, bucket: str, key: str, data: bytes, *, if_none_match: bool = False, if_match: str | None = None
    ) -> str:
        """Write a small object and return its etag."""

    @abstractmethod
    def get(self, bucket: str, key: str) -> StoredObject:
        """Read an object; raises :class:`ObjectNotFound` when absent."""

    @abstractmethod
    def head(self, bucket: str, key: str) -> ObjectInfo | None:
        """Size and etag of an object, ``None`` when absent."""

    @abstractmethod
    def copy(self, bucket: str, source: str, dest: str, *, if_match: str | None = None) -> None:
        """Copy ``source`` to ``dest`` in the same bucket (replacing ``dest``); ``if_match`` applies to
        the source. Raises :class:`ObjectNotFound` when the source is absent."""

    @abstractmethod
    def delete(self, bucket: str, key: str) -> None:
        """Delete an object; deleting an absent object succeeds (idempotent)."""

    @abstractmethod
    def list(self, bucket: str, prefix: str = "") -> Iterator[ObjectInfo]:
        """Every object whose key starts with ``prefix``, in key order."""

    # -- multipart uploads (streamed staging files); only where supports_streaming ------------------

    supports_streaming: bool = False
    """True when the multipart methods below work. A backend on the staging disk itself (local)
    gains nothing from streaming and leaves them unimplemented."""

    def create_multipart(self, bucket: str, key: str) -> str:
        """Start a multipart upload to ``key``; returns its upload id. Nothing is visible at ``key``
        until :meth:`complete_multipart`."""
        raise StorageError(f"{type(self).__name__} does not stream uploads ({self.uri(bucket, key)})")

    def upload_part(
        self, bucket: str, key: str, upload_id: str, number: int, data: BinaryIO, size: int
    ) -> str:
        """Upload part ``number`` (1-based) of ``size`` bytes read from ``data``; returns its etag.
        Every part but the last must be at least 5 MiB (S3's rule)."""
        raise StorageError(f"{type(self).__name__} does not stream uploads ({self.uri(bucket, key)})")

    def complete_multipart(
        self, bucket: str, key: str, upload_id: str, parts: Sequence[tuple[int, str]]
    ) -> str:
        """Assemble ``parts`` (number, etag) into the object at ``key``; returns the object's etag."""
        raise StorageError(f"{type(self).__name__} does not stream uploads ({self.uri(bucket, key)})")

    def abort_multipart(self, bucket: str, key: str, upload_id: str) -> None:
        """Drop an incomplete upload and its parts; an unknown (already finished) upload succeeds."""
        raise StorageError(f"{type(self).__name__} does not stream uploads ({self.uri(bucket, key)})")

    def list_multipart_uploads(self, bucket: str, prefix: str) -> Iterator[MultipartUpload]:
        """The incomplete uploads whose key starts with ``prefix`` (none where nothing streams)."""
        return iter(())

    def close(self) -> None:  # noqa: B027 - optional hook, most backends hold nothing
        """Release connections."""
