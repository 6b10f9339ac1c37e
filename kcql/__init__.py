"""KCQL compiler: Lenses S3 sink statements (both dialects) -> frozen :class:`SinkPlan` objects.

>>> plan, = parse("INSERT INTO bucket:prefix SELECT * FROM orders STOREAS `AVRO` WITH_FLUSH_COUNT = 5000")
>>> plan.bucket, plan.prefix, plan.source, plan.format.value, plan.flush.count
('bucket', 'prefix', 'orders', 'AVRO', 5000)

The grammar is ``kcql/grammar.lark``; the reference for users is the "KCQL reference" section of
README.md.
"""

from __future__ import annotations

from kcql.errors import KcqlError, KcqlSemanticError, KcqlSyntaxError
from kcql.explain import EXPLAIN_KEYS, explain_dict, explain_projection
from kcql.model import PartitionField, SinkPlan, StoreFormat
from kcql.parser import parse, parse_one
from kcql.routing import Shadowing, plan_for_topic, shadowed

__all__ = [
    "EXPLAIN_KEYS",
    "KcqlError",
    "KcqlSemanticError",
    "KcqlSyntaxError",
    "PartitionField",
    "Shadowing",
    "SinkPlan",
    "StoreFormat",
    "explain_dict",
    "explain_projection",
    "parse",
    "parse_one",
    "plan_for_topic",
    "shadowed",
]
