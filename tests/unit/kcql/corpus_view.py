"""How the corpus test looks at a plan: the explain view plus every other plan field, JSON-ready."""

from __future__ import annotations

from typing import Any

from kcql import explain_dict
from kcql.model import SinkPlan

__all__ = ["plan_view"]


def plan_view(plan: SinkPlan) -> dict[str, Any]:
    """``explain --json`` minus ``example_key``, plus the fields explain does not show."""
    view = explain_dict(plan)
    del view["columns"]  # derived from fields/ignore below; pinned by test_explain_columns
    del view["date"]  # the _date time source; pinned by tests/unit/partitioners/test_date_source.py
    view["partition_fields"] = (
        None if plan.partition_by is None else [[f.kind, *f.path] for f in plan.partition_by]
    )
    view["envelope_fields"] = (
        None
        if plan.envelope is None
        else [plan.envelope.key, plan.envelope.value, plan.envelope.headers, plan.envelope.metadata]
    )
    view["padding"] = [plan.padding.type, plan.padding.char, plan.padding.offset, plan.padding.partition]
    view["naming"] = plan.naming.value
    view["key_suffix"] = plan.key_suffix
    view["compression"] = [plan.compression_codec, plan.compression_level]
    view["schema_compatibility"] = plan.schema_compatibility
    # [name as written, alias, source, *path]; [] for a plain SELECT *
    view["fields"] = [[f.name, f.alias, f.source, *f.path] for f in plan.fields]
    view["ignore"] = list(plan.ignore)
    view["limit"] = plan.limit
    view["line"] = plan.line
    return view
