"""Topics vs KCQL sources (:mod:`sink.config.subscription`), as validation and the runtime see them."""

from __future__ import annotations

import kcql
from sink.config.subscription import missing_kcql_message, resolve_subscription

LENSES = (
    "Can't find the KCQL for source topic [b]. The topics defined via [topics] or [topics.regex] "
    "need to have an equivalent KCQL statement: INSERT INTO {DESTINATION} SELECT * FROM {TOPIC}."
)


def test_the_missing_statement_message_is_lenses_own() -> None:
    assert missing_kcql_message("b") == LENSES


def test_every_topic_needs_a_statement() -> None:
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a")
    assert resolve_subscription({"topics": " a , b "}, plans) == (["a", "b"], [("topics", " a , b ", LENSES)])


def test_star_covers_every_named_topic_but_needs_them_named() -> None:
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM `*`")
    assert resolve_subscription({"topics": "x,y"}, plans) == (["x", "y"], [])
    topics, problems = resolve_subscription({}, plans)
    assert topics == [] and [p.key for p in problems] == ["topics"] and "`*`" in problems[0].why


def test_without_topics_the_sources_are_subscribed_and_a_regex_is_anchored() -> None:
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a; INSERT INTO b:q SELECT * FROM c")
    assert resolve_subscription({}, plans) == (["a", "c"], [])
    assert resolve_subscription({"topics.regex": "a|c"}, plans) == (["^a|c"], [])
    assert resolve_subscription({"topics.regex": "^a"}, plans) == (["^a"], [])


def test_topics_with_regex_and_a_bad_regex_are_both_reported() -> None:
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a")
    _topics, problems = resolve_subscription({"topics": "a", "topics.regex": "a("}, plans)
    assert [p.key for p in problems] == ["topics.regex", "topics.regex"]
    assert problems[0].why == "set either topics or topics.regex, not both"
    assert problems[1].why.startswith("not a valid regular expression")
