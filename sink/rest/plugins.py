"""The one connector plugin this worker runs, its aliases, and config validation.

Validation is :func:`sink.config.validate.validate`, the one ``kcql-sink run`` uses too, so a
config gets the same problems from the worker as from the command line. Problems are grouped per
key, as Connect's ``ConfigInfos`` does, and secret values are shown as ``[hidden]``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kcql.errors import ConfigProblem
from sink.config.secrets import is_secret_key, mask

__all__ = [
    "CONNECTOR_CLASS",
    "KEY_CATALOGUE",
    "REPLAY_CLASS",
    "VERSION",
    "config_infos",
    "connector_plugins",
    "error_message_lines",
    "resolve_class",
    "validate_config",
]

VERSION = "0.1.0"
CONNECTOR_CLASS = "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector"
ALIASES = frozenset({CONNECTOR_CLASS, "S3SinkConnector", "S3Sink", "kcql-sink"})
"""Connect resolves a plugin by full class name, simple name, or simple name minus 'Connector'."""
REPLAY_CLASS = "io.lenses.streamreactor.connect.aws.s3.source.S3SourceConnector"
"""The replay (``kcql-sink replay`` as a source connector): it reads the reverse KCQL form the
Lenses S3 source connector reads, so its class name is that connector's."""
REPLAY_ALIASES = frozenset({REPLAY_CLASS, "S3SourceConnector", "S3Source", "kcql-sink-replay"})

CONVERTER_CLASSES = (
    "org.apache.kafka.connect.json.JsonConverter",
    "org.apache.kafka.connect.storage.StringConverter",
    "org.apache.kafka.connect.converters.ByteArrayConverter",
    "io.confluent.connect.avro.AvroConverter",
)

NULL_VALUE_ERROR = "Null value can not be supplied as the configuration value."


@dataclass(frozen=True, slots=True)
class KeyDef:
    """One entry of Connect's ``ConfigKeyInfo`` (what ``/config`` and validate describe)."""

    name: str
    type: str
    required: bool
    default: str | None
    importance: str
    doc: str
    group: str
    order: int


def _k(
    name: str,
    typ: str,
    group: str,
    doc: str,
    *,
    required: bool = False,
    default: str | None = None,
    importance: str = "MEDIUM",
) -> KeyDef:
    return KeyDef(name, typ, required, default, importance, doc, group, 0)


_KEYS = [
    _k(
        "name", "STRING", "Common", "Globally unique name of the connector.", required=True, importance="HIGH"
    ),
    _k("connector.class", "STRING", "Common", "Connector class or alias.", required=True, importance="HIGH"),
    _k(
        "tasks.max",
        "INT",
        "Common",
        "Tasks (consumer threads of group connect-<name>).",
        default="1",
        importance="HIGH",
    ),
    _k("topics", "LIST", "Common", "Topics to consume (or use topics.regex).", default=""),
    _k("topics.regex", "STRING", "Common", "Regular expression of topics to consume.", default=""),
    _k("key.converter", "CLASS", "Common", "Converter for record keys.", default=None),
    _k("value.converter", "CLASS", "Common", "Converter for record values.", default=None),
    _k("bootstrap.servers", "LIST", "Common", "Kafka bootstrap servers (default: the worker's).", default=""),
    _k(
        "errors.tolerance",
        "STRING",
        "Error Handling",
        "none (fail) or all (skip bad records).",
        default="none",
    ),
    _k("errors.deadletterqueue.topic.name", "STRING", "Error Handling", "Dead-letter topic.", default=""),
    _k("connect.s3.kcql", "STRING", "S3", "KCQL statements (; separated).", required=True, importance="HIGH"),
    _k("connect.storage", "STRING", "S3", "Storage backend: s3 or local.", default="s3"),
    _k("connect.local.root", "STRING", "S3", "Root directory when connect.storage=local.", default=""),
    _k("connect.s3.aws.auth.mode", "STRING", "S3", "Credentials or Default.", default="Default"),
    _k("connect.s3.aws.access.key", "PASSWORD", "S3", "AWS access key.", default=""),
    _k("connect.s3.aws.secret.key", "PASSWORD", "S3", "AWS secret key.", default=""),
    _k("connect.s3.aws.region", "STRING", "S3", "AWS region.", default=""),
    _k("connect.s3.custom.endpoint", "STRING", "S3", "S3-compatible endpoint URL.", default=""),
    _k("connect.s3.exactly.once.enable", "BOOLEAN", "S3", "Exactly-once index.", default="true"),
]
KEY_CATALOGUE: dict[str, KeyDef] = {
    k.name: KeyDef(k.name, k.type, k.required, k.default, k.importance, k.doc, k.group, i + 1)
    for i, k in enumerate(_KEYS)
}
GROUPS = ["Common", "Transforms", "Predicates", "Error Handling", "S3"]


def resolve_class(name: str | None) -> str | None:
    """The canonical connector class for ``name`` (full class or alias), else ``None``."""
    if name is None:
        return None
    name = name.strip()
    if name in ALIASES or name.endswith(".S3SinkConnector"):
        return CONNECTOR_CLASS
    if name in REPLAY_ALIASES or name.endswith(".S3SourceConnector"):
        return REPLAY_CLASS
    return None


def unknown_class_message(name: str) -> str:
    """Connect's text for an unknown ``connector.class`` (a 500, as Connect answers)."""
    return (
        f"Failed to find any class that implements Connector and which name matches {name}, "
        f"available connectors are: PluginDesc{{klass=class {CONNECTOR_CLASS}, name='{CONNECTOR_CLASS}', "
        f"version='{VERSION}', type=sink, typeName='sink', location='kcql-sink'}}"
    )


def connector_plugins(connectors_only: bool = True) -> list[dict[str, str]]:
    """``GET /connector-plugins``: the sink, plus converters when ``connectorsOnly=false``."""
    plugins = [
        {"class": CONNECTOR_CLASS, "type": "sink", "version": VERSION},
        {"class": REPLAY_CLASS, "type": "source", "version": VERSION},
    ]
    if not connectors_only:
        plugins += [{"class": c, "type": "converter"} for c in CONVERTER_CLASSES]
    return plugins


def key_info(key: str) -> dict[str, Any]:
    """Connect's ``ConfigKeyInfo`` JSON for ``key`` (unknown keys get a generic STRING entry)."""
    d = KEY_CATALOGUE.get(key) or KeyDef(
        key,
        "PASSWORD" if is_secret_key(key) else "STRING",
        False,
        None,
        "LOW",
        "",
        "S3",
        len(KEY_CATALOGUE) + 1,
    )
    return {
        "name": d.name,
        "type": d.type,
        "required": d.required,
        "default_value": d.default,
        "importance": d.importance,
        "documentation": d.doc,
        "group": d.group,
        "width": "NONE",
        "display_name": d.name,
        "dependents": [],
        "order": d.order,
    }


def problem_text(problem: ConfigProblem) -> str:
    """One error line that names the key (and the value, masked when secret)."""
    value = mask(problem.key, problem.value)
    if value and value not in problem.why:
        return f"Invalid value {value} for configuration {problem.key}: {problem.why}"
    return f"Invalid configuration {problem.key}: {problem.why}"


def validate_config(config: Mapping[str, str | None]) -> list[ConfigProblem]:
    """Every problem with ``config`` (string values; ``None`` = a JSON null), secrets masked.

    The checks are :func:`sink.config.validate.validate`, the same as ``kcql-sink run``'s; only
    what is particular to the REST API is added here (a JSON null is not a value). Assumes
    ``connector.class`` was already resolved by the caller.
    """
    from sink.config.validate import validate

    problems = [ConfigProblem(k, "", NULL_VALUE_ERROR) for k, v in config.items() if v is None]
    given = {k: v for k, v in config.items() if v is not None}
    if resolve_class(given.get("connector.class")) == REPLAY_CLASS:
        from sink.replay.validate import replay_problems

        return problems + [ConfigProblem(p.key, mask(p.key, p.value), p.why) for p in replay_problems(given)]
    return problems + validate(given)


def error_message_lines(problems: list[ConfigProblem]) -> str:
    """Connect's 400 text for an invalid config on create/update."""
    lines = [f"Connector configuration is invalid and contains the following {len(problems)} error(s):"]
    lines += [problem_text(p) for p in problems]
    lines.append(
        "You can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )
    return "\n".join(lines)


def config_infos(
    class_name: str, config: Mapping[str, str | None], problems: list[ConfigProblem]
) -> dict[str, Any]:
    """Connect's ``ConfigInfos``: every catalogue key and every given key, each with its errors."""
    by_key: dict[str, list[str]] = {}
    for p in problems:
        by_key.setdefault(p.key, []).append(p.why if p.why == NULL_VALUE_ERROR else problem_text(p))
    keys = list(KEY_CATALOGUE) + [k for k in config if k not in KEY_CATALOGUE]
    keys += [k for k in by_key if k not in keys]
    configs = []
    for key in keys:
        raw = config.get(key)
        definition = key_info(key)
        shown = None if raw is None else mask(key, raw)
        errors = list(by_key.get(key, []))
        if raw is None and definition["required"] and key not in by_key:
            errors.append(f'Missing required configuration "{key}" which has no default value.')
        configs.append(
            {
                "definition": definition,
                "value": {
                    "name": key,
                    "value": shown,
                    "recommended_values": [],
                    "errors": errors,
                    "visible": True,
                },
            }
        )
    return {
        "name": class_name,
        "error_count": sum(len(c["value"]["errors"]) for c in configs),
        "groups": GROUPS,
        "configs": configs,
    }
