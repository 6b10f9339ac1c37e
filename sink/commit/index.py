"""The exactly-once index: one small JSON object per (connector, topic, partition) in the bucket.

The storage, not Kafka, is the source of truth for what has been committed. The index object
``<indexes>/<connector>/<topic>/<partition>.json`` (a dot-prefixed folder, never data) holds::

    {"version": 2, "owner": "<task uuid>", "epoch": 7,
     "committedOffset": 41,                 # every record <= 41 is in a committed file (or skipped)
     "paths": {"date=2024/…": 57},          # writers that committed ahead of committedOffset
     "pending": null | {"finalKey": …, "path": …, "firstOffset": …, "lastOffset": …,
                        "committedAfter": …,
                        "tempKey": …, "etag": …},   # only the copy protocol's pending has these
     "owed": [{pending}, …]}                 # conditional pendings to re-produce (roll forward)

Every write is conditional on the etag of our own last read or write (``If-Match``), and taking a
partition over bumps ``epoch`` and ``owner`` with such a write, so the previous owner's cached
etag goes stale: a zombie task can no longer change the index and gets :class:`FencedError`.
The protocol around it is in :mod:`sink.commit.committer` and ``docs/exactly-once.md``.

Version 2 added the conditional protocol's pending (no ``tempKey``) and ``owed``. A reader accepts
every version up to its own and refuses a newer one by name: an older release that half-read an
``owed`` list would drop the files it owes, so it must stop rather than guess.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from kcql.errors import SinkError
from partitioners import escape
from sink.records.record import TopicPartition
from sink.storage.base import ObjectNotFound, PreconditionFailed, Storage

__all__ = ["FencedError", "IndexState", "PartitionIndex", "PendingCommit", "index_key", "temp_prefix"]

log = logging.getLogger(__name__)

TEMP_UPLOAD_DIR = ".temp-upload"


def index_key(indexes_name: str, connector: str, tp: TopicPartition) -> str:
    """``<indexes>/<connector>/<topic>/<partition>.json`` (names escaped: one segment each)."""
    return f"{indexes_name}/{escape(connector)}/{escape(tp.topic)}/{tp.partition}.json"


def temp_prefix(connector: str, tp: TopicPartition) -> str:
    """Folder of the partition's temporary uploads, ``.temp-upload/<connector>/<topic>/<partition>/``."""
    return f"{TEMP_UPLOAD_DIR}/{escape(connector)}/{escape(tp.topic)}/{tp.partition}/"


class FencedError(SinkError):
    """Another task owns the partition now; this task must stop writing to it.

    Not retriable: the runtime should close the partition (the new owner replays what this task
    had not committed).
    """

    retriable: ClassVar[bool] = False

    def __init__(self, tp: TopicPartition, owner: str | None, epoch: int | None, me: str) -> None:
        self.tp = tp
        self.owner = owner
        self.epoch = epoch
        super().__init__(
            f"partition {tp} is now owned by task {owner} (epoch {epoch}); "
            f"this task ({me}) was fenced and must not commit to it"
        )


@dataclass(frozen=True, slots=True)
class PendingCommit:
    """A file being committed to ``final_key``.

    Copy protocol: uploaded to ``temp_key`` (with ``etag``) and being copied to ``final_key``.
    Conditional protocol (``temp_key`` is ``None``): announced before it is PUT straight to
    ``final_key`` with ``If-None-Match``; it holds exactly the records of ``path`` with offsets in
    ``(skip threshold, last_offset]``, the first of them at ``first_offset``.
    """

    temp_key: str | None
    final_key: str
    last_offset: int
    path: str
    etag: str | None
    committed_after: int
    """The partition's ``committedOffset`` once this commit is done (computed when it began)."""
    first_offset: int | None = None

    @property
    def conditional(self) -> bool:
        """Whether this is the conditional protocol's pending (no temporary upload to copy)."""
        return self.temp_key is None

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "finalKey": self.final_key, "path": self.path, "lastOffset": self.last_offset,
            "committedAfter": self.committed_after,
        }
        if self.first_offset is not None:
            doc["firstOffset"] = self.first_offset
        if self.temp_key is not None:
            doc["tempKey"] = self.temp_key
            doc["etag"] = self.etag
        return doc

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> PendingCommit:
        temp, etag, first = data.get("tempKey"), data.get("etag"), data.get("firstOffset")
        return cls(
            None if temp is None else str(temp), str(data["finalKey"]), int(data["lastOffset"]),
            str(data["path"]), None if etag is None else str(etag), int(data["committedAfter"]),
            None if first is None else int(first),
        )


@dataclass(frozen=True, slots=True)
class IndexState:
    """The decoded index object."""

    owner: str
    epoch: int = 0
    committed_offset: int | None = None
    paths: dict[str, int] = field(default_factory=dict)
    pending: PendingCommit | None = None
    owed: tuple[PendingCommit, ...] = ()
    """Conditional-protocol files whose commit was announced but whose final key was missing when
    a task recovered: they cannot be rolled back (a zombie may still PUT them), so the replay
    re-produces each exactly and PUTs it under its ``final_key`` (see ``docs/exactly-once.md``)."""

    VERSION: ClassVar[int] = 2

    def skip_threshold(self, path: str) -> int:
        """Records of ``path`` with an offset <= this are already committed (-1: none)."""
        base = -1 if self.committed_offset is None else self.committed_offset
        return max(base, self.paths.get(path, -1))

    def after_commit(
        self, path: str, last_offset: int, committed_after: int, final_key: str | None = None
    ) -> IndexState:
        """The state once a file of ``path`` ending at ``last_offset`` is committed: ``pending``
        cleared, and the owed file ``final_key`` (if it is one) no longer owed.

        ``committedOffset`` never reaches the first offset of a file still owed: its records are
        not stored yet, and the replay that re-produces it starts at ``committedOffset + 1``.
        """
        owed = tuple(o for o in self.owed if o.final_key != final_key)
        committed = max(committed_after, -1 if self.committed_offset is None else self.committed_offset)
        firsts = [o.first_offset for o in owed if o.first_offset is not None]
        if firsts:
            committed = min(committed, min(firsts) - 1)
        paths = dict(self.paths)
        paths[path] = max(paths.get(path, -1), last_offset)
        paths = {p: off for p, off in paths.items() if off > committed}
        new_committed = committed if committed >= 0 else None
        return replace(self, committed_offset=new_committed, paths=paths, pending=None, owed=owed)

    def owing(self, pending: PendingCommit) -> IndexState:
        """The state once ``pending`` (conditional, final key missing) must be re-produced."""
        owed = (*(o for o in self.owed if o.final_key != pending.final_key), pending)
        return replace(self, pending=None, owed=owed)

    def to_bytes(self) -> bytes:
        return json.dumps(
            {
                "version": self.VERSION, "owner": self.owner, "epoch": self.epoch,
                "committedOffset": self.committed_offset, "paths": self.paths,
                "pending": None if self.pending is None else self.pending.to_json(),
                **({"owed": [o.to_json() for o in self.owed]} if self.owed else {}),
            },
            sort_keys=True,
        ).encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> IndexState:
        try:
            doc = json.loads(data)
            version = int(doc.get("version", 1))
            if version > cls.VERSION:
                raise SinkError(
                    f"the exactly-once index {where} has version {version}, written by a newer kcql-sink; "
                    f"this release reads versions up to {cls.VERSION}: run the newer release"
                )
            pending = doc.get("pending")
            committed = doc.get("committedOffset")
            return cls(
                owner=str(doc.get("owner", "")),
                epoch=int(doc.get("epoch", 0)),
                committed_offset=None if committed is None else int(committed),
                paths={str(k): int(v) for k, v in (doc.get("paths") or {}).items()},
                pending=None if pending is None else PendingCommit.from_json(pending),
                owed=tuple(PendingCommit.from_json(o) for o in doc.get("owed") or ()),
            )
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise SinkError(
                f"the exactly-once index {where} is corrupt ({exc}); inspect it, and delete it only if "
                "you accept replaying the partition from the Kafka group offset"
            ) from exc


class PartitionIndex:
    """One partition's index object, as owned by one task.

    Keeps the etag of its own last read/write; every update is ``If-Match`` that etag, so once
    another task has taken the partition over, every update fails with :class:`FencedError`.
    On stores without conditional writes (``storage.supports_conditional_writes`` false) the
    owner is re-read before each write instead: a narrow race remains (documented weaker mode).
    """

    def __init__(
        self, storage: Storage, bucket: str, key: str, tp: TopicPartition, task_id: str
    ) -> None:
        self.storage = storage
        self.bucket = bucket
        self.key = key
        self.tp = tp
        self.task_id = task_id
        self.state = IndexState(owner=task_id)
        self.etag: str | None = None

    @property
    def where(self) -> str:
        return self.storage.uri(self.bucket, self.key)

    def _read(self) -> tuple[IndexState, str] | None:
        try:
            obj = self.storage.get(self.bucket, self.key)
        except ObjectNotFound:
            return None
        return IndexState.from_bytes(obj.data, self.where), obj.etag

    def peek(self) -> IndexState | None:
        """The index as stored (``None``: there is none), without taking the partition over: for a
        planner that only needs to know where the partition's committed records end."""
        current = self._read()
        return None if current is None else current[0]

    def acquire(self) -> IndexState:
        """Read (or create) the index and take ownership with a new epoch; returns the state."""
        conditional = self.storage.supports_conditional_writes
        for _ in range(10):
            current = self._read()
            if current is None:
                state = IndexState(owner=self.task_id, epoch=1)
                try:
                    self.etag = self.storage.put_bytes(
                        self.bucket, self.key, state.to_bytes(), if_none_match=conditional
                    )
                except PreconditionFailed:
                    continue  # another task created it first: take it over from there
                self.state = state
                return state
            previous, etag = current
            state = replace(previous, owner=self.task_id, epoch=previous.epoch + 1)
            try:
                self.etag = self.storage.put_bytes(
                    self.bucket, self.key, state.to_bytes(), if_match=etag if conditional else None
                )
            except PreconditionFailed:
                continue  # changed between our read and write: read again
            if previous.owner and previous.owner != self.task_id:
                log.info("took over %s from task %s (epoch %d)", self.tp, previous.owner, state.epoch)
            self.state = state
            return state
        raise SinkError(f"could not take ownership of {self.where}: it keeps changing under us")

    def write(self, state: IndexState) -> None:
        """Replace the index with ``state`` if we still own it; raises :class:`FencedError` otherwise."""
        if self.storage.supports_conditional_writes:
            try:
                self.etag = self.storage.put_bytes(
                    self.bucket, self.key, state.to_bytes(), if_match=self.etag
                )
            except PreconditionFailed:
                # Our cached etag is stale. Usually another task took over; but an earlier write of
                # ours may have landed although its response was lost (timeout, then a retry):
                # then owner and epoch are still ours and we continue from the stored etag.
                current = self._read()
                if current is None or not self._is_mine(current[0]):
                    raise self.fenced(current[0] if current else None) from None
                self.etag = current[1]
                if current[0] != state:
                    try:
                        self.etag = self.storage.put_bytes(
                            self.bucket, self.key, state.to_bytes(), if_match=self.etag
                        )
                    except PreconditionFailed:
                        raise self.fenced() from None
        else:
            current = self._read()
            if current is None or not self._is_mine(current[0]):
                raise self.fenced(current[0] if current else None)
            self.etag = self.storage.put_bytes(self.bucket, self.key, state.to_bytes())
        self.state = state

    def _is_mine(self, stored: IndexState) -> bool:
        return stored.owner == self.task_id and stored.epoch == self.state.epoch

    def fenced(self, current: IndexState | None = None) -> FencedError:
        """The error to raise, naming the new owner as read from storage (best effort)."""
        if current is None:
            try:
                read = self._read()
            except SinkError:
                read = None
            current = read[0] if read else None
        return FencedError(
            self.tp, current.owner if current else None, current.epoch if current else None, self.task_id
        )
