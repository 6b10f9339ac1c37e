"""The Spark side of kcql-sink: query the sink's committed output with Spark SQL.

``register(spark, config)`` turns the sink's own Connect config into one temporary view per KCQL
statement; ``spark_reader.catalog`` and ``spark_reader.records`` read the same files without Spark
(``kcql-sink cat``). Depends only on ``kcql`` (the plan) and ``partitioners`` (the layout).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = ["register"]

if TYPE_CHECKING:
    from collections.abc import Mapping

    from pyspark.sql import SparkSession


def register(spark: SparkSession, config: Mapping[str, Any], **kwargs: Any) -> dict[str, str]:
    """Register one temporary view per KCQL statement; see :func:`spark_reader.views.register`."""
    from spark_reader.views import register as _register

    return _register(spark, config, **kwargs)
