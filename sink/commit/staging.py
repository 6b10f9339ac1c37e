"""Local staging files: where records are streamed before a file is committed.

Layout: ``<root>/<connector>/<task uuid>/<topic>/<partition>/<uuid>.<ext>``. The partition path
(PARTITIONBY values) is deliberately *not* part of the staging path, so long values cannot hit
"File name too long" (Lenses #1719), and the task id keeps two tasks sharing
``connect.s3.local.tmp.directory`` apart. Without a configured directory each task gets a fresh
temporary one, removed on :meth:`StagingArea.close`.

A live task holds an exclusive ``flock`` on ``<task dir>/.lock``. At start, sibling task
directories whose lock can be taken belong to dead processes (killed, OOM): their files were
never committed (the index or the Kafka offset replays them), so they are removed instead of
filling the disk crash after crash.

A staging write that finds the disk full (ENOSPC, or EDQUOT for a quota) raises
:class:`StagingFullError`: it names the staging file (under the configured directory) and the
filesystem holding it, and it is ``retriable``: under ``connect.s3.error.policy=RETRY`` the
partition is rewound to its last commit (its staging files are deleted, which frees space) and
tried again; once space returns, the replay writes every record exactly once.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from kcql.errors import SinkError
from partitioners import escape
from sink.records.record import TopicPartition

__all__ = ["DISK_FULL", "StagingArea", "StagingFullError", "staging_full"]

DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT})
"""The errno values that mean "no room left" rather than a broken disk."""

log = logging.getLogger(__name__)


class StagingFullError(SinkError, OSError):
    """The staging disk is full: the file being written is broken and must not be committed.

    Retriable: the records are still in Kafka, and rewinding the partition deletes its staging
    files, so a retry after ``connect.s3.retry.interval`` may find room. Also an ``OSError`` (with
    the original errno), for callers that treat I/O errors as such.
    """

    retriable = True

    def __str__(self) -> str:
        return str(self.strerror)  # the whole message, without OSError's "[Errno 28]" prefix


def _mount_point(path: Path) -> Path:
    path = path.absolute()
    while not os.path.ismount(path) and path.parent != path:
        path = path.parent
    return path


def staging_full(error: OSError, path: Path) -> StagingFullError:
    """The :class:`StagingFullError` for ``error`` (a DISK_FULL errno) while writing ``path``."""
    mount = _mount_point(path.parent)
    try:
        st = os.statvfs(mount)
        free = f"{st.f_bavail * st.f_frsize} of {st.f_blocks * st.f_frsize} bytes free"
    except OSError:
        free = "free space unknown"
    reason = error.strerror or os.strerror(error.errno or errno.ENOSPC)
    full = StagingFullError(
        error.errno,
        f"the staging directory is full: writing the staging file {path} failed ({reason}); the "
        f"filesystem at {mount} has {free}. Free space there, point connect.s3.local.tmp.directory "
        "at a larger disk or lower connect.s3.local.tmp.max.bytes; the file's records are replayed "
        "from Kafka, nothing is lost",
    )
    full.__cause__ = error
    return full


class StagingArea:
    """The task's staging directory."""

    def __init__(self, root: Path | None, connector: str, task_id: str) -> None:
        self._lock_fd: int | None = None
        try:
            if root is None:
                self.base = Path(tempfile.mkdtemp(prefix="kcql-sink-staging-"))
            else:
                self.base = Path(root) / escape(connector) / task_id
                self.base.mkdir(parents=True, exist_ok=True)
            self._remove_base = True
            self._lock_fd = os.open(self.base / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            if exc.errno in DISK_FULL:
                where = Path(root) if root is not None else Path(tempfile.gettempdir())
                raise staging_full(exc, where / escape(connector) / task_id / ".lock") from exc
            raise
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if root is not None:
            self._remove_dead_siblings()

    def _remove_dead_siblings(self) -> None:
        for sibling in self.base.parent.iterdir():
            if sibling == self.base or not sibling.is_dir():
                continue
            try:
                fd = os.open(sibling / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                continue  # a live task holds it
            else:
                log.info("removing staging files of a dead task: %s", sibling)
                shutil.rmtree(sibling, ignore_errors=True)
            finally:
                os.close(fd)

    def partition_dir(self, tp: TopicPartition) -> Path:
        return self.base / escape(tp.topic) / str(tp.partition)

    def new_file(self, tp: TopicPartition, extension: str) -> Path:
        """A fresh, not yet existing path for one staging file of ``tp``."""
        directory = self.partition_dir(tp)
        path = directory / f"{uuid.uuid4().hex}.{extension}"
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            if exc.errno in DISK_FULL:
                raise staging_full(exc, path) from exc
            raise
        return path

    def clear_partition(self, tp: TopicPartition) -> None:
        """Remove every staging file of ``tp`` (uncommitted data is replayed from Kafka)."""
        shutil.rmtree(self.partition_dir(tp), ignore_errors=True)

    def close(self) -> None:
        if self._remove_base:
            shutil.rmtree(self.base, ignore_errors=True)
        if self._lock_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._lock_fd)
            self._lock_fd = None
