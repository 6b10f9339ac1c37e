"""Load the connector config the reader commands (``sql``, ``cat``) are pointed at.

The same loader as ``kcql-sink run`` (``sink.config.files``): Connect JSON, flat JSON or
``.properties``, aliases normalised, so the reader commands accept any config the sink takes.
"""

from __future__ import annotations

from typing import Any

from sink.config.files import load_connector_config

__all__ = ["load_config"]


def load_config(path: str) -> dict[str, Any]:
    """The flat ``key -> value`` config in ``path`` (with ``name`` when the file has one).

    Raises:
        ConfigError: the file is missing or not a Connect JSON / flat JSON / .properties file.
    """
    loaded = load_connector_config(path)
    config: dict[str, Any] = dict(loaded.props)
    if loaded.name:
        config.setdefault("name", loaded.name)
    return config
