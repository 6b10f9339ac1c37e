"""How one finished staging file becomes a visible, final object exactly once.

Two protocols (``connect.s3.commit.protocol``; ``docs/exactly-once.md`` has the whole story).
Each step names the fault-injection point after it.

**Conditional** (3 requests for a single-part file; needs ``If-None-Match`` on PUT)::

    1. index: pending = {finalKey, path, firstOffset, lastOffset, committedAfter}  (If-Match)
                                                                           "after-pending-recorded"
    2. PUT the staging file to the final key   (If-None-Match: *)                    "after-upload"
    3. index: offsets advanced, pending cleared   (If-Match)                   "after-index-committed"

A 412 on step 2 means the key already holds this very file: the pending op named it, and only
the file of exactly that path and offset range is ever PUT under it (by us before a lost
response, or by a zombie that passed step 1), so it counts as done. Recovery (:meth:`resolve_pending`):
the final key exists → advance the index; it does not → the op cannot be rolled back, because a
zombie that passed step 1 may still PUT it, and a replay that cut the records differently would
then store them twice. It is rolled *forward* instead: the index keeps it under ``owed``, and the
task re-produces exactly that file from the replay and PUTs it under the same key
(:meth:`fulfil`), whichever of the two uploads wins.

**Copy** (the weaker mode for stores without conditional writes; 6 requests on S3)::

    1. upload the staging file to .temp-upload/<connector>/<topic>/<partition>/<uuid>   "after-upload"
    2. index: pending = {temp, final, lastOffset, path, etag}   (If-Match)          "after-pending-recorded"
    3. copy temp -> final key   (CopySourceIfMatch etag; a HEAD first on S3)         "after-copy"
    4. delete temp                                                                   "after-delete-temp"
    5. index: offsets advanced, pending cleared   (If-Match)                         "after-index-committed"

Before 2 the temp object is litter (deleted, records replayed); from 2 on the pending operation
is rolled forward (the copy is idempotent: same bytes, same key).

Either way nothing becomes visible under a data key before it is complete, and the index never
claims a file that is not there. With exactly-once disabled, :meth:`Committer.commit_direct`
uploads straight to the final key.

A streamed file (:mod:`sink.commit.parts`) is already complete at its temporary key when it is
committed: :meth:`Committer.commit_uploaded` goes on from step 2 of the copy protocol (with
exactly-once off, :meth:`Committer.commit_uploaded_direct` copies it to the final key and deletes
it). Recovery also aborts the partition's incomplete multipart uploads (a crash while a file
streamed).
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Literal

from kcql.errors import SinkError
from sink.commit.index import FencedError, PartitionIndex, PendingCommit, temp_prefix
from sink.records.record import TopicPartition
from sink.storage.base import ObjectNotFound, PreconditionFailed, Storage

__all__ = [
    "COMMIT_STEPS",
    "CONDITIONAL_STEPS",
    "COPY_STEPS",
    "PROTOCOLS",
    "CommitError",
    "Committer",
    "FaultHook",
    "Protocol",
]

log = logging.getLogger(__name__)

Protocol = Literal["conditional", "copy"]
PROTOCOLS: tuple[Protocol, ...] = ("conditional", "copy")

CONDITIONAL_STEPS = ("after-pending-recorded", "after-upload", "after-index-committed")
"""The fault-injection points of one conditional commit, in order."""

COPY_STEPS = (
    "after-upload",
    "after-pending-recorded",
    "after-copy",
    "after-delete-temp",
    "after-index-committed",
)
"""The fault-injection points of one copy-protocol commit, in order."""

COMMIT_STEPS: tuple[tuple[Protocol, str], ...] = (
    *(("conditional", step) for step in CONDITIONAL_STEPS),
    *(("copy", step) for step in COPY_STEPS),
)
"""Every (protocol, step) pair a fault can be injected at: what crash tests parametrise over."""

FaultHook = Callable[[str], None]


class CommitError(SinkError):
    """A commit found the store in a state the protocol cannot explain (e.g. objects deleted by hand)."""


class Committer:
    """Moves finished staging files into storage for one connector.

    Args:
        protocol: ``conditional``, ``copy``, or ``auto`` (conditional when the storage enforces
            conditional writes, else copy).

    Attributes:
        fault_hook: called with each step name of the protocol (tests inject crashes here).
    """

    def __init__(self, storage: Storage, connector: str, protocol: str = "auto") -> None:
        self.storage = storage
        self.connector = connector
        if protocol == "auto":
            protocol = "conditional" if storage.supports_conditional_writes else "copy"
        if protocol not in PROTOCOLS:
            raise ValueError(f"unknown commit protocol {protocol!r}; expected auto or one of {PROTOCOLS}")
        self.protocol: Protocol = protocol  # type: ignore[assignment]
        self.fault_hook: FaultHook | None = None

    def _step(self, name: str) -> None:
        if self.fault_hook is not None:
            self.fault_hook(name)

    def commit_direct(self, bucket: str, staging: Path, final_key: str) -> None:
        """Exactly-once disabled: one upload straight to the final key (Kafka offsets decide replays)."""
        self.storage.put_file(bucket, final_key, staging, adopt=True, etag=False)

    def commit_exactly_once(
        self,
        index: PartitionIndex,
        staging: Path,
        final_key: str,
        path: str,
        last_offset: int,
        committed_after: int,
        first_offset: int | None = None,
    ) -> None:
        """Commit one file with the configured protocol; raises :class:`FencedError` if we lost the partition.

        A file the index owes (or whose conditional pending op is the index's) is finished with
        :meth:`fulfil` instead: its commit is already announced.
        """
        pending = index.state.pending
        if pending is not None and pending.conditional and pending.final_key == final_key:
            self.fulfil(index, pending, staging)  # our own earlier attempt (a storage error, no crash)
            return
        if pending is not None:
            # An earlier commit of this partition failed midway (a storage error, no crash): its
            # file may already be visible, and the pending op is the only record of it. Finish it
            # before a new pending op replaces it, or a replay would write those records again.
            self.resolve_pending(index)
        owed = next((o for o in index.state.owed if o.final_key == final_key), None)
        if owed is not None:
            self.fulfil(index, owed, staging)
        elif self.protocol == "conditional":
            self._commit_conditional(
                index, staging, final_key, path, first_offset, last_offset, committed_after
            )
        else:
            self._commit_copy(index, staging, final_key, path, last_offset, committed_after)

    def _commit_conditional(
        self, index: PartitionIndex, staging: Path, final_key: str, path: str, first_offset: int | None,
        last_offset: int, committed_after: int,
    ) -> None:
        pending = PendingCommit(None, final_key, last_offset, path, None, committed_after, first_offset)
        index.write(replace(index.state, pending=pending))
        self._step("after-pending-recorded")
        self._put_final(index, pending, staging)
        self._step("after-upload")
        self._advance(index, pending)
        self._step("after-index-committed")

    def fulfil(self, index: PartitionIndex, pending: PendingCommit, staging: Path) -> None:
        """PUT the file a conditional pending op announced (``staging`` holds exactly its records)
        under its final key, then advance the index: steps 2 and 3 of the conditional protocol."""
        self._put_final(index, pending, staging)
        self._step("after-upload")
        self._advance(index, pending)
        self._step("after-index-committed")

    def _put_final(self, index: PartitionIndex, pending: PendingCommit, staging: Path) -> None:
        bucket = index.bucket
        try:
            if self.storage.supports_conditional_writes:
                self.storage.put_file(
                    bucket, pending.final_key, staging, if_none_match=True, adopt=True, etag=False
                )
            elif self.storage.head(bucket, pending.final_key) is None:  # an owed file on a weak store
                self.storage.put_file(bucket, pending.final_key, staging, adopt=True, etag=False)
        except PreconditionFailed:
            # The key exists: our own earlier PUT (its response lost) or a zombie's, which passed
            # step 1 for this very file: the same records of the same path and offset range.
            log.info("%s: %s was already uploaded (the same records); counting it as done",
                     index.tp, self.storage.uri(bucket, pending.final_key))

    def _advance(self, index: PartitionIndex, pending: PendingCommit) -> None:
        p = pending
        index.write(index.state.after_commit(p.path, p.last_offset, p.committed_after, p.final_key))
        log.debug("committed %s (last offset %d)", pending.final_key, pending.last_offset)

    def _commit_copy(
        self, index: PartitionIndex, staging: Path, final_key: str, path: str, last_offset: int,
        committed_after: int,
    ) -> None:
        bucket = index.bucket
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
        self._finish_copy(index, pending, steps=True)

    def _forget(self, bucket: str, temp_key: str) -> None:
        try:
            self.storage.delete(bucket, temp_key)
        except SinkError as exc:  # litter under a hidden prefix; the next owner's open removes it
            log.warning("could not delete temporary upload %s: %s", temp_key, exc)

    def _finish_copy(self, index: PartitionIndex, pending: PendingCommit, *, steps: bool) -> None:
        bucket = index.bucket
        assert pending.temp_key is not None  # noqa: S101 - a copy-protocol pending
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
        self._advance(index, pending)
        if steps:
            self._step("after-index-committed")

    def recover(self, index: PartitionIndex) -> None:
        """After taking a partition over: finish or undo its pending commit, advance past owed files
        that are stored by now, then remove stray temps."""
        self.resolve_pending(index)
        for owed in index.state.owed:
            if self.storage.head(index.bucket, owed.final_key) is not None:
                log.info("%s: the owed file %s is stored (a late upload)", index.tp, owed.final_key)
                self._advance(index, owed)
        self.clean_temps(index.bucket, index.tp)

    def resolve_pending(self, index: PartitionIndex) -> None:
        """Finish (roll forward), owe or drop (roll back) the index's pending commit, if any.

        A conditional pending op whose final key is missing moves to ``owed``: the task must
        re-produce that exact file from the replay (see the module docstring).
        """
        bucket = index.bucket
        pending = index.state.pending
        if pending is None:
            return
        if pending.conditional:
            if self.storage.head(bucket, pending.final_key) is not None:
                log.info("%s: the interrupted commit of %s had completed", index.tp, pending.final_key)
                self._advance(index, pending)
            else:
                log.info(
                    "%s: the interrupted commit of %s (offsets %s..%d) is owed: the replay re-produces it",
                    index.tp, pending.final_key, pending.first_offset, pending.last_offset,
                )
                index.write(index.state.owing(pending))
        elif pending.temp_key is not None and self.storage.head(bucket, pending.temp_key) is not None:
            log.info("%s: rolling forward the interrupted commit of %s", index.tp, pending.final_key)
            self._finish_copy(index, pending, steps=False)
        elif self.storage.head(bucket, pending.final_key) is not None:
            log.info("%s: the interrupted commit of %s had completed", index.tp, pending.final_key)
            self._advance(index, pending)
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
        self._finish_copy(index, pending, steps=True)

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
