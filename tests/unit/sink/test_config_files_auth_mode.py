"""Seed-era aws.auth.mode values (EC2, ECS, Env) map to Default; Credentials/Default pass as they are."""

from __future__ import annotations

import pytest

from sink.config.files import normalise_aliases, parse_connector_config
from sink.config.settings import parse_settings


@pytest.mark.parametrize("mode", ["EC2", "ECS", "Env", "env"])
def test_credential_chain_modes_become_default(mode):
    props, warnings, problems = normalise_aliases({"aws.auth.mode": mode})
    assert problems == [] and props["connect.s3.aws.auth.mode"] == "Default"
    assert any("connect.s3.aws.auth.mode" in w for w in warnings)
    assert any(f"aws.auth.mode {mode} is deprecated" in w for w in warnings)


@pytest.mark.parametrize("mode", ["Credentials", "Default"])
def test_current_modes_are_kept(mode):
    props, _warnings, problems = normalise_aliases({"aws.auth.mode": mode})
    assert problems == [] and props["connect.s3.aws.auth.mode"] == mode


def test_seed_modes_pass_the_storage_settings():
    cfg = parse_connector_config(
        {"name": "n", "config": {"aws.auth.mode": "EC2", "aws.region": "eu-west-1", "connect.s3.kcql": "x"}}
    )
    settings = parse_settings(cfg.props)
    assert settings.storage.s3.auth_mode == "Default"
