"""The ``kcql explain`` view of a plan: a JSON-ready dict with a stable set of keys.

``kcql-sink kcql explain --json`` prints exactly these keys plus ``example_key`` (which needs the
partitioners and formats packages, so the CLI adds it). Tests and the corpus compare plans through
this view because it is what users see.
"""

from __future__ import annotations

from typing import Any

from kcql.model import SelectField, SinkPlan

__all__ = ["EXPLAIN_KEYS", "explain_columns", "explain_dict", "explain_projection"]

EXPLAIN_KEYS = (
    "source",
    "bucket",
    "prefix",
    "format",
    "partition_by",
    "include_keys",
    "flush",
    "envelope",
    "properties",
    "columns",
    "date",
    "example_key",
)
"""The keys of one ``explain --json`` object, in print order (a contract: do not rename)."""


def explain_dict(plan: SinkPlan) -> dict[str, Any]:
    """Every contract key except ``example_key``, as JSON-ready values."""
    return {
        "source": plan.source,
        "bucket": plan.bucket,
        "prefix": plan.prefix,
        "format": plan.format.value,
        "partition_by": None if plan.partition_by is None else [f.spec for f in plan.partition_by],
        "include_keys": plan.include_keys,
        "flush": {"count": plan.flush.count, "size": plan.flush.size, "interval": plan.flush.interval},
        "envelope": plan.envelope is not None,
        "properties": dict(plan.properties),
        "columns": explain_columns(plan),
        "date": (
            plan.date_source.describe if any(f.kind == "date" for f in plan.partition_by or ()) else None
        ),
    }


def explain_columns(plan: SinkPlan) -> list[str] | str:
    """The written value's fields after SELECT and IGNORE, in order: ``"*"`` when the value is
    written whole (``SELECT *``, or ``projection.enabled=false``); a wildcard shows as its entry
    (``customer.*``) and an IGNOREd nested field as ``-a.b``."""
    if not plan.projection or (not plan.fields and not plan.ignore):
        return "*"
    names = [f.output_name or f.name for f in plan.fields] if plan.fields else ["*"]
    dropped = [name[len("_value.") :] if name.startswith("_value.") else name for name in plan.ignore]
    dropped = [name[:-2] if name.endswith(".*") else name for name in dropped]
    return [n for n in names if n not in dropped] + [f"-{d}" for d in dropped if d not in names]


def explain_projection(plan: SinkPlan) -> tuple[str, str]:
    """The SELECT and IGNORE lists as parsed, for ``kcql explain``'s text view.

    Each entry reads ``<source>[.<path>][ AS alias]`` (``value.*``, ``key.a AS k``, ``topic``), so
    the user sees how ``_.key.a`` or ``f.*`` was understood. A plain ``SELECT *`` is ``*``; no
    IGNORE is ``""``. What is written is :func:`explain_columns`.
    """
    select = ", ".join(_entry(f) for f in plan.fields) if plan.fields else "*"
    return select, ", ".join(plan.ignore)


def _entry(field: SelectField) -> str:
    text = ".".join((field.source, *field.path))
    return f"{text} AS {field.alias}" if field.alias is not None else text
