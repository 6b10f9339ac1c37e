"""Load the connector config the reader commands (``sql``, ``cat``) are pointed at.

Uses ``sink.config_files`` (Connect JSON, flat JSON, ``.properties``) when it exists; otherwise a
minimal loader of the same three shapes, so the reader commands work on any config the sink takes.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import Any

from kcql.errors import ConfigError

__all__ = ["load_config"]


def load_config(path: str) -> dict[str, Any]:
    """The flat ``key -> value`` config in ``path``.

    Raises:
        ConfigError: the file is missing or not a Connect JSON / flat JSON / .properties file.
    """
    try:
        loader = importlib.import_module("sink.config_files")
    except ImportError:
        loader = None
    if loader is not None:
        for name in ("load_config_file", "load_config", "load"):
            fn = getattr(loader, name, None)
            if callable(fn):
                return dict(fn(path))
    return _load(Path(path))


def _load(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError([("--config", str(path), f"cannot read: {exc.strerror or exc}")]) from exc
    if path.suffix == ".properties":
        return _properties(text)
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [("--config", str(path), f"not valid JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}")]
        ) from exc
    if not isinstance(doc, dict):
        raise ConfigError([("--config", str(path), "expected a JSON object")])
    if isinstance(doc.get("config"), dict):  # Connect REST form: {"name": ..., "config": {...}}
        cfg = dict(doc["config"])
        if "name" in doc:
            cfg.setdefault("name", doc["name"])
        return cfg
    return doc


def _properties(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    pending = ""
    for raw in text.splitlines():
        line = pending + raw.strip()
        pending = ""
        if not line or line.startswith(("#", "!")):
            continue
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        sep = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:sep], line[sep + 1 :]) if sep >= 0 else (line, "")
        out[key.strip()] = value.strip()
    return out
