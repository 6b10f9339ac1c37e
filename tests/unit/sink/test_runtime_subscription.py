"""Runtime set-up without a broker: consumer settings, config problems, runs of a consumed batch.

(Topics against KCQL sources: tests/unit/sink/test_config_subscription.py.)
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from confluent_kafka import Message

from kcql.errors import ConfigError
from sink.config.files import parse_connector_config
from sink.runtime.consumer import consumer_config
from sink.runtime.loop import RuntimeOptions, SinkRuntime, _runs


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
    local = {"connect.storage": "local", "connect.local.root": "/tmp/unused"}
    cfg = parse_connector_config({"name": "n", "config": {"connect.s3.kcql": statements, **local, **props}})
    runtime = SinkRuntime(cfg, RuntimeOptions("h:9092"), task_factory=lambda _observer: SimpleNamespace())
    assert runtime._one_topic is one_topic


def test_the_runtime_names_a_shadowed_statement_when_it_starts(caplog: pytest.LogCaptureFixture):
    statements = (
        "INSERT INTO b:json SELECT * FROM a STOREAS JSON; INSERT INTO b:pq SELECT * FROM a STOREAS PARQUET"
    )
    local = {"connect.storage": "local", "connect.local.root": "/tmp/unused"}
    cfg = parse_connector_config({"name": "n", "config": {"connect.s3.kcql": statements, **local}})
    with caplog.at_level("WARNING", logger="sink.runtime.loop"):
        SinkRuntime(cfg, RuntimeOptions("h:9092"), task_factory=lambda _observer: SimpleNamespace())
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "statement 2" in warning and "statement 1" in warning and "'a'" in warning
