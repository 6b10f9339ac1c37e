"""Connector config files: Connect JSON, flat JSON, .properties, deprecated aliases, secrets."""

from __future__ import annotations

import json
import logging

import pytest

from kcql.errors import ConfigError
from sink.config.files import load_connector_config, parse_properties

SEED_S3_JSON = {
    "name": "lenses-s3-sink",
    "config": {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "tasks.max": "1",
        "topics": "orders",
        "connect.s3.kcql": (
            "INSERT INTO bucket:prefix SELECT * FROM orders STOREAS `AVRO` WITH_FLUSH_COUNT = 5000"
        ),
        "aws.region": "eu-west-1",
        "aws.access.key": "AKIA-EXAMPLE",
        "aws.secret.key": "very-secret-value",
        "aws.auth.mode": "Credentials",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://localhost:8081",
    },
}


def test_seed_connect_json_maps_aliases_with_a_warning(tmp_path, caplog):
    path = tmp_path / "s3.json"
    path.write_text(json.dumps(SEED_S3_JSON))
    with caplog.at_level(logging.WARNING):
        cfg = load_connector_config(path)
    assert cfg.name == "lenses-s3-sink"
    assert cfg.props["connect.s3.aws.secret.key"] == "very-secret-value"
    assert cfg.props["connect.s3.aws.auth.mode"] == "Credentials"
    assert "aws.region" not in cfg.props
    assert any("aws.access.key is deprecated: use connect.s3.aws.access.key" in w for w in cfg.warnings)
    assert "very-secret-value" not in repr(cfg)
    assert "very-secret-value" not in caplog.text


def test_flat_json_and_properties_give_the_same_config(tmp_path):
    flat = {"name": "c1", "topics": "t", "connect.s3.kcql": "INSERT INTO b SELECT * FROM t", "tasks.max": 2}
    (tmp_path / "c.json").write_text(json.dumps(flat))
    (tmp_path / "c.properties").write_text(
        "# comment\nname = c1\ntopics: t\n"
        "connect.s3.kcql=INSERT INTO b \\\n    SELECT * FROM t\ntasks.max 2\n"
    )
    assert (
        load_connector_config(tmp_path / "c.json").props
        == load_connector_config(tmp_path / "c.properties").props
    )


def test_conflicting_alias_and_missing_name_are_all_reported(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(
        json.dumps(
            {
                "config": {
                    "aws.secret.key": "s1",
                    "connect.s3.aws.secret.key": "s2",
                    "aws.region": "a",
                    "connect.s3.aws.region": "b",
                }
            }
        )
    )
    with pytest.raises(ConfigError) as err:
        load_connector_config(path)
    keys = [p.key for p in err.value.problems]
    assert keys == ["name", "aws.region", "aws.secret.key"]
    assert "s1" not in str(err.value) and "s2" not in str(err.value)
    assert "keep only connect.s3.aws.region" in str(err.value)


def test_same_value_both_ways_is_fine(tmp_path):
    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"name": "n", "aws.region": "x", "connect.s3.aws.region": "x"}))
    assert load_connector_config(path).props["connect.s3.aws.region"] == "x"


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (
            "{not json",
            "not valid JSON: Expecting property name enclosed in double quotes at line 1, column 2",
        ),
        ("[1, 2]", "expected a JSON object"),
        ('{"name": "n", "config": {"k": {"nested": 1}}}', "values must be strings"),
    ],
)
def test_malformed_files_are_named_errors(tmp_path, content, why):
    path = tmp_path / "x.json"
    path.write_text(content)
    with pytest.raises(ConfigError, match=why):
        load_connector_config(path)


def test_missing_file():
    with pytest.raises(ConfigError, match="cannot read the file"):
        load_connector_config("/nonexistent/s3.json")


def test_properties_escapes_and_separators():
    assert parse_properties("a\\=b=c\nkey\\ x : v\\tw\n!c\n") == {"a=b": "c", "key x": "v\tw"}
