"""``kcql-sink`` subcommands: one module per command, each with ``register(subparsers)``.

To add a command ``foo``: create ``sink/commands/foo.py`` with ``register(subparsers) -> None``
that calls ``subparsers.add_parser("foo", ...)`` and ``set_defaults(func=run)`` where
``run(args) -> int`` returns the exit code, and list ``"foo"`` in ``sink.cli.COMMAND_MODULES``
(``kcql``, ``run``, ``worker``, ``sql`` and ``cat`` already are; missing modules are skipped).
Raise a :class:`~kcql.errors.SinkError` subclass for expected failures: the dispatcher prints its
message and exits 1, so no command prints a traceback for a user mistake.
"""
