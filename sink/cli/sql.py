"""``kcql-sink sql``: query the sink's committed output with Spark SQL.

``kcql-sink sql "SELECT ..." --config s3.json`` registers one view per KCQL statement of the
config (see ``spark_reader``) and prints the result; without a query it lists the views and their
schemas.
"""

from __future__ import annotations

import argparse
import csv
import json
import logging
import sys
from typing import Any, TextIO

from kcql.errors import SinkError
from sink.cli._reader_config import load_config

__all__ = ["SqlQueryError", "register", "run"]


class SqlQueryError(SinkError):
    """Spark rejected the query (unknown view or column, syntax error, ...)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``sql`` subcommand."""
    p = subparsers.add_parser(
        "sql",
        help="query the committed output with Spark SQL",
        description="Register one view per KCQL statement of --config and run a Spark SQL query; "
        "without a query, list the views and their schemas.",
    )
    p.add_argument("query", nargs="?", help="Spark SQL text; omit to list the views")
    p.add_argument("--config", required=True, help="connector config: Connect JSON, flat JSON or .properties")
    p.add_argument("--format", choices=("table", "json", "csv"), default="table", help="output format")
    p.add_argument("--limit", type=int, default=None, help="print at most this many rows")
    p.add_argument(
        "--master", default=None, help="Spark master URL (default local[*]; SPARK_REMOTE for Connect)"
    )
    p.add_argument(
        "--view",
        action="append",
        default=[],
        metavar="NAME=VIEW",
        help="rename a view: default name, topic or bucket:prefix = new name (repeatable)",
    )
    p.set_defaults(func=run)


def _views_arg(items: list[str]) -> dict[str, str]:
    out = {}
    for item in items:
        old, sep, new = item.partition("=")
        if not sep or not old or not new:
            raise SqlQueryError(f"--view {item!r}: expected NAME=VIEW")
        out[old] = new
    return out


def run(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Run the command; returns the exit code."""
    out = out or sys.stdout
    config = load_config(args.config)
    views_map = _views_arg(args.view)
    if args.limit is not None and args.limit < 0:
        raise SqlQueryError(f"--limit {args.limit}: must be >= 0")
    from spark_reader.session import build_session
    from spark_reader.views import register as register_views

    spark = build_session(args.master)
    # PySpark logs every failed query at ERROR itself; the command reports it once, as its error.
    logging.getLogger("SQLQueryContextLogger").setLevel(logging.CRITICAL)
    views = register_views(spark, config, views=views_map)
    if not args.query:
        for name, description in views.items():
            print(f"{name}: {description}", file=out)
            for field in spark.table(name).schema.fields:
                print(f"  {field.name}: {field.dataType.simpleString()}", file=out)
        return 0
    try:
        df = spark.sql(args.query)
        if args.limit is not None:
            df = df.limit(args.limit)
        columns = df.columns
        rows = [r.asDict(recursive=True) for r in df.collect()]
    except Exception as exc:
        raise SqlQueryError(_spark_message(exc)) from exc
    _print(rows, columns, args.format, out)
    return 0


_OUR_ERRORS = ("FileDecodeError:", "ReaderStorageError:", "SinkError:")


def _spark_message(exc: BaseException) -> str:
    """One readable line out of a Spark error: our own error's message when a Python worker
    raised it (Spark wraps it in a worker traceback), else Spark's first line."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    for line in reversed(lines):
        for marker in _OUR_ERRORS:
            if marker in line:
                return "query failed: " + line.split(marker, 1)[1].strip()
    return f"query failed: {lines[0] if lines else type(exc).__name__}"


def _cell(value: Any) -> Any:
    from spark_reader.records import to_jsonable

    return to_jsonable(value)


def _text(value: Any) -> str:
    value = _cell(value)
    if value is None:
        return "NULL"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def _print(rows: list[dict[str, Any]], columns: list[str], fmt: str, out: TextIO) -> None:
    if fmt == "json":
        for row in rows:
            print(json.dumps({c: _cell(row.get(c)) for c in columns}), file=out)
        return
    if fmt == "csv":
        w = csv.writer(out, lineterminator="\n")
        w.writerow(columns)
        for row in rows:
            w.writerow(["" if row.get(c) is None else _text(row.get(c)) for c in columns])
        return
    cells = [[_text(row.get(c)) for c in columns] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    print(rule, file=out)
    print("| " + " | ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " |", file=out)
    print(rule, file=out)
    for r in cells:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(r, widths, strict=True)) + " |", file=out)
    print(rule, file=out)
    print(f"({len(rows)} row{'s' if len(rows) != 1 else ''})", file=out)
