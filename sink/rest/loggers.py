"""``/admin/loggers``: read and change log levels at run time, as Connect's KIP-495 endpoints.

Only this process's Python loggers are involved (``scope=cluster`` is treated as ``worker``: there
is no cluster to broadcast to). ``last_modified`` is the epoch-ms of our last change, else null.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from sink.rest.errors import RestError

__all__ = ["LEVELS", "logger_levels", "set_logger_level"]

LEVELS = ("TRACE", "DEBUG", "INFO", "WARN", "ERROR", "FATAL", "OFF")
_TO_PYTHON = {
    "TRACE": logging.DEBUG,
    "DEBUG": logging.DEBUG,
    "INFO": logging.INFO,
    "WARN": logging.WARNING,
    "ERROR": logging.ERROR,
    "FATAL": logging.CRITICAL,
    "OFF": logging.CRITICAL + 10,
}
_modified: dict[str, int] = {}


def _level_name(logger: logging.Logger) -> str:
    level = logger.getEffectiveLevel()
    if level > logging.CRITICAL:
        return "OFF"
    return {
        logging.DEBUG: "DEBUG",
        logging.INFO: "INFO",
        logging.WARNING: "WARN",
        logging.ERROR: "ERROR",
        logging.CRITICAL: "FATAL",
    }.get(level, logging.getLevelName(level))


def _known() -> dict[str, logging.Logger]:
    loggers = {
        name: lg for name, lg in logging.Logger.manager.loggerDict.items() if isinstance(lg, logging.Logger)
    }
    return {"root": logging.getLogger(), **{n: lg for n, lg in loggers.items() if lg.level or n in _modified}}


def logger_levels(name: str | None = None) -> dict[str, Any]:
    """Every explicitly configured logger (and root), or one logger; 404 for an unknown one."""
    known = _known()
    if name is not None:
        if name not in known and name not in logging.Logger.manager.loggerDict:
            raise RestError(404, f"Logger {name} not found.")
        logger = logging.getLogger() if name == "root" else logging.getLogger(name)
        return {"level": _level_name(logger), "last_modified": _modified.get(name)}
    return {
        n: {"level": _level_name(lg), "last_modified": _modified.get(n)} for n, lg in sorted(known.items())
    }


def set_logger_level(name: str, body: Any) -> list[str]:
    """Set ``name`` (and so its children) to ``body["level"]``; returns the affected loggers."""
    level = body.get("level") if isinstance(body, dict) else None
    if not level:
        raise RestError(400, "The request body must contain a 'level' field")
    if str(level).upper() not in LEVELS:
        raise RestError(404, f"invalid log level '{level}'.")
    logger = logging.getLogger() if name == "root" else logging.getLogger(name)
    logger.setLevel(_TO_PYTHON[str(level).upper()])
    _modified[name] = int(time.time() * 1000)
    prefix = "" if name == "root" else name + "."
    children = sorted(
        n
        for n, lg in logging.Logger.manager.loggerDict.items()
        if isinstance(lg, logging.Logger) and n.startswith(prefix) and n != name
    )
    return [name, *children]
