"""kcql.routing: the first statement reading a topic gets its records; later ones are shadowed."""

from __future__ import annotations

import kcql
from kcql.routing import Shadowing, plan_for_topic, shadowed

TEXT = """INSERT INTO a SELECT * FROM orders;
INSERT INTO b SELECT * FROM `*`;
INSERT INTO c SELECT * FROM orders;
INSERT INTO d SELECT * FROM payments;
INSERT INTO e SELECT * FROM `*`"""


def test_the_first_matching_statement_handles_a_topic() -> None:
    plans = kcql.parse(TEXT)
    assert plan_for_topic(plans, "orders") is plans[0]
    assert plan_for_topic(plans, "payments") is plans[1]  # `*` comes first, as in Lenses
    assert plan_for_topic(plans, "anything") is plans[1]
    assert plan_for_topic(plans[:1], "payments") is None


def test_shadowed_statements_name_both_statements() -> None:
    plans = kcql.parse(TEXT)
    found = shadowed(plans)
    assert [(s.number, s.line, s.topic, s.winner_number) for s in found] == [
        (3, 3, "orders", 1),
        (4, 4, "payments", 2),
        (5, 5, "*", 2),
    ]
    assert all(isinstance(s, Shadowing) and s.statement is plans[s.number - 1] for s in found)
    assert found[0].winner is plans[0]
    assert found[0].message == (
        "statement 3 (line 3) reads topic 'orders', but statement 1 (line 1) reads it first; only the "
        "first matching statement applies (as in Lenses), so statement 3 is never used"
    )
    assert "reads every topic (FROM `*`) first" in found[1].message
    assert "reads every topic (FROM `*`), but statement 2 (line 2) already does" in found[2].message


def test_topics_compare_exactly_and_wildcard_last_is_not_shadowed() -> None:
    plans = kcql.parse("INSERT INTO a SELECT * FROM Orders; INSERT INTO b SELECT * FROM orders")
    assert shadowed(plans) == []
    plans = kcql.parse("INSERT INTO a SELECT * FROM orders; INSERT INTO b SELECT * FROM `*`")
    assert shadowed(plans) == []
    assert shadowed(()) == []
