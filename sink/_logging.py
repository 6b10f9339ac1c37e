"""Logging set-up for the ``kcql-sink`` command line. The library never configures handlers.

Only :func:`sink.cli.dispatch` calls :func:`configure_logging`, once, so that embedding kcql-sink in
another program leaves that program's logging alone.
"""

from __future__ import annotations

import logging
import os
import sys

__all__ = ["LOG_FORMAT", "configure_logging", "restore_logging"]

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def configure_logging(verbosity: int = 0, level: str | None = None) -> tuple[logging.Handler, int]:
    """Send log records to stderr at a level chosen by ``-v`` flags or an explicit name.

    Args:
        verbosity: 0 → WARNING, 1 → INFO, 2+ → DEBUG.
        level: an explicit level name (``--log-level``, or ``KCQL_SINK_LOG_LEVEL``); wins over ``verbosity``.

    Returns:
        The handler added and the root level before, for :func:`restore_logging` (``main`` undoes
        its set-up on return, so calling it in-process, as the tests do, leaves no handler behind).
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
    previous = root.level
    root.addHandler(handler)
    root.setLevel(resolved)
    return handler, previous


def restore_logging(state: tuple[logging.Handler, int]) -> None:
    """Undo :func:`configure_logging`."""
    handler, previous = state
    root = logging.getLogger()
    root.removeHandler(handler)
    root.setLevel(previous)
