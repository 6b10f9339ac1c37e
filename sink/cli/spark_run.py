"""``kcql-sink spark-run CONFIG``: the same connector, run by Spark (see :mod:`sink.spark.pipeline`).

``--once`` (the default) backfills every partition from where the storage index (else the
connector's group, else ``--starting``) says to ``--ending`` and exits; ``--stream`` runs a
Structured Streaming query until SIGTERM/SIGINT, with Spark's offsets in ``--checkpoint``. Either
way the files, names and exactly-once guarantee are those of ``kcql-sink run``, and the group
``connect-<name>`` is committed as Spark goes, so the two can take over from each other.

From ``spark-submit``: ``spark-submit --py-files kcql_sink.zip <path of sink/cli/spark_submit.py>
CONFIG --once`` runs the same thing with the cluster's session (README, "When one machine is not
enough").
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading
from types import FrameType
from typing import Any

from kcql.errors import ConfigError, ConfigProblem
from sink.config.files import load_connector_config

__all__ = ["register", "spark_run_command"]

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``spark-run`` subcommand to the ``kcql-sink`` parser."""
    parser = subparsers.add_parser(
        "spark-run",
        help="run the connector on Spark: a backfill (--once) or a streaming query (--stream)",
        description="Run the connector described by CONFIG on Spark, writing what kcql-sink run writes.",
    )
    parser.add_argument(
        "config", metavar="CONFIG", help="connector config: Connect JSON, flat JSON or .properties"
    )
    add_options(parser)
    parser.set_defaults(func=spark_run_command)


def add_options(parser: argparse.ArgumentParser) -> None:
    """The options shared by ``kcql-sink spark-run`` and the spark-submit entry point."""
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--once", action="store_true", help="backfill up to --ending, then exit (the default)")
    mode.add_argument("--stream", action="store_true", help="run a Structured Streaming query until stopped")
    parser.add_argument("--master", default=None, help="Spark master (default: local[*], or spark-submit's)")
    parser.add_argument(
        "--trigger", type=float, default=None, help="seconds between micro-batches (default: flush.interval)"
    )
    parser.add_argument(
        "--starting",
        default="committed",
        help="committed (index, else group, else earliest; the default), earliest, latest, or "
        'JSON {"topic": {"0": 12}}',
    )
    parser.add_argument(
        "--ending", default="latest", help='latest (the default) or JSON {"topic": {"0": 99}}'
    )
    parser.add_argument(
        "--checkpoint", default=None, help="Spark's checkpoint directory (--stream only; required)"
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="Kafka bootstrap servers (default: bootstrap.servers in CONFIG, then $KAFKA_BOOTSTRAP_SERVERS)",
    )


def spark_run_command(args: argparse.Namespace, session: Any = None) -> int:
    """Entry point of ``kcql-sink spark-run``; returns the exit status."""
    from sink.cli.run import _bootstrap
    from sink.spark.pipeline import spark_run

    cfg = load_connector_config(args.config, strict=False)
    bootstrap = _bootstrap(args, cfg)
    problems: list[ConfigProblem] = list(cfg.problems)
    if bootstrap is None:
        problems.append(
            ConfigProblem("bootstrap.servers", "", "no Kafka to read from: pass --bootstrap-servers")
        )
    if args.stream and not args.checkpoint:
        problems.append(ConfigProblem("--checkpoint", "", "--stream needs a checkpoint directory"))
    if problems:
        raise ConfigError(problems)
    assert bootstrap is not None  # noqa: S101 - reported above
    own_session = session is None
    if session is None:
        from spark_reader.session import build_session

        session = build_session(args.master, app_name=f"kcql-sink spark-run {cfg.name}", ui=True)
    stop = threading.Event()

    def handle(signum: int, _frame: FrameType | None) -> None:
        if stop.is_set():
            sys.exit(130)
        log.info("signal %d: stopping the streaming query after its current micro-batch", signum)
        stop.set()

    previous = {s: signal.signal(s, handle) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        result = spark_run(
            session,
            cfg,
            bootstrap,
            stream=args.stream,
            trigger=args.trigger,
            starting=args.starting,
            ending=args.ending,
            checkpoint=args.checkpoint,
            stop=stop,
        )
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if own_session:
            session.stop()  # before exit, or PySpark's accumulator thread prints an EOFError
    print(  # noqa: T201 - the command's result line
        f"kcql-sink spark-run {cfg.name}: {'stream stopped' if args.stream else 'backfill done'} "
        f"after {result.seconds:.1f} s ({len(result.starting)} partitions)",
        file=sys.stderr,
    )
    return 0
