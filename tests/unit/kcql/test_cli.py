"""``kcql-sink kcql check|explain`` on what the KCQL compiler decides (layout defaults, warnings)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kcql import EXPLAIN_KEYS
from sink.cli import dispatch as cli


def write(tmp_path: Path, text: str, name: str = "s.kcql") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def explain_json(tmp_path: Path, text: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, object]]:
    assert cli.main(["kcql", "explain", "--json", write(tmp_path, text)]) == 0
    objects = json.loads(capsys.readouterr().out)
    assert all(list(obj) == list(EXPLAIN_KEYS) for obj in objects)
    return objects


def test_partitionby_without_a_choice_is_keys_and_values(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Lenses 2.1-11.x: KeysAndValues whenever nothing chooses, legacy dialect included
    (obj,) = explain_json(
        tmp_path, "INSERT INTO b:p SELECT * FROM t PARTITIONBY name, title WITH_FLUSH_COUNT = 1", capsys
    )
    assert obj["include_keys"] is True
    assert obj["example_key"] == "p/name=<name>/title=<title>/t(0_000000000000).json"


@pytest.mark.parametrize(
    "choice", ["WITHPARTITIONER=Values WITH_FLUSH_COUNT = 1", "PROPERTIES('partition.include.keys'=false)"]
)
def test_values_only_when_asked_for(tmp_path: Path, capsys: pytest.CaptureFixture[str], choice: str) -> None:
    text = "INSERT INTO b:p SELECT * FROM t PARTITIONBY name, title " + choice  # noqa: S608 (KCQL)
    (obj,) = explain_json(tmp_path, text, capsys)
    assert obj["include_keys"] is False
    assert obj["example_key"] == "p/<name>/<title>/t(0_000000000000).json"


def test_explain_text_shows_the_parsed_projection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = "INSERT INTO b SELECT f2 AS col2, *, f1, _key.*, _.key.a AS k, _.topic FROM t IGNORE f.secret"
    assert cli.main(["kcql", "explain", write(tmp_path, text)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  select:        value.f2 AS col2, value.*, value.f1, key.*, key.a AS k, topic"
    assert out[2] == "  ignore:        f.secret"
    assert cli.main(["kcql", "explain", write(tmp_path, "INSERT INTO b SELECT * FROM t")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1] == "  select:        *" and not any(line.startswith("  ignore:") for line in out)


SHADOWED = "INSERT INTO a SELECT * FROM t;\nINSERT INTO b:p SELECT * FROM u;\n\nINSERT INTO c SELECT * FROM t"
WARNING = (
    "kcql-sink kcql: warning: statement 3 (line 4) reads topic 't', but statement 1 (line 1) reads it "
    "first; only the first matching statement applies (as in Lenses), so statement 3 is never used\n"
)


def test_check_warns_about_shadowed_statements_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["kcql", "check", write(tmp_path, SHADOWED)]) == 0
    out, err = capsys.readouterr()
    assert out == "ok: 3 statement(s)\n"
    assert err == WARNING


@pytest.mark.parametrize("json_flag", [["--json"], []])
def test_explain_warns_on_stderr_and_keeps_its_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], json_flag: list[str]
) -> None:
    assert cli.main(["kcql", "explain", *json_flag, write(tmp_path, SHADOWED)]) == 0
    out, err = capsys.readouterr()
    assert err == WARNING
    if json_flag:
        objects = json.loads(out)  # stdout is still exactly the documented JSON array
        assert [o["source"] for o in objects] == ["t", "u", "t"]
        assert all(list(o) == list(EXPLAIN_KEYS) for o in objects)
