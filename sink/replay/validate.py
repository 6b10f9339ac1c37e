"""Every problem with a replay config at once (the REST worker's validate, and before a replay starts)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kcql.errors import ConfigError, ConfigProblem, KcqlError
from sink.replay.serialise import build_serialiser
from spark_reader.storage import StorageSettings

__all__ = ["replay_problems"]


def replay_problems(config: Mapping[str, Any]) -> list[ConfigProblem]:
    """What is wrong with ``config`` as a replay config: the reverse KCQL, storage and converters."""
    from sink.replay.runner import plans_from_config

    problems: list[ConfigProblem] = []
    try:
        plans_from_config(config)
    except ConfigError as exc:
        problems += exc.problems
    except KcqlError as exc:
        problems.append(ConfigProblem("connect.s3.kcql", str(config.get("connect.s3.kcql", "")), str(exc)))
    try:
        StorageSettings.from_config(config)
    except ConfigError as exc:
        problems += exc.problems
    for which in ("key", "value"):
        try:
            build_serialiser(config, which)
        except ConfigError as exc:
            problems += exc.problems
    tasks = str(config.get("tasks.max", "1") or "1").strip()
    if tasks != "1":
        problems.append(
            ConfigProblem("tasks.max", tasks, "a replay runs as one task (one transactional producer); set 1")
        )
    return problems
