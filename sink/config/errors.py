"""What happens to a record that cannot be written: Connect's error handling, plus Lenses' policy.

Two families of settings meet here, and we accept both because users' configs have both:

* Kafka Connect (record-level): ``errors.tolerance`` none|all, ``errors.log.enable``,
  ``errors.log.include.messages``, ``errors.deadletterqueue.topic.name``,
  ``errors.deadletterqueue.context.headers.enable``, ``errors.deadletterqueue.topic.replication.factor``;
  Confluent's ``behavior.on.null.values`` ignore|write|fail (and Lenses'
  ``connect.s3.skip.null.values=true`` as ``ignore``).
* Lenses (storage-level): ``connect.s3.error.policy`` THROW|NOOP|RETRY with ``connect.s3.max.retries``
  and ``connect.s3.retry.interval`` (ms). RETRY rewinds the affected partitions to their last commit
  and tries again after the interval, up to the maximum; THROW stops the task at the first storage
  error. NOOP means "do not stop on a bad record" (as ``errors.tolerance=all`` without a DLQ); it never
  drops data that failed to upload, which would break the exactly-once promise, so storage errors
  under NOOP are retried like RETRY.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from kcql.errors import ConfigProblem
from sink.config.whole_numbers import JAVA_INT_MAX, parse_whole_number

__all__ = ["ErrorSettings", "parse_error_settings"]


@dataclass(frozen=True, slots=True)
class ErrorSettings:
    tolerance: Literal["none", "all"] = "none"
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str | None = None
    dlq_context_headers: bool = False
    dlq_replication_factor: int = -1
    null_values: Literal["ignore", "write", "fail"] = "write"
    """Lenses writes tombstones (``connect.s3.skip.null.values=false``), so that is the default."""
    policy: Literal["THROW", "NOOP", "RETRY"] = "THROW"
    max_retries: int = 20
    retry_interval_ms: int = 60_000

    @property
    def tolerate_records(self) -> bool:
        """Bad records are reported and skipped instead of stopping the task."""
        return self.tolerance == "all" or self.policy == "NOOP"

    @property
    def retry_storage(self) -> bool:
        return self.policy in ("RETRY", "NOOP")


def _bool(props: Mapping[str, str], key: str, default: bool, problems: list[ConfigProblem]) -> bool:
    raw = props.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        problems.append(ConfigProblem(key, raw, "must be true or false"))
        return default
    return value == "true"


def _int(
    props: Mapping[str, str], key: str, default: int, problems: list[ConfigProblem], minimum: int
) -> int:
    """A Connect ``INT`` key: a whole number from ``minimum`` to Java's ``Integer.MAX_VALUE``."""
    raw = props.get(key)
    if raw is None:
        return default
    try:
        return parse_whole_number(raw, minimum=minimum, maximum=JAVA_INT_MAX)
    except ValueError as exc:
        problems.append(ConfigProblem(key, raw, str(exc)))
        return default


def _choice(
    props: Mapping[str, str],
    key: str,
    default: str,
    choices: tuple[str, ...],
    problems: list[ConfigProblem],
    upper: bool = False,
) -> str:
    raw = props.get(key)
    if raw is None:
        return default
    value = raw.strip().upper() if upper else raw.strip().lower()
    if value not in choices:
        problems.append(ConfigProblem(key, raw, f"must be one of {', '.join(choices)}"))
        return default
    return value


def parse_error_settings(props: Mapping[str, str]) -> tuple[ErrorSettings, list[ConfigProblem]]:
    """Typed error settings and every problem found (for the connector's single ConfigError)."""
    problems: list[ConfigProblem] = []
    null_default = "ignore" if _bool(props, "connect.s3.skip.null.values", False, problems) else "write"
    if "behavior.on.null.values" in props and "connect.s3.skip.null.values" in props:
        given = props["behavior.on.null.values"].strip().lower()
        if given != null_default:
            problems.append(
                ConfigProblem(
                    "behavior.on.null.values",
                    props["behavior.on.null.values"],
                    f"conflicts with connect.s3.skip.null.values={props['connect.s3.skip.null.values']}",
                )
            )
    dlq = (props.get("errors.deadletterqueue.topic.name") or "").strip() or None
    tolerance = _choice(props, "errors.tolerance", "none", ("none", "all"), problems)
    if dlq and tolerance != "all":
        problems.append(
            ConfigProblem(
                "errors.deadletterqueue.topic.name",
                dlq,
                "a dead-letter queue needs errors.tolerance=all (as in Kafka Connect)",
            )
        )
    settings = ErrorSettings(
        tolerance=tolerance,  # type: ignore[arg-type]
        log_enable=_bool(props, "errors.log.enable", False, problems),
        log_include_messages=_bool(props, "errors.log.include.messages", False, problems),
        dlq_topic=dlq,
        dlq_context_headers=_bool(props, "errors.deadletterqueue.context.headers.enable", False, problems),
        dlq_replication_factor=_int(
            props, "errors.deadletterqueue.topic.replication.factor", -1, problems, -1
        ),
        null_values=_choice(
            props,
            "behavior.on.null.values",
            null_default,  # type: ignore[arg-type]
            ("ignore", "write", "fail"),
            problems,
        ),
        policy=_choice(
            props,
            "connect.s3.error.policy",
            "THROW",
            ("THROW", "NOOP", "RETRY"),  # type: ignore[arg-type]
            problems,
            upper=True,
        ),
        max_retries=_int(props, "connect.s3.max.retries", 20, problems, 0),
        retry_interval_ms=_int(props, "connect.s3.retry.interval", 60_000, problems, 0),
    )
    return settings, problems
