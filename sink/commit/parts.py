"""Streaming a staging file to storage part by part while it is written, so local staging stays bounded.

Without this, every open file is staged whole on local disk until its commit: ``flush.size`` =
1 GB on many partitions needs that much disk (Lenses #1053). A :class:`StreamingUpload` is the
:class:`~formats.base.PartSink` of one staging file: each time the local file reaches
``connect.s3.multipart.part.size`` the format hands the bytes over, they go up as the next part
of a multipart upload, and the local file is emptied.

The file's final key is not known while it is written (Lenses names hold the last offset and
the min/max timestamps), so the upload goes to a hidden temporary key under the partition's
``temp_prefix`` (as the committer's own temporary uploads do). At commit the rest of the local
file goes up as the last part, the upload is completed (still invisible: nothing is under a
data key), and the commit protocol goes on from "pending recorded": copy to the final key,
delete the temporary object (:meth:`sink.commit.committer.Committer.commit_uploaded`).

* The upload starts lazily at the first part: a file that never reaches one part is committed
  exactly as before (one PUT of the whole staging file), without a multipart upload.
* Parts go up on the writer's thread, one at a time (the task's ``put``: the upload is the
  back-pressure, as a commit is). Memory stays flat: a part is read from the local file by the
  HTTP client, never held whole in Python.
* A failed part poisons the upload: the file cannot be completed any more (its bytes are not
  all in one place) and :meth:`complete` raises, so the task discards the file and its records
  are replayed, as for any failed commit.
* A crash leaves an incomplete multipart upload under the temporary prefix; the next owner's
  recovery aborts it (:meth:`~sink.commit.committer.Committer.clean_temps`).
"""

from __future__ import annotations

import logging
import uuid
from pathlib import Path
from typing import BinaryIO

from kcql.errors import SinkError
from sink.storage.base import Storage, StorageError

__all__ = ["MAX_PARTS", "StreamingUpload"]

MAX_PARTS = 10_000
"""S3's limit on the parts of one multipart upload (the last part included)."""

log = logging.getLogger(__name__)


class StreamingUpload:
    """The multipart upload of one staging file to a temporary key (a :class:`~formats.base.PartSink`).

    States: idle (no part yet) → streaming (upload started) → completed → committed, or
    discarded in any state before committed; ``failed`` once a part or the completion failed.
    Not thread-safe: the writer that owns the file uses it, then whoever commits the file.
    """

    def __init__(self, storage: Storage, bucket: str, temp_prefix: str, part_size: int) -> None:
        self.storage = storage
        self.bucket = bucket
        self.key = temp_prefix + uuid.uuid4().hex
        self._part_size = part_size
        self.upload_id: str | None = None
        self.parts: list[tuple[int, str]] = []
        self.uploaded = 0
        """Bytes of the file already in parts (not on local disk any more)."""
        self.etag: str | None = None
        """The completed object's etag."""
        self.failed: BaseException | None = None
        self.aborted = False
        self.committed = False

    def __repr__(self) -> str:
        return f"StreamingUpload({self.storage.uri(self.bucket, self.key)}, parts={len(self.parts)})"

    @property
    def part_size(self) -> int:
        return self._part_size

    @property
    def started(self) -> bool:
        """Whether any part went up: the file must then be committed through :meth:`complete`."""
        return self.upload_id is not None

    def upload_part(self, data: BinaryIO, size: int) -> None:
        """Send the next part (called by the format's file at a write boundary)."""
        self._check_usable()
        if len(self.parts) + 1 >= MAX_PARTS:  # one number stays free for the last part
            self.failed = StorageError(
                f"{self.storage.uri(self.bucket, self.key)}: a file cannot have more than {MAX_PARTS:,} "
                f"parts of {self._part_size:,} bytes; raise connect.s3.multipart.part.size or lower "
                "flush.size"
            )
            raise self.failed
        try:
            if self.upload_id is None:
                self.upload_id = self.storage.create_multipart(self.bucket, self.key)
            number = len(self.parts) + 1
            etag = self.storage.upload_part(self.bucket, self.key, self.upload_id, number, data, size)
        except BaseException as exc:
            self.failed = exc
            raise
        self.parts.append((len(self.parts) + 1, etag))
        self.uploaded += size

    def complete(self, rest: Path) -> tuple[str, str]:
        """Upload the finished staging file's rest (``rest``) as the last part and complete the upload.

        Returns ``(temporary key, etag)``. Idempotent once completed (a retried commit).

        Raises:
            StorageError: a part failed earlier (the file must be discarded), or this step failed.
        """
        if self.etag is not None:
            return self.key, self.etag
        self._check_usable()
        if self.upload_id is None:
            raise SinkError(f"{self!r} was never started: commit the staging file {rest} whole instead")
        size = rest.stat().st_size
        try:
            if size:  # S3 takes a short last part; an empty one is left out
                with rest.open("rb") as data:
                    etag = self.storage.upload_part(
                        self.bucket, self.key, self.upload_id, len(self.parts) + 1, data, size
                    )
                self.parts.append((len(self.parts) + 1, etag))
                self.uploaded += size
            self.etag = self.storage.complete_multipart(self.bucket, self.key, self.upload_id, self.parts)
        except BaseException as exc:
            self.failed = exc
            raise
        return self.key, self.etag

    def discard(self) -> None:
        """The file is not committed (dropped, or its commit failed): remove what went up.

        Best effort: what cannot be removed now is under the hidden prefix, where the next
        owner's recovery aborts or deletes it. Nothing to do once committed.
        """
        if self.committed or self.aborted:
            return
        self.aborted = True
        try:
            if self.etag is not None:
                self.storage.delete(self.bucket, self.key)
            elif self.upload_id is not None:
                self.storage.abort_multipart(self.bucket, self.key, self.upload_id)
        except StorageError as exc:
            log.warning("could not remove the streamed upload %s (recovery will): %s", self.key, exc)

    def _check_usable(self) -> None:
        if self.failed is not None:
            # the same kind of error as the failure (a transient one may be retried by replaying)
            kind = type(self.failed) if isinstance(self.failed, StorageError) else StorageError
            raise kind(
                f"the streamed upload of this file to {self.storage.uri(self.bucket, self.key)} failed "
                f"earlier ({self.failed}); the file is discarded and its records replayed"
            ) from self.failed
        if self.aborted or self.committed:
            raise SinkError(f"{self!r} is {'aborted' if self.aborted else 'committed'}")
