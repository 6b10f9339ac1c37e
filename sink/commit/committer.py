"""Temp-then-commit: how one finished staging file becomes a visible, final object exactly once.

Exactly-once sequence for one file (each step names the fault-injection point after it)::

    1. upload the staging file to .temp-upload/<connector>/<topic>/<partition>/<uuid>   "after-upload"
    2. index: pending = {temp, final, lastOffset, path, etag}   (If-Match)          "after-pending-recorded"
    3. copy temp -> final key   (CopySourceIfMatch etag)                             "after-copy"
    4. delete temp                                                                   "after-delete-temp"
    5. index: offsets advanced, pending cleared   (If-Match)                         "after-index-committed"

A crash anywhere leaves a state :meth:`Committer.recover` finishes or undoes on the next ``open``:
before 2 the temp object is litter (deleted, records replayed); from 2 on the pending operation is
rolled forward (the copy is idempotent: same bytes, same key). Nothing becomes visible under a
data key before it is complete, and the index never claims a file that is not there.
With exactly-once disabled, :meth:`Committer.commit_direct` uploads straight to the final key.

A streamed file (:mod:`sink.commit.parts`) is already complete at its temporary key when it is
committed: :meth:`Committer.commit_uploaded` goes on from step 2 (with exactly-once off,
:meth:`Committer.commit_uploaded_direct` copies it to the final key and deletes it). Recovery
also aborts the partition's incomplete multipart uploads (a crash while a file streamed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kcql.errors import SinkError
from sink.commit.index import FencedError, PartitionIndex, PendingCommit, temp_prefix
from sink.records.record import TopicPartition
from sink.storage.base import ObjectNotFound, Storage

__all__ = ["COMMIT_STEPS", "CommitError", "Committer", "FaultHook"]

log = logging.getLogger(__name__)

COMMIT_STEPS = (
    "after-upload",
    "after-pending-recorded",
    "after-copy",
    "after-delete-temp",
    "after-index-committed",
)
"""The fault-injection points of one exactly-once commit, in order."""

FaultHook = Callable[[str], None]


class CommitError(SinkError):
    """A commit found the store in a state the protocol cannot explain (e.g. objects deleted by hand)."""


class Committer:
    """Moves finished staging files into storage for one connector.

    Attributes:
        fault_hook: called with each step name of :data:`COMMIT_STEPS` (tests inject crashes here).
    """

    def __init__(self, storage: Storage, connector: str) -> None:
        self.storage = storage
        self.connector = connector
        self.fault_hook: FaultHook | None = None

    def _step(self, name: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(name)

    def commit_direct(self, bucket: str, staging: Path, final_key: str) -> None:
        """Exactly-once disabled: one upload straight to the final key (Kafka offsets decide replays)."""
        self.storage.put_file(bucket, final_key, staging, adopt=True)

    def commit_exactly_once(
        self,
        index: PartitionIndex,
        staging: Path,
        final_key: str,
        path: str,
        last_offset: int,
        committed_after: int,
    ) -> None:
        """Run the five-step sequence for one file; raises :class:`FencedError` if we lost the partition."""
        bucket = index.bucket
        if index.state.pending is not None:
            # An earlier commit of this partition failed midway (a storage error, no crash): its
            # file may already be visible, and the pending op is the only record of it. Finish it
            # before a new pending op replaces it, or a replay would write those records again.
            self.resolve_pending(index)
        temp_key = temp_prefix(self.connector, index.tp) + uuid.uuid4().hex
        etag = self.storage.put_file(bucket, temp_key, staging, adopt=True)
        self._step("after-upload")
        pending = PendingCommit(temp_key, final_key, last_offset, path, etag, committed_after)
        try:
            index.write(replace(index.state, pending=pending))
        except FencedError:
            self._forget(bucket, temp_key)
            raise
        self._step("after-pending-recorded")
        self._finish(index, pending, steps=True)

    def _forget(self, bucket: str, temp_key: str) -> None:
        try:
            self.storage.delete(bucket, temp_key)
        except SinkError as exc:  # litter under a hidden prefix; the next owner's open removes it
            log.warning("could not delete temporary upload %s: %s", temp_key, exc)

    def _finish(self, index: PartitionIndex, pending: PendingCommit, *, steps: bool) -> None:
        bucket = index.bucket
        try:
            self.storage.copy(bucket, pending.temp_key, pending.final_key, if_match=pending.etag)
        except ObjectNotFound:
            # Someone (the new owner rolling our pending op forward) already moved it.
            if self.storage.head(bucket, pending.final_key) is None:
                raise CommitError(
                    f"temporary upload {pending.temp_key} vanished before it reached "
                    f"{self.storage.uri(bucket, pending.final_key)}"
                ) from None
        if steps:
            self._step("after-copy")
        self.storage.delete(bucket, pending.temp_key)
        if steps:
            self._step("after-delete-temp")
        index.write(index.state.after_commit(pending.path, pending.last_offset, pending.committed_after))
        if steps:
            self._step("after-index-committed")
        log.debug("committed %s (last offset %d)", pending.final_key, pending.last_offset)

    def recover(self, index: PartitionIndex) -> None:
        """After taking a partition over: finish or undo its pending commit, then remove stray temps."""
        self.resolve_pending(index)
        self.clean_temps(index.bucket, index.tp)

    def resolve_pending(self, index: PartitionIndex) -> None:
        """Finish (roll forward) or drop (roll back) the index's pending commit, if any."""
        bucket = index.bucket
        pending = index.state.pending
        if pending is not None:
            if self.storage.head(bucket, pending.temp_key) is not None:
                log.info("%s: rolling forward the interrupted commit of %s", index.tp, pending.final_key)
                self._finish(index, pending, steps=False)
            elif self.storage.head(bucket, pending.final_key) is not None:
                log.info("%s: the interrupted commit of %s had completed", index.tp, pending.final_key)
                state = index.state
                index.write(state.after_commit(pending.path, pending.last_offset, pending.committed_after))
            else:
                log.warning(
                    "%s: neither %s nor its temporary upload exist; the records after offset %s are replayed",
                    index.tp, pending.final_key, index.state.committed_offset,
                )
                index.write(replace(index.state, pending=None))

    def clean_temps(self, bucket: str, tp: TopicPartition) -> None:
        """Delete every temporary upload of ``tp`` (only its owner calls this, after recovery)."""
        for info in list(self.storage.list(bucket, temp_prefix(self.connector, tp))):
            self.storage.delete(bucket, info.key)
        self.abort_streams(bucket, tp)

    # -- streamed files (sink.commit.parts): already uploaded when committed ------------------------

    def commit_uploaded(
        self,
        index: PartitionIndex,
        temp_key: str,
        etag: str,
        final_key: str,
        path: str,
        last_offset: int,
        committed_after: int,
    ) -> None:
        """:meth:`commit_exactly_once` for a file already complete at ``temp_key`` (streamed):
        the sequence from step 2 on; raises :class:`FencedError` if we lost the partition."""
        bucket = index.bucket
        if index.state.pending is not None:
            self.resolve_pending(index)  # as in commit_exactly_once
        self._step("after-upload")
        pending = PendingCommit(temp_key, final_key, last_offset, path, etag, committed_after)
        try:
            index.write(replace(index.state, pending=pending))
        except FencedError:
            self._forget(bucket, temp_key)
            raise
        self._step("after-pending-recorded")
        self._finish(index, pending, steps=True)

    def commit_uploaded_direct(self, bucket: str, temp_key: str, etag: str, final_key: str) -> None:
        """Exactly-once disabled, streamed file: copy it from ``temp_key`` to the final key, then
        delete the temporary object (Kafka offsets decide replays, as for :meth:`commit_direct`)."""
        self.storage.copy(bucket, temp_key, final_key, if_match=etag)
        self._forget(bucket, temp_key)

    def abort_streams(self, bucket: str, tp: TopicPartition) -> None:
        """Abort ``tp``'s incomplete multipart uploads: files that were streaming when their task
        died (never visible: an incomplete upload is no object). Only the partition's owner calls it."""
        for upload in list(self.storage.list_multipart_uploads(bucket, temp_prefix(self.connector, tp))):
            log.info("%s: aborting the interrupted streamed upload %s", tp, upload.key)
            self.storage.abort_multipart(bucket, upload.key, upload.upload_id)
