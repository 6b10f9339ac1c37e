"""Every command and config snippet in README.md is exercised, so the README cannot drift from the code.

* ``json`` blocks are connector configs: they must pass the same validation as ``kcql-sink run`` and
  ``POST /connectors``.
* ``bash`` blocks: ``make X`` needs a Makefile target X; ``kcql-sink ...`` lines must parse with the
  real CLI parser, and the ``kcql check|explain`` ones are run for real against the README's own config;
  ``curl`` lines must name a method and path the REST worker serves.
* ``sql`` blocks holding KCQL must compile (``tests/unit/kcql`` checks their exact plans).
"""

from __future__ import annotations

import argparse
import json
import re
import shlex
from pathlib import Path

import pytest

from sink.cli import build_parser, main
from sink.config.files import parse_connector_config
from sink.rest.plugins import validate_config
from sink.rest.routes import build_routes

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"^```(\w*)\n(.*?)^```", README, flags=re.DOTALL | re.MULTILINE)


def blocks(lang: str) -> list[str]:
    return [body for tag, body in BLOCKS if tag == lang]


def command_lines() -> list[str]:
    lines = []
    for body in blocks("bash"):
        for raw in body.splitlines():
            line = re.sub(r"\s+#\s.*$", "", raw).strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def test_the_readme_opens_with_the_two_setup_commands():
    first = BLOCKS[0][1].splitlines()
    assert [ln.split("#")[0].strip() for ln in first] == ["make demo", "make test"]


def test_there_are_snippets_of_every_kind():
    assert len(blocks("json")) >= 1 and len(command_lines()) >= 10 and blocks("sql")


@pytest.mark.parametrize("body", blocks("json"))
def test_json_configs_are_valid_connector_configs(body):
    data = json.loads(body)
    cfg = parse_connector_config(data)
    assert validate_config(cfg.props) == []


def test_make_targets_exist():
    makefile = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", makefile, flags=re.MULTILINE))
    for line in command_lines():
        if line.startswith("make "):
            assert shlex.split(line)[1] in targets, line


def _command_parser(parser: argparse.ArgumentParser, argv: list[str]) -> tuple[argparse.ArgumentParser, int]:
    """The (sub)parser that parses the rest of ``argv``, and how many words named it."""
    used = 0
    while used < len(argv):
        subparsers = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subparsers or argv[used] not in subparsers[0].choices:
            break
        parser = subparsers[0].choices[argv[used]]
        used += 1
    return parser, used


@pytest.mark.parametrize("line", [ln for ln in command_lines() if ln.startswith("kcql-sink ")])
def test_cli_lines_parse(line):
    """Each README command line means what it says: its command runs, with its arguments."""
    argv = shlex.split(line.split(" | ")[0].rstrip("&").strip())[1:]
    parser = build_parser()
    args = parser.parse_args(argv)
    command, used = _command_parser(parser, argv)
    assert used >= 1 and args.command == argv[0]
    # the function that runs is the one the named (sub)command registered
    assert args.func is command.get_default("func")
    assert args.func.__module__ == f"sink.cli.{argv[0].replace('-', '_')}"
    # every option on the line is parsed into its own value; every other word is a positional
    by_flag = {flag: action for action in command._actions for flag in action.option_strings}
    positionals = [a for a in command._actions if not a.option_strings]
    words = iter(argv[used:])
    given_positionals = []
    for word in words:
        action = by_flag.get(word)
        if action is None:
            assert not word.startswith("-"), f"{word} is not an option of {' '.join(argv[:used])}"
            given_positionals.append(word)
        elif action.nargs == 0:
            assert getattr(args, action.dest) == action.const
        else:
            value = next(words)
            expected = action.type(value) if callable(action.type) else value
            assert getattr(args, action.dest) == expected, word
    assert [getattr(args, a.dest) for a in positionals] == given_positionals


def test_kcql_lines_run_against_the_readme_config(tmp_path, monkeypatch, capsys):
    (tmp_path / "orders.json").write_text(blocks("json")[0])
    monkeypatch.chdir(tmp_path)
    ran = 0
    for line in command_lines():
        argv = shlex.split(line)
        if argv[:3] == ["kcql-sink", "kcql", "explain"] and "orders.json" in argv:
            assert main(argv[1:]) == 0
            out = json.loads(capsys.readouterr().out)
            assert out[0]["example_key"] == "orders/country=<country>/orders(0_000000000000).parquet"
            ran += 1
    assert ran == 1


@pytest.mark.parametrize("line", [ln for ln in command_lines() if ln.startswith("curl ")])
def test_curl_lines_name_worker_endpoints(line):
    argv = shlex.split(line)
    method = argv[argv.index("-X") + 1] if "-X" in argv else "GET"
    url = next(a for a in argv if a.startswith("http://"))
    path = "/" + url.split("/", 3)[3] if url.count("/") > 2 else "/"
    routes = build_routes(herder=None, registry=None)  # type: ignore[arg-type]
    matched = [r for r in routes if r.path_regex.match(path.split("?")[0]) and method in (r.methods or ())]
    assert matched, f"{method} {path} is not served by kcql-sink worker"
