"""Local staging files: where records are streamed before a file is committed.

Layout: ``<root>/<connector>/<task uuid>/<topic>/<partition>/<uuid>.<ext>``. The partition path
(PARTITIONBY values) is deliberately *not* part of the staging path, so long values cannot hit
"File name too long" (Lenses #1719), and the task id keeps two tasks sharing
``connect.s3.local.tmp.directory`` apart. Without a configured directory each task gets a fresh
temporary one, removed on :meth:`StagingArea.close`.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import uuid
from pathlib import Path

from partitioners import escape
from sink.record import TopicPartition

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
