"""Small helpers over Avro schemas in their parsed-JSON form (the project's one schema language)."""

from __future__ import annotations

from typing import Any

__all__ = ["is_nullable", "make_nullable", "non_null_branch"]


def is_nullable(schema: Any) -> bool:
    """Whether ``schema`` accepts null (``"null"`` or a union with a ``"null"`` branch)."""
    if schema == "null":
        return True
    if isinstance(schema, list):
        return any(b == "null" or (isinstance(b, dict) and b.get("type") == "null") for b in schema)
    return isinstance(schema, dict) and schema.get("type") == "null"


def make_nullable(schema: Any) -> Any:
    """``schema`` as a union whose first branch is ``"null"`` (so a ``null`` default is valid)."""
    if schema == "null" or (isinstance(schema, dict) and schema.get("type") == "null"):
        return "null"
    if isinstance(schema, list):
        if "null" in schema:
            return ["null", *[b for b in schema if b != "null"]]
        return ["null", *schema]
    return ["null", schema]


def non_null_branch(schema: Any) -> Any:
    """The single non-null branch of a nullable union, or ``schema`` itself."""
    if isinstance(schema, list):
        rest = [b for b in schema if b != "null"]
        if len(rest) == 1:
            return rest[0]
    return schema
