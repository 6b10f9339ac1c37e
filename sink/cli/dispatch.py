"""``kcql-sink``: the command line. One subcommand per module in :mod:`sink.cli`.

A command module ``sink/cli/<name>.py`` exposes ``register(subparsers)``, which adds its
parser and sets ``func(args) -> int``. The dispatcher imports, in :data:`COMMAND_MODULES` order,
the modules that exist, so adding a command is adding a file. Expected errors (every
:class:`~kcql.errors.SinkError`) print their message and exit 1; a traceback is a bug.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import logging
import os
import sys
from collections.abc import Sequence

from kcql.errors import SinkError
from sink._logging import configure_logging, restore_logging

__all__ = ["COMMAND_MODULES", "build_parser", "main"]

COMMAND_MODULES = ("kcql", "run", "spark_run", "worker", "sql", "cat", "replay")
"""Subcommand modules under ``sink.cli``, in ``--help`` order; missing ones are skipped."""

log = logging.getLogger(__name__)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with every available subcommand registered."""
    parser = argparse.ArgumentParser(
        prog="kcql-sink",
        description="Kafka -> S3/local files with Lenses KCQL statements; query the result with Spark.",
    )
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more logging (-vv for debug)")
    parser.add_argument("--log-level", default=None, help="log level name (overrides -v)")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for name in COMMAND_MODULES:
        module_name = f"sink.cli.{name}"
        if importlib.util.find_spec(module_name) is None:
            continue
        module = importlib.import_module(module_name)
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``kcql-sink`` with ``argv`` (default ``sys.argv[1:]``) and return the exit code.

    0 success, 1 an expected error (message on stderr), 2 a usage error, 130 interrupted.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(list(argv) if argv is not None else None)
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return exc.code if isinstance(exc.code, int) else 2
    logging_state = configure_logging(args.verbose, args.log_level)
    try:
        return int(args.func(args) or 0)
    except SinkError as exc:
        print(f"kcql-sink {args.command}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("kcql-sink: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `kcql-sink ... | head`: stop quietly, as other CLI tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    finally:
        restore_logging(logging_state)
