"""Connector class aliases, config validation and Connect's ConfigInfos / error texts."""

from __future__ import annotations

import pytest

from sink.rest.errors import RestError
from sink.rest.offsets import parse_alter_request
from sink.rest.plugins import (
    CONNECTOR_CLASS,
    config_infos,
    error_message_lines,
    resolve_class,
    validate_config,
)

GOOD = {
    "name": "n",
    "connector.class": CONNECTOR_CLASS,
    "topics": "t",
    "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM t",
    "connect.storage": "local",
    "connect.local.root": "/tmp/x",
}


@pytest.mark.parametrize("name", [CONNECTOR_CLASS, "S3SinkConnector", "S3Sink", " S3Sink "])
def test_aliases_resolve(name):
    assert resolve_class(name) == CONNECTOR_CLASS


def test_unknown_classes_do_not_resolve():
    assert resolve_class("io.confluent.connect.jdbc.JdbcSinkConnector") is None
    assert resolve_class(None) is None


def test_a_good_config_has_no_problems():
    assert validate_config(GOOD) == []


def test_every_problem_is_listed_with_kcql_position_and_masked_secrets():
    bad = GOOD | {
        "connect.s3.kcql": "INSERT INTO b:p SELEC * FROM t",
        "tasks.max": "-1",
        "connect.storage": "s3",
        "connect.s3.aws.auth.mode": "Credentials",
        "connect.s3.aws.secret.key": "sekrit",
        "extra": None,
    }
    problems = validate_config(bad)
    keys = [p.key for p in problems]
    assert "connect.s3.kcql" in keys and "tasks.max" in keys and "connect.s3.aws.access.key" in keys
    assert "extra" in keys  # JSON null
    kcql = next(p for p in problems if p.key == "connect.s3.kcql")
    assert "line 1, column" in kcql.why
    assert keys.count("connect.s3.kcql") == 1  # the runtime's re-check is not reported twice
    text = error_message_lines(problems)
    assert text.startswith(
        f"Connector configuration is invalid and contains the following {len(problems)} error(s):\n"
    )
    assert "sekrit" not in text


def test_config_infos_shape():
    config = GOOD | {"connect.s3.aws.secret.key": "sekrit", "custom.key": "v"}
    infos = config_infos("S3Sink", config, validate_config(config))
    assert infos["name"] == "S3Sink" and infos["error_count"] == 0
    assert {"Common", "S3"} <= set(infos["groups"])
    by_key = {c["value"]["name"]: c for c in infos["configs"]}
    assert by_key["connect.s3.aws.secret.key"]["value"]["value"] == "[hidden]"
    assert by_key["custom.key"]["value"]["value"] == "v"
    definition = by_key["connect.s3.kcql"]["definition"]
    assert set(definition) >= {
        "name",
        "type",
        "required",
        "default_value",
        "importance",
        "documentation",
        "group",
        "width",
        "display_name",
        "dependents",
        "order",
    }
    missing = config_infos("S3Sink", {"connector.class": "S3Sink"}, [])
    kcql = {c["value"]["name"]: c for c in missing["configs"]}["connect.s3.kcql"]
    assert kcql["value"]["errors"] == [
        'Missing required configuration "connect.s3.kcql" which has no default value.'
    ]


def test_offsets_patch_body_parsing():
    body = {
        "offsets": [
            {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": "10"}},
            {"partition": {"kafka_topic": "t", "kafka_partition": "1"}, "offset": None},
        ]
    }
    assert parse_alter_request(body) == [("t", 0, 10), ("t", 1, None)]
    for bad in (
        {},
        {"offsets": []},
        {"offsets": [{"partition": {"kafka_topic": "t"}}]},
        {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"x": 1}}]},
        {
            "offsets": [
                {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": -1}}
            ]
        },
        *(  # out of Kafka's ranges, or not a topic name: 400s (librdkafka raised them as 500s)
            {"offsets": [{"partition": {"kafka_topic": topic, "kafka_partition": part}, "offset": offset}]}
            for topic, part, offset in (
                ("t", 2**31, None),
                ("t", -1, None),
                ("t", 0, {"kafka_offset": 2**63}),
                ("a\x00b", 0, None),
                ("", 0, None),
                ("..", 0, None),
                ("x" * 250, 0, None),
            )
        ),
    ):
        with pytest.raises(RestError) as info:
            parse_alter_request(bad)
        assert info.value.status == 400


def test_converter_problems_are_reported_once():
    problems = validate_config(GOOD | {"value.converter": "io.confluent.connect.avro.AvroConverter"})
    assert [p.key for p in problems] == ["value.converter"]
    assert "schema.registry.url" in problems[0].why
