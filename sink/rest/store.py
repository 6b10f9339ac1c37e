"""Connector configs and target states, persisted in the worker's state directory.

One JSON file per connector (``<state-dir>/connectors/<quoted name>.json``) holding
``{"name", "config", "state"}``. Writes go to a temporary file in the same directory, are fsynced
and renamed over the old file, so a crash leaves either the old or the new version, never half of
one. File names are the connector name percent-encoded with no safe characters, so no name can
reach outside the directory; :func:`check_name` additionally rejects names that would be unusable
in URLs or logs. Files are created ``0600``: configs hold credentials.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote, unquote

from sink.rest.errors import RestError

__all__ = ["TARGET_STATES", "ConnectorRecord", "StateStore", "check_name"]

log = logging.getLogger(__name__)

TARGET_STATES = ("RUNNING", "PAUSED", "STOPPED")
MAX_NAME_LENGTH = 200
MAX_STORED_NAME = 250
"""Longest percent-encoded name: ``<name>.json`` must fit a file name (255 bytes on Linux file systems)."""


@dataclass(slots=True)
class ConnectorRecord:
    """What survives a worker restart: the raw config and the state the user asked for."""

    name: str
    config: dict[str, str]
    state: str = "RUNNING"


def check_name(name: str) -> str:
    """The trimmed connector name, or a 400 saying why it cannot be used.

    Connect rejects empty names and control characters; we also reject ``/`` and ``\\`` (they
    cannot round-trip through ``/connectors/{name}`` URLs), ``.``/``..``, and names whose state file
    name would be too long for the file system (a 500 from ``rename`` otherwise).
    """
    trimmed = name.strip()
    if not trimmed:
        raise RestError(400, "Connector name is empty")
    if any(unicodedata.category(ch).startswith("C") for ch in trimmed):
        raise RestError(400, f"Connector name {trimmed!r} contains control characters")
    if any(ch in trimmed for ch in "/\\") or trimmed in (".", ".."):
        raise RestError(400, f"Connector name {trimmed!r} must not contain '/' or '\\' nor be '.' or '..'")
    if len(trimmed) > MAX_NAME_LENGTH:
        raise RestError(400, f"Connector name is longer than {MAX_NAME_LENGTH} characters")
    stored = len(quote(trimmed, safe=""))
    if stored > MAX_STORED_NAME:
        raise RestError(
            400,
            f"Connector name is too long to store: {stored} bytes once percent-encoded for its state file, "
            f"at most {MAX_STORED_NAME} (non-ASCII characters take 6 to 12 bytes each)",
        )
    return trimmed


class StateStore:
    """Reads and atomically writes connector records under ``<root>/connectors``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root).resolve()
        self.dir = self.root / "connectors"
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock = threading.Lock()

    def _path(self, name: str) -> Path:
        path = self.dir / (quote(name, safe="") + ".json")
        if path.resolve().parent != self.dir:  # defence in depth; quote() already prevents this
            raise RestError(400, f"Connector name {name!r} cannot be stored")
        return path

    def load_all(self) -> list[ConnectorRecord]:
        """Every stored connector; unreadable files are logged and skipped, never deleted."""
        records = []
        for path in sorted(self.dir.glob("*.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                state = data.get("state", "RUNNING")
                records.append(
                    ConnectorRecord(
                        str(data["name"]),
                        {str(k): str(v) for k, v in data["config"].items()},
                        state if state in TARGET_STATES else "RUNNING",
                    )
                )
            except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
                log.warning("skipping unreadable connector file %s (%s): %s", path, unquote(path.stem), exc)
        return records

    def save(self, record: ConnectorRecord) -> None:
        """Write ``record`` atomically (temp file, fsync, rename, fsync the directory)."""
        path = self._path(record.name)
        payload = json.dumps(
            {"name": record.name, "config": record.config, "state": record.state}, indent=2, sort_keys=True
        )
        with self._lock:
            fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".tmp-", suffix=".json")
            try:
                with os.fdopen(fd, "w", encoding="utf-8") as fh:
                    fh.write(payload)
                    fh.flush()
                    os.fsync(fh.fileno())
                Path(tmp).replace(path)
            except BaseException:
                Path(tmp).unlink(missing_ok=True)
                raise
            self._fsync_dir()

    def delete(self, name: str) -> None:
        """Forget a connector (no error when it was never stored)."""
        with self._lock:
            self._path(name).unlink(missing_ok=True)
            self._fsync_dir()

    def _fsync_dir(self) -> None:
        dir_fd = os.open(self.dir, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
