"""What the task builds once per KCQL statement: its format, partitioner, flush policy, projection.

Built at ``start`` so that every problem a statement has (a codec its format cannot write, a
bucket name S3 refuses, staging inside the storage root) is reported together before anything
runs, with the same sentences ``validate()`` uses for the same config.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from formats import FormatError, get_format, settings_for_plan
from formats.base import FileFormat
from kcql.errors import ConfigError, ConfigProblem
from kcql.model import SinkPlan
from partitioners import Partitioner
from sink.config.buckets import bucket_name_problem
from sink.config.settings import ConnectorSettings, staging_problem
from sink.task.flush_policy import FlushPolicy
from sink.transforms.projection import Projection, compile_projection

__all__ = ["Statement", "compile_statements"]


@dataclass(frozen=True, slots=True)
class Statement:
    """One statement, ready to write."""

    plan: SinkPlan
    format: FileFormat
    partitioner: Partitioner
    policy: FlushPolicy
    projection: Projection | None = None
    """SELECT/IGNORE applied to each written value; ``None`` writes the value as it is."""


def compile_statements(settings: ConnectorSettings, plans: Sequence[SinkPlan]) -> dict[SinkPlan, Statement]:
    """Each plan's :class:`Statement`.

    Raises:
        ConfigError: every problem of every statement (and of the staging directory) at once.
    """
    problems: list[ConfigProblem] = []
    statements: dict[SinkPlan, Statement] = {}
    writers = settings.writers
    for plan in plans:
        try:
            fmt = get_format(settings_for_plan(plan, writers.compression_codec, writers.compression_level))
        except FormatError as exc:
            problems.append(ConfigProblem("connect.s3.kcql", plan.statement or plan.source, str(exc)))
            continue
        if settings.storage.kind == "s3" and (why := bucket_name_problem(plan.bucket)):
            problems.append(ConfigProblem("connect.s3.kcql", plan.statement or plan.bucket, why))
        try:
            projection = compile_projection(plan)
        except ConfigError as exc:
            problems += exc.problems
            continue
        statements[plan] = Statement(plan, fmt, Partitioner(plan), FlushPolicy.from_plan(plan), projection)
    if (problem := staging_problem(settings)) is not None:
        problems.append(problem)
    if problems:
        raise ConfigError(problems)
    return statements
