"""``spark-submit`` entry point: ``spark-submit [--py-files ...] <this file> CONFIG [--once|--stream ...]``.

The same options as ``kcql-sink spark-run``, with the session spark-submit set up (its master,
its executors): the package must reach the executors, e.g. ``--py-files`` with a zip of the
project's packages, or an environment archive with the wheel installed (README, "When one machine
is not enough").
"""

from __future__ import annotations

import argparse
import sys

from kcql.errors import SinkError
from sink._logging import configure_logging


def main(argv: list[str] | None = None) -> int:
    from pyspark.sql import SparkSession

    from sink.cli.spark_run import add_options, spark_run_command

    parser = argparse.ArgumentParser(prog="spark-submit .../sink/cli/spark_submit.py")
    parser.add_argument("config", metavar="CONFIG")
    add_options(parser)
    args = parser.parse_args(argv)
    configure_logging(1, None)
    session = SparkSession.builder.appName("kcql-sink spark-run").getOrCreate()
    try:
        return spark_run_command(args, session)
    except SinkError as exc:
        print(f"kcql-sink spark-run: {exc}", file=sys.stderr)  # noqa: T201
        return 1


if __name__ == "__main__":
    sys.exit(main())
