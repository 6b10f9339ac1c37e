"""Error-handling keys: Connect's errors.* and behavior.on.null.values, Lenses' connect.s3.error.policy."""

from __future__ import annotations

from sink.config.errors import ErrorSettings, parse_error_settings


def test_defaults_stop_on_bad_records_and_write_tombstones():
    settings, problems = parse_error_settings({})
    assert problems == [] and settings == ErrorSettings()
    assert not settings.tolerate_records and settings.null_values == "write" and settings.policy == "THROW"


def test_tolerance_all_with_dlq_and_context_headers():
    settings, problems = parse_error_settings(
        {
            "errors.tolerance": "ALL",
            "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
            "errors.deadletterqueue.topic.replication.factor": "3",
            "errors.log.enable": "true",
        }
    )
    assert problems == []
    assert settings.tolerate_records and settings.dlq_topic == "dlq" and settings.dlq_context_headers
    assert settings.dlq_replication_factor == 3 and settings.log_enable


def test_lenses_policies_case_insensitive_with_retry_settings():
    settings, problems = parse_error_settings(
        {
            "connect.s3.error.policy": "retry",
            "connect.s3.max.retries": "5",
            "connect.s3.retry.interval": "250",
        }
    )
    assert problems == [] and settings.policy == "RETRY" and settings.retry_storage
    assert (settings.max_retries, settings.retry_interval_ms) == (5, 250)
    noop, _ = parse_error_settings({"connect.s3.error.policy": "NOOP"})
    assert noop.tolerate_records and noop.retry_storage  # NOOP never drops data that failed to upload


def test_skip_null_values_is_ignore_and_conflicts_are_reported():
    settings, problems = parse_error_settings({"connect.s3.skip.null.values": "true"})
    assert problems == [] and settings.null_values == "ignore"
    _settings, problems = parse_error_settings(
        {"connect.s3.skip.null.values": "true", "behavior.on.null.values": "fail"}
    )
    assert [p.key for p in problems] == ["behavior.on.null.values"]


def test_every_bad_value_is_reported_at_once():
    _settings, problems = parse_error_settings(
        {
            "errors.tolerance": "most",
            "errors.log.enable": "yes",
            "errors.deadletterqueue.topic.name": "dlq",
            "behavior.on.null.values": "drop",
            "connect.s3.error.policy": "EXPLODE",
            "connect.s3.max.retries": "-1",
            "connect.s3.retry.interval": "soon",
        }
    )
    assert {p.key for p in problems} == {
        "errors.tolerance",
        "errors.log.enable",
        "errors.deadletterqueue.topic.name",  # a DLQ needs errors.tolerance=all
        "behavior.on.null.values",
        "connect.s3.error.policy",
        "connect.s3.max.retries",
        "connect.s3.retry.interval",
    }
