"""Connector settings: defaults, Lenses key semantics, every problem reported at once, secrets masked."""

from __future__ import annotations

from pathlib import Path

import pytest

from kcql.errors import ConfigError
from sink.config.secrets import Secret
from sink.config.settings import DEFAULT_MAX_OPEN_WRITERS, parse_settings

BASE = {"name": "conn", "connect.s3.kcql": "INSERT INTO b SELECT * FROM t"}


def test_defaults() -> None:
    s = parse_settings(BASE)
    assert s.name == "conn"
    assert s.storage.kind == "s3"
    assert s.storage.s3.auth_mode == "Default"
    assert s.storage.s3.path_style is False
    assert s.storage.s3.max_retries == 5
    assert s.exactly_once.enabled is True
    assert s.exactly_once.indexes_name == ".indexes"
    assert s.writers.max_open_writers == DEFAULT_MAX_OPEN_WRITERS
    assert s.writers.staging_dir is None


def test_local_and_keys_are_case_insensitive() -> None:
    s = parse_settings(BASE | {
        "CONNECT.STORAGE": "LOCAL", "connect.local.root": "/data",
        "connect.s3.local.tmp.directory": "/stage", "connect.s3.max.open.writers": "7",
    })
    assert s.storage.kind == "local"
    assert s.storage.local_root == Path("/data")
    assert s.writers.staging_dir == Path("/stage")
    assert s.writers.max_open_writers == 7


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        ({}, False),
        ({"connect.s3.vhost.bucket": "true"}, True),  # Lenses: the inverted, deprecated key
        ({"connect.s3.vhost.bucket": "true", "connect.s3.path.style.access": "false"}, False),
        ({"connect.s3.path.style.access": "true"}, True),
    ],
)
def test_path_style(props: dict[str, str], expected: bool) -> None:
    assert parse_settings(BASE | props).storage.s3.path_style is expected


def test_every_problem_at_once_with_secrets_masked() -> None:
    with pytest.raises(ConfigError) as err:
        parse_settings({
            "connect.storage": "ftp",
            "connect.s3.aws.auth.mode": "Credentials",
            "connect.s3.aws.secret.key": "hunter2-very-secret",
            "connect.s3.http.max.retries": "many",
            "connect.s3.exactly.once.enable": "yes",
            "connect.s3.indexes.name": "indexes",
            "connect.s3.custom.endpoint": "localhost:9000",
        })
    keys = {p.key for p in err.value.problems}
    assert keys == {
        "name", "connect.s3.kcql", "connect.storage", "connect.s3.http.max.retries",
        "connect.s3.exactly.once.enable", "connect.s3.indexes.name", "connect.s3.custom.endpoint",
        "connect.s3.aws.access.key",
    }
    assert "hunter2" not in str(err.value)


def test_local_needs_root() -> None:
    with pytest.raises(ConfigError, match=r"connect\.local\.root"):
        parse_settings(BASE | {"connect.storage": "local"})


def test_secret_never_shows() -> None:
    s = parse_settings(BASE | {
        "connect.s3.aws.auth.mode": "credentials", "connect.s3.aws.access.key": "AKIA1",
        "connect.s3.aws.secret.key": "topsecret",
    })
    assert s.storage.s3.auth_mode == "Credentials"
    assert isinstance(s.storage.s3.secret_key, Secret)
    assert s.storage.s3.secret_key.reveal() == "topsecret"
    assert "topsecret" not in repr(s)
    assert "topsecret" not in str(s.storage.s3.secret_key)


def test_commit_protocol() -> None:
    assert parse_settings(BASE).exactly_once.commit_protocol == "auto"
    copy = parse_settings(BASE | {"connect.s3.commit.protocol": "COPY"})
    assert copy.exactly_once.commit_protocol == "copy"
    with pytest.raises(ConfigError, match=r"commit\.protocol.*must be one of auto, conditional, copy"):
        parse_settings(BASE | {"connect.s3.commit.protocol": "fast"})
    weak = {"connect.s3.conditional.writes": "false"}
    assert parse_settings(BASE | weak).exactly_once.commit_protocol == "auto"  # copy, at run time
    with pytest.raises(ConfigError, match=r"commit\.protocol.*needs conditional writes"):
        parse_settings(BASE | weak | {"connect.s3.commit.protocol": "conditional"})
