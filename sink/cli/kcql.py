"""``kcql-sink kcql check|explain``: compile KCQL without running anything.

``check FILE|-`` prints ``ok: N statement(s)`` or the first error with its line, column and a
caret; ``explain [--json] FILE|-`` shows what each statement means, including the parsed SELECT
list (text view) and the object key the first record of partition 0 would get. Both print a
``warning:`` line on stderr per statement an earlier one shadows (:func:`kcql.shadowed`). FILE may
also be a connector config (Connect JSON, flat JSON or a ``.properties`` file) whose
``connect.s3.kcql`` is then compiled; positions are then relative to that value. A leading UTF-8
byte-order mark (Windows editors) is ignored. The ``--json`` keys are a contract
(:data:`kcql.EXPLAIN_KEYS`); scripts and checks depend on them, so warnings never go to stdout.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

import kcql
from kcql.errors import SinkError
from kcql.model import SinkPlan

__all__ = ["KcqlInputError", "explain_plan", "read_kcql", "register", "warn_shadowed"]

KCQL_CONFIG_KEYS = ("connect.s3.kcql", "connect.local.kcql", "kcql")
"""Config keys holding KCQL, tried in order when FILE is a JSON connector config."""


class KcqlInputError(SinkError):
    """The KCQL input cannot be read (missing file, config without a KCQL key, bad JSON)."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``kcql`` command with its ``check`` and ``explain`` subcommands."""
    parser = subparsers.add_parser(
        "kcql",
        help="check or explain KCQL statements",
        description="Compile KCQL (Lenses S3 sink dialects) and report errors or what each statement does.",
    )
    sub = parser.add_subparsers(dest="kcql_command", metavar="SUBCOMMAND")
    sub.required = True
    check = sub.add_parser(
        "check",
        help="compile and report the first error, or ok: N statement(s)",
        description="Exit 0 and print 'ok: N statement(s)', or exit 1 and print the error with its position.",
    )
    check.add_argument("file", metavar="FILE|-", help="KCQL text file, connector JSON config, or - for stdin")
    check.set_defaults(func=run_check)
    explain = sub.add_parser(
        "explain",
        help="show the plan of every statement",
        description="Print one object per statement: source, target, format, partitioning, flush, "
        "envelope, properties and the example object key of the first record.",
    )
    explain.add_argument(
        "file", metavar="FILE|-", help="KCQL text file, connector JSON config, or - for stdin"
    )
    explain.add_argument("--json", action="store_true", help="print a JSON array (stable keys)")
    explain.set_defaults(func=run_explain)


def read_kcql(source: str, stdin: TextIO | None = None) -> str:
    """The KCQL text of ``source`` (a path, or ``-`` for stdin); a JSON config yields its KCQL value.

    Raises:
        KcqlInputError: the file cannot be read, or is a JSON config without a KCQL key.
    """
    if source == "-":
        text = (stdin or sys.stdin).read().removeprefix("\ufeff")
    else:
        try:
            text = Path(source).read_text(encoding="utf-8-sig")
        except FileNotFoundError:
            raise KcqlInputError(f"{source}: no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise KcqlInputError(f"{source}: cannot read: {exc}") from None
    if text.lstrip().startswith("{"):
        return _kcql_from_config(source, text)
    if source.endswith(".properties"):
        return _kcql_from_properties(source, text)
    return text


def _kcql_from_properties(source: str, text: str) -> str:
    """The KCQL of a Connect ``.properties`` file (as ``kcql-sink run`` accepts), not the file itself."""
    from sink.config.files import parse_properties

    props = {key.lower(): value for key, value in parse_properties(text).items()}
    for key in KCQL_CONFIG_KEYS:
        if key in props:
            return props[key]
    raise KcqlInputError(f"{source}: properties file has no {' or '.join(KCQL_CONFIG_KEYS)} key")


def _kcql_from_config(source: str, text: str) -> str:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KcqlInputError(
            f"{source}: looks like a JSON connector config but is not valid JSON: {exc}"
        ) from None
    config = doc.get("config", doc) if isinstance(doc, dict) else None
    if isinstance(config, dict):
        lowered = {str(k).lower(): v for k, v in config.items()}
        for key in KCQL_CONFIG_KEYS:
            value = lowered.get(key)
            if isinstance(value, str):
                return value
    raise KcqlInputError(f"{source}: JSON config has no {' or '.join(KCQL_CONFIG_KEYS)} key")


def explain_plan(plan: SinkPlan) -> dict[str, Any]:
    """The ``explain --json`` object of one plan: :func:`kcql.explain_dict` plus ``example_key``."""
    out = kcql.explain_dict(plan)
    out["example_key"] = _example_key(plan)
    return {key: out[key] for key in kcql.EXPLAIN_KEYS}


def _example_key(plan: SinkPlan) -> str:
    from formats import extension_for
    from partitioners import example_key

    return example_key(plan, extension_for(plan.format, plan.compression_codec or "UNCOMPRESSED"))


def warn_shadowed(plans: tuple[SinkPlan, ...], err: TextIO | None = None) -> int:
    """Print one ``warning:`` line per statement that never gets a record (:func:`kcql.shadowed`).

    Warnings go to stderr, so ``explain --json`` output stays the documented array. Returns how
    many were printed.
    """
    found = kcql.shadowed(plans)
    for shadowing in found:
        print(f"kcql-sink kcql: warning: {shadowing.message}", file=err or sys.stderr)
    return len(found)


def run_check(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kcql check``: KCQL errors propagate to :func:`sink.cli.dispatch` (message, exit 1).

    Shadowed statements are warnings (stderr), not errors: Lenses runs such a config too.
    """
    plans = kcql.parse(read_kcql(args.file))
    warn_shadowed(plans, err)
    print(f"ok: {len(plans)} statement(s)", file=out or sys.stdout)
    return 0


def run_explain(args: argparse.Namespace, out: TextIO | None = None, err: TextIO | None = None) -> int:
    """``kcql explain``: one object per statement, as a JSON array with ``--json``; warnings on stderr."""
    stream = out or sys.stdout
    plans = kcql.parse(read_kcql(args.file))
    warn_shadowed(plans, err)
    objects = [explain_plan(p) for p in plans]
    if args.json:
        print(json.dumps(objects, indent=2), file=stream)
        return 0
    for number, (plan, obj) in enumerate(zip(plans, objects, strict=True), start=1):
        if number > 1:
            print(file=stream)
        print(f"statement {number} (line {plan.line}): {' '.join(plan.statement.split())}", file=stream)
        select, ignore = kcql.explain_projection(plan)
        print(f"  {'select:':14} {select}", file=stream)
        if ignore:
            print(f"  {'ignore:':14} {ignore}", file=stream)
        for key in kcql.EXPLAIN_KEYS:
            value = obj[key]
            shown = value if isinstance(value, str) else json.dumps(value)
            print(f"  {key + ':':14} {shown}", file=stream)
    return 0
