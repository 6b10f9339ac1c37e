"""Runtime set-up without a broker: topics vs KCQL sources, consumer settings, config problems."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import Message

import kcql
from kcql.errors import ConfigError
from sink.config.files import parse_connector_config
from sink.runtime.loop import RuntimeOptions, SinkRuntime, _runs, consumer_config, resolve_subscription

MISSING = "Can't find the KCQL for source topic [{}]. The topics defined via [topics] or [topics.regex]"


def test_every_topic_needs_a_statement_with_the_lenses_message():
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a")
    topics, problems = resolve_subscription({"topics": "a, b"}, plans)
    assert topics == ["a", "b"]
    assert [p.key for p in problems] == ["topics"] and MISSING.format("b") in problems[0].why


def test_star_statement_covers_every_topic_but_needs_topics_named():
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM `*`")
    assert resolve_subscription({"topics": "x,y"}, plans) == (["x", "y"], [])
    _topics, problems = resolve_subscription({}, plans)
    assert [p.key for p in problems] == ["topics"]


def test_topics_default_to_the_kcql_sources_and_regex_is_anchored():
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a; INSERT INTO b:q SELECT * FROM c")
    assert resolve_subscription({}, plans) == (["a", "c"], [])
    assert resolve_subscription({"topics.regex": "a|c"}, plans) == (["^a|c"], [])


def test_topics_and_regex_together_and_a_bad_regex_are_problems():
    plans = kcql.parse("INSERT INTO b:p SELECT * FROM a")
    _t, problems = resolve_subscription({"topics": "a", "topics.regex": "a("}, plans)
    assert {p.why.split(":")[0] for p in problems} == {
        "set either topics or topics.regex, not both",
        "not a valid regular expression",
    }


def test_consumer_uses_the_connect_group_manual_commits_and_overrides():
    cfg = parse_connector_config(
        {"name": "orders-archive", "config": {"consumer.override.max.poll.interval.ms": "600000"}}
    )
    conf = consumer_config(cfg, "h:9092")
    assert conf["group.id"] == "connect-orders-archive"
    assert conf["enable.auto.commit"] is False and conf["group.protocol"] == "classic"
    assert conf["auto.offset.reset"] == "earliest" and conf["max.poll.interval.ms"] == "600000"


def test_runtime_reports_kcql_converter_error_and_topic_problems_together():
    cfg = parse_connector_config(
        {
            "name": "n",
            "config": {
                "topics": "a,zzz",
                "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM a",
                "key.converter": "com.example.Nope",
                "errors.tolerance": "maybe",
                "connect.s3.error.policy": "EXPLODE",
            },
        }
    )
    with pytest.raises(ConfigError) as err:
        SinkRuntime(cfg, RuntimeOptions("h:9092"), task_factory=lambda _observer: SimpleNamespace())
    keys = [p.key for p in err.value.problems]
    assert keys.count("topics") == 1
    assert {"key.converter", "errors.tolerance", "connect.s3.error.policy"} <= set(keys)


def test_a_kcql_syntax_error_is_a_config_problem_with_its_position():
    cfg = parse_connector_config(
        {"name": "n", "config": {"connect.s3.kcql": "INSERT INTO b:p SELEKT * FROM a"}}
    )
    with pytest.raises(ConfigError) as err:
        SinkRuntime(cfg, RuntimeOptions("h:9092"), task_factory=lambda _observer: SimpleNamespace())
    (problem,) = [p for p in err.value.problems if p.key == "connect.s3.kcql"]
    assert "line 1" in problem.why


def _message(topic: str, partition: int, offset: int) -> Message:
    return Message(topic=topic, partition=partition, offset=offset, value=b"{}")


def test_a_batch_splits_into_runs_of_one_topic_partition():
    # same partition number, two topics in a row: two runs, unless one topic is subscribed
    batch = [_message("a", 0, 1), _message("a", 0, 2), _message("b", 0, 7), _message("a", 1, 5)]
    runs = [(t, p, [m.offset() for m in run]) for t, p, run in _runs(batch, one_topic=False)]
    assert runs == [("a", 0, [1, 2]), ("b", 0, [7]), ("a", 1, [5])]
    single = [_message("a", 0, 1), _message("a", 0, 2), _message("a", 1, 5)]
    assert [(t, p, len(run)) for t, p, run in _runs(single, one_topic=True)] == [("a", 0, 2), ("a", 1, 1)]


ONE = "INSERT INTO b:p SELECT * FROM a"
TWO = "INSERT INTO b:p SELECT * FROM a; INSERT INTO b:q SELECT * FROM b"


@pytest.mark.parametrize(
    ("statements", "props", "one_topic"),
    [
        (ONE, {"topics": "a"}, True),
        (ONE, {}, True),  # topics default to the statements' sources
        (TWO, {"topics": "a,b"}, False),
        (TWO, {}, False),
        (ONE, {"topics.regex": "a"}, False),  # a regex may match more topics later
    ],
)
def test_runs_skip_the_topic_check_only_for_one_named_topic(
    statements: str, props: dict[str, str], one_topic: bool
):
    cfg = parse_connector_config({"name": "n", "config": {"connect.s3.kcql": statements, **props}})
    runtime = SinkRuntime(cfg, RuntimeOptions("h:9092"), task_factory=lambda _observer: SimpleNamespace())
    assert runtime._one_topic is one_topic
