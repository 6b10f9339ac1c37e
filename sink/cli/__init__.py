"""``kcql-sink``: the command line. One subcommand per module in this package.

A command module ``sink/cli/<name>.py`` exposes ``register(subparsers)``, which adds its parser
and sets ``func(args) -> int`` where ``func`` returns the exit code; :mod:`sink.cli.dispatch`
lists it in ``COMMAND_MODULES``. Raise a :class:`~kcql.errors.SinkError` subclass for expected
failures: the dispatcher prints its message and exits 1, so no command prints a traceback for a
user mistake.
"""

from __future__ import annotations

from sink.cli.dispatch import COMMAND_MODULES, build_parser, main

__all__ = ["COMMAND_MODULES", "build_parser", "main"]
