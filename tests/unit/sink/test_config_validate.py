"""The one config validation (:func:`sink.config.validate.validate`): its rules, that it lists every
problem at once, that no secret value ever leaves it, and that it builds no client and opens no
socket."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from kcql.errors import ConfigError
from sink.config.consumer_overrides import SENTINEL, consumer_override_problems
from sink.config.secrets import HIDDEN
from sink.config.validate import MAX_TASKS, TASKS_MAX_RULE, parse_tasks_max, validate
from sink.records.converters import JsonConverter, build_converter, record_converter

GOOD = {
    "name": "orders-sink",
    "connector.class": "S3SinkConnector",
    "topics": "orders",
    "connect.s3.kcql": "INSERT INTO lake:orders SELECT * FROM orders STOREAS `JSON`",
    "connect.storage": "local",
    "connect.local.root": "/tmp/kcql-validate-unused",
}

SECRET = "Validate-Secret-Canary-7a1f"


def keys(props: dict[str, str]) -> list[str]:
    return [p.key for p in validate(props)]


def test_a_good_config_has_no_problem() -> None:
    assert validate(GOOD) == []


def test_every_problem_of_every_section_at_once() -> None:
    problems = validate(
        GOOD
        | {
            "connect.storage": "ftp",  # settings
            "topics": "orders,returns",  # subscription: returns has no statement
            "errors.tolerance": "sometimes",  # error settings
            "connect.s3.max.retries": "-1",  # retry settings
            "value.converter": "com.example.Nope",  # converters
            "tasks.max": "0",
            "consumer.override.session.timeout.ms": "abc",
        }
    )
    assert [p.key for p in problems] == [
        "connect.storage",
        "errors.tolerance",
        "connect.s3.max.retries",
        "value.converter",
        "tasks.max",
        "topics",
        "consumer.override.session.timeout.ms",
    ]
    assert "Can't find the KCQL for source topic [returns]" in problems[5].why
    assert problems[6].why.startswith("librdkafka rejects it:") and "session.timeout.ms" in problems[6].why


def test_a_kcql_error_keeps_its_position_and_is_reported_once() -> None:
    problems = validate(GOOD | {"connect.s3.kcql": "INSERT INTO lake:orders SELEC * FROM orders"})
    assert [p.key for p in problems] == ["connect.s3.kcql"]
    assert "line 1, column" in problems[0].why and "^" in problems[0].why


def test_required_keys_and_the_name() -> None:
    problems = validate({"connect.storage": "local", "connect.local.root": "/tmp/x"})
    assert {p.key for p in problems} == {"name", "connect.s3.kcql"}
    assert "consumer group connect-<name>" in next(p.why for p in problems if p.key == "name")


def test_s3_bucket_names_are_checked_without_storage() -> None:
    props = GOOD | {
        "connect.storage": "s3",
        "connect.s3.kcql": "INSERT INTO Bad_Bucket:p SELECT * FROM orders",
    }
    problems = validate(props)
    assert [p.key for p in problems] == ["connect.s3.kcql"] and "Bad_Bucket" in problems[0].why


def test_staging_inside_the_local_root_is_refused(tmp_path: Path) -> None:
    props = GOOD | {
        "connect.local.root": str(tmp_path),
        "connect.s3.local.tmp.directory": str(tmp_path / "stage"),
    }
    assert keys(props) == ["connect.s3.local.tmp.directory"]


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", 1), (" 3 ", 3), ("+2", 2), ("0256", 256), (str(MAX_TASKS), MAX_TASKS)]
)
def test_tasks_max_valid(raw: str, expected: int) -> None:
    assert parse_tasks_max({"tasks.max": raw}) == (expected, [])
    assert validate(GOOD | {"tasks.max": raw}) == []


@pytest.mark.parametrize(
    "raw",
    [
        "0",
        "-1",
        str(MAX_TASKS + 1),
        "99999999999999999999",  # forked ~500 processes once (docs/reliability.md)
        "9" * 5000,  # int() refuses more than 4,300 digits: a 500 from the worker before
        "²",  # str.isdigit() says yes, int() says no: a 500 from the worker before
        "٣",  # int() reads 3: the CLI accepted it before
        "1_0",  # int() reads 10: the CLI accepted it before
        "1.5",
        "several",
        "",
    ],
)
def test_tasks_max_invalid_is_one_problem_with_one_rule(raw: str) -> None:
    assert parse_tasks_max({"tasks.max": raw}) == (1, [("tasks.max", raw, TASKS_MAX_RULE)])
    assert validate(GOOD | {"tasks.max": raw}) == [("tasks.max", raw, TASKS_MAX_RULE)]


def test_tasks_max_defaults_to_one() -> None:
    assert parse_tasks_max({}) == (1, [])


@pytest.mark.parametrize(
    ("key", "raw", "ok"),
    [
        ("connect.s3.max.retries", "0", True),
        ("connect.s3.max.retries", " 20 ", True),
        ("connect.s3.max.retries", "2147483647", True),
        ("connect.s3.max.retries", "2147483648", False),  # Lenses declares it INT
        ("connect.s3.max.retries", "-1", False),
        ("connect.s3.max.retries", "1_000", False),
        ("connect.s3.max.retries", "lots", False),
        ("connect.s3.retry.interval", "60000", True),
        ("connect.s3.retry.interval", "-5", False),
        ("connect.s3.retry.interval", "1" * 30, False),  # time.sleep() would overflow
        ("connect.s3.error.policy", "retry", True),
        ("connect.s3.error.policy", "NOOP", True),
        ("connect.s3.error.policy", "PANIC", False),
    ],
)
def test_retry_settings_one_rule(key: str, raw: str, ok: bool) -> None:
    assert keys(GOOD | {key: raw}) == ([] if ok else [key])


def test_consumer_overrides_every_bad_one_is_named() -> None:
    problems = validate(
        GOOD
        | {
            "consumer.override.max.poll.interval.ms": "600000",
            "consumer.override.session.timeout.ms": "abc",
            "consumer.override.auto.offset.reset": "sideways",
            "consumer.override.no.such.property": "1",
            "consumer.override.error_cb": "not-callable",
        }
    )
    assert [p.key for p in problems] == [
        "consumer.override.session.timeout.ms",
        "consumer.override.auto.offset.reset",
        "consumer.override.no.such.property",
        "consumer.override.error_cb",
    ]
    assert all(SENTINEL not in p.why for p in problems)


def test_good_consumer_overrides_pass() -> None:
    assert consumer_override_problems({"consumer.override.max.poll.interval.ms": "600000"}) == []
    assert consumer_override_problems({"consumer.override.group.id": "another"}) == []


def test_plugin_libraries_are_never_loaded(tmp_path: Path) -> None:
    """librdkafka would dlopen plugin.library.paths while parsing; validation must not load code."""
    library = tmp_path / "not-a-library.so"
    library.write_text("not an ELF file")  # a dlopen attempt would fail and be reported
    props = {"consumer.override.plugin.library.paths": str(library), "consumer.override.interceptor.x": "1"}
    assert consumer_override_problems(props) == []
    bad = props | {"consumer.override.session.timeout.ms": "abc"}
    assert [p.key for p in consumer_override_problems(bad)] == ["consumer.override.session.timeout.ms"]


# --- secrets -------------------------------------------------------------------------------------


def test_no_secret_value_ever_appears_in_the_problems() -> None:
    props = GOOD | {
        "connect.storage": "s3",
        "connect.s3.aws.auth.mode": "Credentials",
        "connect.s3.aws.secret.key": SECRET,  # and no access key: a problem about the pair
        "aws.secret.key": SECRET + "-other",  # the same setting twice: a problem naming both keys
        "consumer.override.ssl.key.password": SECRET,
        "consumer.override.sasl.jaas.config": f'PlainLoginModule required password="{SECRET}";',
        "consumer.override.sasl.password": SECRET + "-sasl",
        "value.converter": "io.confluent.connect.avro.AvroConverter",  # no registry url: a problem
        "value.converter.basic.auth.user.info": f"user:{SECRET}",
        "errors.tolerance": SECRET,  # a secret pasted into a plain key is scrubbed too
        "tasks.max": SECRET,
    }
    problems = validate(props)
    assert {"connect.s3.aws.access.key", "aws.secret.key", "consumer.override.sasl.jaas.config"} <= {
        p.key for p in problems
    }
    assert {"value.converter", "errors.tolerance", "tasks.max"} <= {p.key for p in problems}
    shown = str(ConfigError(problems)) + repr(problems)
    assert SECRET not in shown and HIDDEN in shown
    jaas = next(p for p in problems if p.key == "consumer.override.sasl.jaas.config")
    assert jaas.value == HIDDEN


# --- no client, no thread, no socket ---------------------------------------------------------------


def native_threads() -> int:
    """Threads of this process, librdkafka's C threads included (threading only sees Python's)."""
    return len(os.listdir("/proc/self/task"))


def test_validate_builds_no_client_and_opens_no_socket(monkeypatch: pytest.MonkeyPatch) -> None:
    props = GOOD | {
        "connect.storage": "s3",
        "connect.s3.custom.endpoint": "http://127.0.0.1:9",
        "connect.s3.aws.auth.mode": "Credentials",
        "connect.s3.aws.access.key": "AKIAEXAMPLE",
        "connect.s3.aws.secret.key": SECRET,
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": "http://127.0.0.1:9",
        "bootstrap.servers": "127.0.0.1:9",
        "consumer.override.max.poll.interval.ms": "600000",
        "consumer.override.session.timeout.ms": "abc",
    }
    # the detector works: a real consumer starts librdkafka threads
    before = native_threads()
    consumer = Consumer({"group.id": "probe", "bootstrap.servers": "127.0.0.1:9", "log_level": "0"})
    try:
        assert native_threads() > before
    finally:
        consumer.close()

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("validate() opened a connection")

    def no_client(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("validate() built a client")

    import boto3.session
    import confluent_kafka.schema_registry

    from sink.config import consumer_overrides

    # librdkafka's threads come and go with a client that is closed at once, and its sockets are
    # not Python's: so every Consumer(...) validation asks for must fail before it exists
    attempts: list[list[str]] = []
    real_consumer = consumer_overrides.Consumer

    def consumer_spy(conf: dict[str, str]) -> object:
        attempts.append(list(conf))
        client = real_consumer(conf)
        client.close()
        raise AssertionError("validate() created a Kafka client")

    monkeypatch.setattr(consumer_overrides, "Consumer", consumer_spy)
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(boto3.session.Session, "client", no_client)
    monkeypatch.setattr(confluent_kafka.schema_registry.SchemaRegistryClient, "__init__", no_client)
    python_threads, threads = threading.active_count(), native_threads()
    problems = validate(props)
    assert [p.key for p in problems] == ["consumer.override.session.timeout.ms"]
    assert threading.active_count() == python_threads
    assert native_threads() == threads
    assert attempts and all(conf[-1] == SENTINEL for conf in attempts)


# --- converters: validate and the converter builders agree -----------------------------------------

PADDED = " org.apache.kafka.connect.json.JsonConverter "


def test_padded_converter_class_is_valid() -> None:
    assert validate(GOOD | {"value.converter": PADDED}) == []


def test_padded_converter_class_builds_through_record_converter() -> None:
    assert isinstance(record_converter(GOOD | {"value.converter": PADDED}).value, JsonConverter)


def test_padded_converter_class_builds_through_build_converter() -> None:
    """validate() accepts the padded class name, so build_converter must build it too.

    Fails until sink.records.converters.build_converter strips the class name (the runtime
    calls it with the raw value, so such a config passes validation and then fails to start).
    """
    props = GOOD | {"value.converter": PADDED}
    assert isinstance(build_converter(PADDED, props, "value.converter"), JsonConverter)


@pytest.mark.parametrize(
    ("key", "raw", "ok"),
    [
        ("connect.s3.max.open.writers", "1_000", False),
        ("connect.s3.max.open.writers", "0", False),
        ("connect.s3.max.open.writers", " 64 ", True),
        ("connect.s3.local.tmp.max.bytes", "10737418240", True),  # a LONG: beyond Java's int
        ("connect.s3.local.tmp.max.bytes", "9" * 5000, False),
        ("connect.s3.compression.level", "-1", True),
    ],
)
def test_settings_whole_numbers_follow_the_same_rule(key: str, raw: str, ok: bool) -> None:
    assert keys(GOOD | {key: raw}) == ([] if ok else [key])


def test_connector_wide_padding_keys() -> None:
    left = {"connect.s3.padding.strategy": "LeftPad"}
    assert validate(GOOD | left | {"connect.s3.padding.length": "-1"}) == []
    assert keys(GOOD | {"connect.s3.padding.strategy": "Sideways"}) == ["connect.s3.padding.strategy"]
    assert keys(GOOD | left | {"connect.s3.padding.length": "9999"}) == ["connect.s3.padding.length"]
    both = GOOD | {
        "connect.s3.padding.strategy": "LeftPad",
        "connect.s3.kcql": (
            "INSERT INTO lake:orders SELECT * FROM orders PROPERTIES('padding.length.offset'=3)"
        ),
    }
    (problem,) = validate(both)
    assert problem.key == "connect.s3.padding.strategy" and "Unable to process both padding" in problem.why
