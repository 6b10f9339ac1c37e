"""The KCQL corpus: every statement of the seed document and the reference, plus edge cases.

Data lives in tests/data/kcql/corpus.json (one entry per KCQL text, with where it comes from).
A valid entry lists the exact plan view of every statement (and, under ``warnings``, the line and
message of every statement an earlier one shadows); an invalid one the exception type, the exact
line and column, and a phrase the message must contain. To grow the corpus, add an entry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import kcql
from kcql.errors import KcqlSemanticError, KcqlSyntaxError
from tests.unit.kcql.corpus_view import plan_view

CORPUS_PATH = Path(__file__).parents[2] / "data" / "kcql" / "corpus.json"
CORPUS: list[dict[str, Any]] = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
ERRORS = {"KcqlSyntaxError": KcqlSyntaxError, "KcqlSemanticError": KcqlSemanticError}


def test_corpus_is_large_and_mixed() -> None:
    valid = [e for e in CORPUS if "plans" in e]
    invalid = [e for e in CORPUS if "error" in e]
    assert len(CORPUS) >= 80
    assert len(valid) >= 40 and len(invalid) >= 40
    assert len({e["id"] for e in CORPUS}) == len(CORPUS), "corpus ids must be unique"
    assert all(("plans" in e) != ("error" in e) for e in CORPUS)


@pytest.mark.parametrize("entry", CORPUS, ids=[e["id"] for e in CORPUS])
def test_corpus_entry(entry: dict[str, Any]) -> None:
    text = entry["kcql"]
    if "plans" in entry:
        plans = kcql.parse(text)
        assert [plan_view(p) for p in plans] == entry["plans"]
        for plan in plans:
            assert plan.statement.strip() and plan.statement in text
        # shadowed statements (only the first statement reading a topic applies): [line, message]
        warnings = [[s.line, s.message] for s in kcql.shadowed(plans)]
        assert warnings == entry.get("warnings", [])
        return
    expected = entry["error"]
    with pytest.raises(ERRORS[expected["type"]]) as info:
        kcql.parse(text)
    err = info.value
    assert type(err) is ERRORS[expected["type"]]
    assert (err.line, err.column) == (expected["line"], expected["column"]), err.render()
    assert expected["message"] in err.message, err.render()
    rendered = str(err)
    assert f"line {err.line}, column {err.column}" in rendered
    # the caret sits under the offending column of the quoted line
    quoted, caret = rendered.splitlines()[1:3]
    assert caret.index("^") == len("  ") + err.column - 1
    assert quoted == "  " + text.splitlines()[err.line - 1]
