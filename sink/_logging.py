"""Logging set-up for the ``kcql-sink`` command line. The library never configures handlers.

Only :func:`sink.cli.main` calls :func:`configure_logging`, once, so that embedding kcql-sink in
another program leaves that program's logging alone.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["LOG_FORMAT", "configure_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(verbosity: int = 0, level: str | None = None) -> None:
    """Send log records to stderr at a level chosen by ``-v`` flags or an explicit name.

    Args:
        verbosity: 0 → WARNING, 1 → INFO, 2+ → DEBUG.
        level: an explicit level name (``--log-level``, or ``KCQL_SINK_LOG_LEVEL``); wins over ``verbosity``.
    """
    name = (level or os.environ.get("KCQL_SINK_LOG_LEVEL") or "").strip().upper()
    if name:
        resolved = logging.getLevelName(name)
        if not isinstance(resolved, int):
            resolved = logging.WARNING
    else:
        resolved = (logging.WARNING, logging.INFO)[verbosity] if verbosity < 2 else logging.DEBUG
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_kcql_sink", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(LOG_FORMAT))
    handler._kcql_sink = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(resolved)
