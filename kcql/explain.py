"""The ``kcql explain`` view of a plan: a JSON-ready dict with a stable set of keys.

``kcql-sink kcql explain --json`` prints exactly these keys plus ``example_key`` (which needs the
partitioners and formats packages, so the CLI adds it). Tests and the corpus compare plans through
this view because it is what users see.
"""

from __future__ import annotations

from typing import Any

from kcql.model import SinkPlan

__all__ = ["EXPLAIN_KEYS", "explain_dict"]

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
    }
