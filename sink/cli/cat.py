"""``kcql-sink cat``: print committed records as JSON lines, without Spark.

Records come back in offset order per topic-partition; ``--follow`` keeps waiting for newly
committed files (like the kafka-store reader's ``--wait``). Only committed files are read: staging,
temp-upload and index objects are never shown, and a file is shown only once it is complete.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TextIO

from kcql.errors import SinkError
from sink.cli._reader_config import load_config

__all__ = ["CatError", "register", "run"]


class CatError(SinkError):
    """Bad ``cat`` arguments (unknown view, negative offset, ...)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``cat`` subcommand."""
    p = subparsers.add_parser(
        "cat",
        help="print committed records as JSON lines (no Spark needed)",
        description="Stream the records the sink committed for --config back as JSON lines, in "
        "offset order per topic-partition.",
    )
    p.add_argument("--config", required=True, help="connector config: Connect JSON, flat JSON or .properties")
    p.add_argument("--topic", default=None, help="only this topic")
    p.add_argument(
        "--view", default=None, help="only the statement with this view name (see `kcql-sink sql`)"
    )
    p.add_argument("--from-offset", type=int, default=None, help="skip records below this offset")
    p.add_argument("--follow", action="store_true", help="keep waiting for newly committed files")
    p.add_argument("--poll-interval", type=float, default=1.0, help="seconds between polls with --follow")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="with --follow: exit after this many seconds without new files",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the command; returns the exit code (0 also when interrupted with Ctrl-C while following)."""
    from spark_reader.catalog import view_specs
    from spark_reader.stream import iter_records

    out = out or sys.stdout
    if args.from_offset is not None and args.from_offset < 0:
        raise CatError(f"--from-offset {args.from_offset}: must be >= 0")
    if args.poll_interval <= 0:
        raise CatError(f"--poll-interval {args.poll_interval}: must be > 0")
    specs = view_specs(load_config(args.config))
    if args.view is not None:
        specs = [s for s in specs if s.name == args.view]
        if not specs:
            names = ", ".join(s.name for s in view_specs(load_config(args.config)))
            raise CatError(f"--view {args.view!r}: no such view (views: {names})")
    try:
        for record in iter_records(
            specs,
            topic=args.topic,
            from_offset=args.from_offset,
            follow=args.follow,
            poll_interval=args.poll_interval,
            idle_timeout=args.idle_timeout,
        ):
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            if args.follow:
                out.flush()
    except KeyboardInterrupt:
        return 0
    except BrokenPipeError:  # `kcql-sink cat ... | head`
        return 0
    return 0
