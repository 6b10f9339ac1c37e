"""Connector settings: the Connect-style dotted ``dict[str, str]`` → typed, frozen dataclasses.

One dataclass per concern (storage, exactly-once, writers, ...), all built by
:func:`parse_settings`, which validates every key and reports **every** problem in one
:class:`kcql.errors.ConfigError` (secret values masked), so a user fixes their config in one round.

Adding a concern (converters, error policy, Kafka client keys): write a dataclass and a
``_parse_<concern>(reader) -> Dataclass`` function using :class:`SettingsReader`, add a field to
:class:`ConnectorSettings`, and call the parser in :func:`parse_settings`. Keys starting with
``connect.`` are matched case-insensitively (Lenses lower-cases them before parsing).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal, TypeVar

from kcql.errors import ConfigError, ConfigProblem
from kcql.model import Padding, SinkPlan
from sink.config.secrets import Secret, mask
from sink.config.whole_numbers import JAVA_INT_MAX, JAVA_LONG_MIN, parse_whole_number

__all__ = [
    "DEFAULT_INDEXES_NAME",
    "DEFAULT_MAX_OPEN_WRITERS",
    "NAME_REQUIRED",
    "ConnectorSettings",
    "ExactlyOnceSettings",
    "S3Settings",
    "SettingsReader",
    "StorageSettings",
    "WriterSettings",
    "parse_settings",
]

NAME_REQUIRED = (
    "a connector name is required (it names the consumer group connect-<name> and the exactly-once index)"
)
"""The one sentence for a missing ``name``, whether the file loader or the settings parser finds it."""

DEFAULT_INDEXES_NAME = ".indexes"
DEFAULT_MAX_OPEN_WRITERS = 500
"""Open staging files per task; each holds a file descriptor, so this stays well below ``ulimit -n``."""

T = TypeVar("T")


class SettingsReader:
    """Typed getters over the raw props that collect problems instead of raising at the first one."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props: dict[str, str] = {}
        for key, value in props.items():
            self.props[key.lower() if key.lower().startswith("connect.") else key] = (
                "" if value is None else str(value)
            )
        self.problems: list[ConfigProblem] = []

    def problem(self, key: str, value: str, why: str) -> None:
        self.problems.append(ConfigProblem(key, mask(key, value), why))

    def raw(self, key: str) -> str | None:
        value = self.props.get(key)
        return None if value is None else value.strip()

    def string(self, key: str, default: str = "", *, required: bool = False) -> str:
        value = self.raw(key)
        if not value:
            if required:
                self.problem(key, value or "", "is required")
            return default
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.raw(key)
        if not value:
            return default
        if value.lower() in ("true", "false"):
            return value.lower() == "true"
        self.problem(key, value, "must be true or false")
        return default

    def integer(self, key: str, default: int, *, minimum: int = JAVA_LONG_MIN) -> int:
        """A Connect ``LONG`` key (:func:`~sink.config.whole_numbers.parse_whole_number`)."""
        value = self.raw(key)
        if not value:
            return default
        try:
            return parse_whole_number(value, minimum=minimum)
        except ValueError as exc:
            self.problem(key, value, str(exc))
            return default

    def optional_integer(self, key: str) -> int | None:
        value = self.raw(key)
        if not value:
            return None
        try:
            return parse_whole_number(value)
        except ValueError as exc:
            self.problem(key, value, str(exc))
            return None

    def choice(self, key: str, choices: tuple[str, ...], default: str) -> str:
        """Case-insensitive choice; returns the canonical spelling from ``choices``."""
        value = self.raw(key)
        if not value:
            return default
        for option in choices:
            if option.lower() == value.lower():
                return option
        self.problem(key, value, "must be one of " + ", ".join(choices))
        return default

    def parse(self, parser: Callable[[SettingsReader], T]) -> T:
        return parser(self)


@dataclass(frozen=True, slots=True)
class S3Settings:
    """How to reach S3 (``connect.s3.*``)."""

    region: str | None = None
    auth_mode: Literal["Credentials", "Default"] = "Default"
    access_key: Secret | None = None
    secret_key: Secret | None = None
    endpoint: str | None = None
    """``connect.s3.custom.endpoint`` for S3-compatible stores (SeaweedFS, MinIO, ...)."""
    path_style: bool = False
    max_retries: int = 5
    """``connect.s3.http.max.retries``: botocore standard-mode retries (attempts = retries + 1)."""
    retry_interval_ms: int = 50
    socket_timeout_ms: int = 60_000
    connection_timeout_ms: int = 60_000
    multipart_threshold: int = 16 * 1024 * 1024
    """Files at least this large are uploaded in parts (``connect.s3.multipart.threshold``)."""
    multipart_chunk: int = 16 * 1024 * 1024
    conditional_writes: bool = True
    """``connect.s3.conditional.writes``: false for stores that reject If-Match/If-None-Match (the
    weaker mode of docs/exactly-once.md)."""


@dataclass(frozen=True, slots=True)
class StorageSettings:
    """Which backend (``connect.storage``) and its settings."""

    kind: Literal["local", "s3"] = "s3"
    local_root: Path | None = None
    s3: S3Settings = field(default_factory=S3Settings)


@dataclass(frozen=True, slots=True)
class ExactlyOnceSettings:
    """The storage-side index (``connect.s3.exactly.once.enable``, ``connect.s3.indexes.name``)."""

    enabled: bool = True
    indexes_name: str = DEFAULT_INDEXES_NAME
    commit_protocol: Literal["auto", "conditional", "copy"] = "auto"
    """``connect.s3.commit.protocol``: ``conditional`` PUTs each file straight to its final key
    with ``If-None-Match`` (3 requests per file), ``copy`` uploads to a temporary key and copies it
    (the weaker mode's protocol, 6 requests on S3), ``auto`` picks conditional when the store
    enforces conditional writes (docs/exactly-once.md)."""


@dataclass(frozen=True, slots=True)
class WriterSettings:
    """Staging files and writer limits."""

    staging_dir: Path | None = None
    """``connect.s3.local.tmp.directory``; ``None`` → a fresh temporary directory per task."""
    max_open_writers: int = DEFAULT_MAX_OPEN_WRITERS
    """``connect.s3.max.open.writers``: the least recently used writer is committed beyond this."""
    compression_codec: str | None = None
    compression_level: int | None = None
    staging_max_bytes: int | None = None
    """``connect.s3.local.tmp.max.bytes``: when the open staging files together exceed this after a
    ``put``, the largest are committed early until they are under three quarters of it. ``None``:
    no limit beyond ``max.open.writers`` x ``flush.size``."""


@dataclass(frozen=True, slots=True)
class ConnectorSettings:
    """Everything the task needs from the connector config, validated."""

    name: str
    kcql: str
    storage: StorageSettings
    exactly_once: ExactlyOnceSettings
    writers: WriterSettings
    padding: Padding | None = None
    """``connect.s3.padding.strategy``/``.length``: the connector-wide (legacy) padding of offsets
    in file names, for every statement; ``None`` when not set (each statement's own applies)."""


MAX_PAD_LENGTH = 1024
"""The longest padding kcql-sink writes (as for KCQL ``padding.length.*``): a name is no place for more."""

PADDING_BOTH = (
    "Unable to process both padding Kafka Connect config properties and KCQL properties. "
    "Please use one or the other (KCQL 'padding.*' properties can do more)."
)
"""Lenses' refusal of a connector-wide padding next to a statement's ``padding.*`` properties."""


def _parse_padding(reader: SettingsReader) -> Padding | None:
    """Lenses' ``PaddingStrategySettings``: a strategy (any case) pads the offset only, with ``0``,
    to ``connect.s3.padding.length`` (12 when below 0). Lenses ignores a strategy it does not
    know; here it is a problem, so a typo does not silently change every file name."""
    if not reader.raw("connect.s3.padding.strategy"):
        return None
    kind = reader.choice("connect.s3.padding.strategy", ("LeftPad", "RightPad", "NoOp"), "LeftPad")
    length, raw = -1, reader.raw("connect.s3.padding.length")
    if raw:
        try:
            length = parse_whole_number(raw, minimum=-JAVA_INT_MAX - 1, maximum=MAX_PAD_LENGTH)
        except ValueError:
            reader.problem("connect.s3.padding.length", raw, f"must be a whole number up to {MAX_PAD_LENGTH}")
    offset = length if length >= 0 else 12
    return Padding(type=kind, char="0", offset=offset, partition=None)  # type: ignore[arg-type]


def with_connector_padding(
    plans: Sequence[SinkPlan], settings: ConnectorSettings
) -> tuple[tuple[SinkPlan, ...], list[ConfigProblem]]:
    """The plans with the connector-wide padding applied, and the problem of a statement that has
    its own ``padding.*`` properties too (Lenses refuses both at once)."""
    padding = settings.padding
    if padding is None:
        return tuple(plans), []
    problems = [
        ConfigProblem("connect.s3.padding.strategy", plan.statement or plan.source, PADDING_BOTH)
        for plan in plans
        if any(key.lower().startswith("padding.") for key, _ in plan.properties)
    ]
    return tuple(replace(plan, padding=padding) for plan in plans), problems


def _parse_storage(reader: SettingsReader) -> StorageSettings:
    kind = reader.choice("connect.storage", ("local", "s3"), "s3")
    root_text = reader.string("connect.local.root")
    if kind == "local" and not root_text:
        reader.problem("connect.local.root", "", "is required when connect.storage=local")
    auth_mode = reader.choice("connect.s3.aws.auth.mode", ("Credentials", "Default"), "Default")
    access = reader.string("connect.s3.aws.access.key")
    secret = reader.string("connect.s3.aws.secret.key")
    if kind == "s3" and auth_mode == "Credentials":
        needs = "is required when connect.s3.aws.auth.mode=Credentials"
        if not access:
            reader.problem("connect.s3.aws.access.key", "", needs)
        if not secret:
            reader.problem("connect.s3.aws.secret.key", "", needs)
    # Lenses: path.style.access wins; the deprecated vhost.bucket=true means path-style (inverted name).
    vhost = reader.boolean("connect.s3.vhost.bucket", False)
    path_style = reader.boolean("connect.s3.path.style.access", vhost)
    endpoint = reader.string("connect.s3.custom.endpoint") or None
    if endpoint and not endpoint.startswith(("http://", "https://")):
        reader.problem("connect.s3.custom.endpoint", endpoint, "must start with http:// or https://")
    s3 = S3Settings(
        region=reader.string("connect.s3.aws.region") or None,
        auth_mode=auth_mode,  # type: ignore[arg-type]
        access_key=Secret(access) if access else None,
        secret_key=Secret(secret) if secret else None,
        endpoint=endpoint,
        path_style=path_style,
        max_retries=reader.integer("connect.s3.http.max.retries", 5, minimum=0),
        retry_interval_ms=reader.integer("connect.s3.http.retry.interval", 50, minimum=0),
        socket_timeout_ms=reader.integer("connect.s3.http.socket.timeout", 60_000, minimum=1),
        connection_timeout_ms=reader.integer("connect.s3.http.connection.timeout", 60_000, minimum=1),
        multipart_threshold=reader.integer("connect.s3.multipart.threshold", 16 << 20, minimum=5 << 20),
        multipart_chunk=reader.integer("connect.s3.multipart.part.size", 16 << 20, minimum=5 << 20),
        conditional_writes=reader.boolean("connect.s3.conditional.writes", True),
    )
    return StorageSettings(kind=kind, local_root=Path(root_text) if root_text else None, s3=s3)  # type: ignore[arg-type]


def _parse_exactly_once(reader: SettingsReader) -> ExactlyOnceSettings:
    name = reader.string("connect.s3.indexes.name", DEFAULT_INDEXES_NAME).strip("/")
    if not name or not name.startswith((".", "_")) or any(not s for s in name.split("/")):
        reader.problem(
            "connect.s3.indexes.name", name,
            "must be a folder whose first segment starts with '.' or '_', so readers never take it for data",
        )
        name = DEFAULT_INDEXES_NAME
    enabled = reader.boolean("connect.s3.exactly.once.enable", True)
    protocol = reader.choice("connect.s3.commit.protocol", ("auto", "conditional", "copy"), "auto")
    if protocol == "conditional" and not reader.boolean("connect.s3.conditional.writes", True):
        reader.problem(
            "connect.s3.commit.protocol", protocol,
            "needs conditional writes (If-None-Match), but connect.s3.conditional.writes is false; "
            "use auto or copy",
        )
    return ExactlyOnceSettings(
        enabled=enabled, indexes_name=name, commit_protocol=protocol,  # type: ignore[arg-type]
    )


def _parse_writers(reader: SettingsReader) -> WriterSettings:
    staging = reader.string("connect.s3.local.tmp.directory")
    codec = reader.string("connect.s3.compression.codec").upper() or None
    level = reader.optional_integer("connect.s3.compression.level")
    return WriterSettings(
        staging_dir=Path(staging) if staging else None,
        max_open_writers=reader.integer("connect.s3.max.open.writers", DEFAULT_MAX_OPEN_WRITERS, minimum=1),
        compression_codec=codec,
        compression_level=None if level is None or level == -1 else level,
        staging_max_bytes=reader.optional_integer("connect.s3.local.tmp.max.bytes"),
    )


STAGING_INSIDE_ROOT = "must not be inside connect.local.root: staging files would appear in the buckets"


def staging_problem(settings: ConnectorSettings) -> ConfigProblem | None:
    """The problem of a staging directory inside local storage's root (its files would show)."""
    root, staging = settings.storage.local_root, settings.writers.staging_dir
    if settings.storage.kind != "local" or root is None or staging is None:
        return None
    root, staging = root.resolve(), staging.resolve()
    if staging == root or root in staging.parents:
        given = str(settings.writers.staging_dir)
        return ConfigProblem("connect.s3.local.tmp.directory", given, STAGING_INSIDE_ROOT)
    return None


def parse_settings(props: Mapping[str, str]) -> ConnectorSettings:
    """Validate the connector config and build :class:`ConnectorSettings`.

    Raises:
        ConfigError: listing every invalid or missing key (secret values masked).
    """
    reader = SettingsReader(props)
    name = reader.string("name")
    if not name:
        reader.problem("name", "", NAME_REQUIRED)
    kcql = reader.string("connect.s3.kcql", required=True)
    settings = ConnectorSettings(
        name=name,
        kcql=kcql,
        storage=reader.parse(_parse_storage),
        exactly_once=reader.parse(_parse_exactly_once),
        writers=reader.parse(_parse_writers),
        padding=reader.parse(_parse_padding),
    )
    if reader.problems:
        raise ConfigError(reader.problems)
    return settings
