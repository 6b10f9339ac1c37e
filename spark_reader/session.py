"""Build the SparkSession the ``kcql-sink sql`` command queries with.

Local mode by default; ``--master`` picks any Spark master and ``SPARK_REMOTE`` a Spark Connect
server, with the same views either way (the Python data source works over Connect too).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from kcql.errors import SinkError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["SparkUnavailableError", "build_session"]

log = logging.getLogger(__name__)


class SparkUnavailableError(SinkError):
    """PySpark is not installed or the JVM could not start."""


_LOG4J = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log4j() -> str:
    path = Path(tempfile.gettempdir()) / "kcql-sink-spark-log4j2.properties"
    if not path.exists() or path.read_text(encoding="utf-8") != _LOG4J:
        path.write_text(_LOG4J, encoding="utf-8")
    return path.as_uri()


def build_session(
    master: str | None = None, app_name: str = "kcql-sink sql", *, ui: bool = False
) -> SparkSession:
    """A session for one command run: quiet, UTC, Python workers on this interpreter; the Spark UI
    only with ``ui`` (``spark-run`` jobs run long enough to be watched there).

    Raises:
        SparkUnavailableError: PySpark missing, or Java not found / failing to start.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:
        raise SparkUnavailableError(
            "PySpark is not installed; install the 'spark' extra: pip install 'kcql-sink[spark]'"
        ) from exc
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    elif not os.environ.get("SPARK_REMOTE"):
        # a CLI run prints its result, not the JVM's start-up chatter: loopback, errors-only log4j
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = (
            builder.master("local[*]")
            .config("spark.ui.enabled", "true" if ui else "false")
            .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={_quiet_log4j()}")
        )
    builder = builder.config("spark.sql.session.timeZone", "UTC").config(
        "spark.ui.showConsoleProgress", "false"
    )
    try:
        session = builder.getOrCreate()
    except Exception as exc:
        raise SparkUnavailableError(
            f"could not start Spark ({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "is Java 17 or 21 installed (JAVA_HOME)?"
        ) from exc
    with contextlib.suppress(Exception):  # Spark Connect sessions have no SparkContext
        session.sparkContext.setLogLevel("ERROR")
    return session
