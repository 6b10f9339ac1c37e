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
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import tempfile
import uuid
from pathlib import Path

from partitioners import escape
from sink.records.record import TopicPartition

__all__ = ["StagingArea"]

log = logging.getLogger(__name__)


class StagingArea:
    """The task's staging directory."""

    def __init__(self, root: Path | None, connector: str, task_id: str) -> None:
        if root is None:
            self.base = Path(tempfile.mkdtemp(prefix="kcql-sink-staging-"))
            self._remove_base = True
        else:
            self.base = Path(root) / escape(connector) / task_id
            self.base.mkdir(parents=True, exist_ok=True)
            self._remove_base = True
        self._lock_fd: int | None = os.open(self.base / ".lock", os.O_RDWR | os.O_CREAT, 0o644)
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
        directory.mkdir(parents=True, exist_ok=True)
        return directory / f"{uuid.uuid4().hex}.{extension}"

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
