"""The one secrets rule (:mod:`sink.config.secrets`): which keys are hidden, how, and by whom."""

from __future__ import annotations

import pytest

from sink.config import files, settings
from sink.config.files import parse_connector_config
from sink.config.secrets import HIDDEN, Secret, is_secret_key, mask
from sink.rest import plugins

SECRET_KEYS = [
    # Lenses S3 sink: both declared ConfigDef.Type.PASSWORD (S3CommonConfigDef)
    "connect.s3.aws.access.key",
    "connect.s3.aws.secret.key",
    "CONNECT.S3.AWS.SECRET.KEY",
    # the seed's deprecated short aliases of the two
    "aws.access.key",
    "aws.secret.key",
    # Kafka clients (SslConfigs / SaslConfigs PASSWORD keys), as consumer overrides
    "consumer.override.ssl.key.password",
    "consumer.override.ssl.keystore.password",
    "consumer.override.ssl.truststore.password",
    "consumer.override.ssl.keystore.key",
    "consumer.override.ssl.keystore.certificate.chain",
    "consumer.override.ssl.truststore.certificates",
    "consumer.override.sasl.jaas.config",
    "consumer.override.sasl.oauthbearer.assertion.private.key.passphrase",
    # librdkafka's own names
    "consumer.override.sasl.password",
    "consumer.override.ssl.key.pem",
    "consumer.override.sasl.oauthbearer.client.secret",
    # Schema Registry client keys under a converter prefix
    "value.converter.basic.auth.user.info",
    "value.converter.schema.registry.basic.auth.user.info",
    "value.converter.bearer.auth.token",
    # anything named like a secret
    "my.api.token",
    "db.password",
    "x.secret",
]

PLAIN_KEYS = [
    "name",
    "topics",
    "connect.s3.kcql",
    "connect.s3.aws.region",
    "connect.s3.aws.auth.mode",
    "connect.s3.custom.endpoint",
    "value.converter",
    "value.converter.schema.registry.url",
    "value.converter.basic.auth.credentials.source",
    "consumer.override.ssl.keystore.location",
    "consumer.override.ssl.certificate.pem",
    "consumer.override.sasl.mechanism",
    "consumer.override.session.timeout.ms",
    "tasks.max",
]


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_secret_keys_are_hidden(key: str) -> None:
    assert is_secret_key(key)
    assert mask(key, "s3cr3t-value") == HIDDEN == "[hidden]"


@pytest.mark.parametrize("key", PLAIN_KEYS)
def test_other_keys_are_shown(key: str) -> None:
    assert not is_secret_key(key)
    assert mask(key, "plain-value") == "plain-value"


def test_an_empty_secret_stays_empty() -> None:
    assert mask("connect.s3.aws.secret.key", "") == ""


def test_secret_wrapper_never_shows_its_value() -> None:
    secret = Secret("hunter2-value")
    assert secret.reveal() == "hunter2-value"
    assert "hunter2" not in repr(secret) and "hunter2" not in str(secret) and HIDDEN in repr(secret)
    assert secret == Secret("hunter2-value") and secret != Secret("other")


def test_there_is_one_copy_of_the_rule() -> None:
    """settings, files and the REST plugins use secrets.py's functions, not copies of their own."""
    assert not hasattr(settings, "SECRET_KEYS")
    assert settings.mask is mask and settings.Secret is Secret
    assert files.mask is mask  # re-exported for sink.runtime only
    assert not hasattr(files, "is_secret_key")
    assert plugins.mask is mask and plugins.is_secret_key is is_secret_key


def test_access_key_is_hidden_where_it_used_to_show() -> None:
    """files.py's old rule showed connect.s3.aws.access.key; settings.py's hid it. Now both hide it."""
    cfg = parse_connector_config(
        {"name": "n", "connect.s3.aws.access.key": "AKIAEXAMPLEKEYID", "aws.secret.key": "sekrit-value"}
    )
    assert "AKIAEXAMPLEKEYID" not in repr(cfg) and "sekrit-value" not in repr(cfg)
    infos = plugins.config_infos("S3Sink", cfg.props, [])
    shown = {c["value"]["name"]: c["value"]["value"] for c in infos["configs"]}
    assert shown["connect.s3.aws.access.key"] == HIDDEN
    assert shown["connect.s3.aws.secret.key"] == HIDDEN
