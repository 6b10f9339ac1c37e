"""Loading connector configurations the way users already have them.

Three shapes are accepted, so that the file a user POSTs to Kafka Connect also runs here unchanged:

* Connect JSON: ``{"name": "...", "config": {...}}`` (the seed's ``s3.json``);
* a flat JSON object: ``{"name": "...", "connect.s3.kcql": "...", ...}``;
* a Java ``.properties`` file (``key=value`` / ``key: value``, ``#`` and ``!`` comments,
  backslash line continuations).

Values are strings, as Connect keeps them. The seed's pre-7.0 short keys (``aws.access.key``, ...)
are accepted as aliases of the ``connect.s3.*`` keys with a deprecation warning naming the new key;
Lenses 7+ rejects them, but our users' configs still contain them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kcql.errors import ConfigError, ConfigProblem
from sink.config.secrets import mask
from sink.config.settings import NAME_REQUIRED

__all__ = [
    "DEPRECATED_ALIASES",
    "ConnectorConfig",
    "load_connector_config",
    "normalise_aliases",
    "parse_connector_config",
]

log = logging.getLogger(__name__)

DEPRECATED_ALIASES: dict[str, str] = {
    "aws.region": "connect.s3.aws.region",
    "aws.access.key": "connect.s3.aws.access.key",
    "aws.secret.key": "connect.s3.aws.secret.key",
    "aws.auth.mode": "connect.s3.aws.auth.mode",
    "aws.custom.endpoint": "connect.s3.custom.endpoint",
    "aws.vhost.bucket": "connect.s3.vhost.bucket",
}
"""Seed-era short keys → the ``connect.s3.*`` key they mean."""


@dataclass(frozen=True, slots=True)
class ConnectorConfig:
    """A connector's name and its properties (aliases already normalised)."""

    name: str
    props: dict[str, str]
    warnings: tuple[str, ...] = ()
    problems: tuple[ConfigProblem, ...] = ()
    """Only with ``strict=False``: problems found while loading, for the caller to report together
    with its own checks (``kcql-sink run`` lists every problem of the whole config at once)."""

    def __repr__(self) -> str:  # never print secrets by accident
        shown = {k: mask(k, v) for k, v in self.props.items()}
        return f"ConnectorConfig(name={self.name!r}, props={shown!r})"


def load_connector_config(path: str | Path, strict: bool = True) -> ConnectorConfig:
    """Read a Connect JSON, flat JSON or ``.properties`` file.

    Raises:
        ConfigError: the file is missing or unreadable, is not one of the three shapes, or holds
            conflicting aliases; every problem is listed.
    """
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(
            [ConfigProblem("CONFIG", str(file), f"cannot read the file: {exc.strerror}")]
        ) from None
    looks_json = file.suffix.lower() == ".json" or text.lstrip()[:1] in ("{", "[")
    if not looks_json:
        raw = parse_properties(text)
        return parse_connector_config(raw, source=str(file), strict=strict)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            [
                ConfigProblem(
                    "CONFIG", str(file), f"not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}"
                )
            ]
        ) from None
    return parse_connector_config(data, source=str(file), strict=strict)


def parse_connector_config(data: object, source: str = "<config>", strict: bool = True) -> ConnectorConfig:
    """Accept a Connect JSON object (``name`` + ``config``) or a flat object of properties."""
    if not isinstance(data, dict):
        raise ConfigError([ConfigProblem("CONFIG", source, "expected a JSON object")])
    problems: list[ConfigProblem] = []
    if isinstance(data.get("config"), dict):
        name = data.get("name")
        props_in = dict(data["config"])
        if name is not None and props_in.get("name") not in (None, name):
            problems.append(
                ConfigProblem(
                    "name",
                    str(props_in.get("name")),
                    f"differs from the connector name {name!r} outside config",
                )
            )
        props_in.setdefault("name", name)
    else:
        props_in = dict(data)
    props: dict[str, str] = {}
    for key, value in props_in.items():
        if value is None:
            continue
        if isinstance(value, dict | list):
            problems.append(
                ConfigProblem(str(key), "<object>", "values must be strings, numbers or booleans")
            )
            continue
        props[str(key)] = _as_string(value)
    name = props.get("name", "").strip()
    if not name:
        problems.append(ConfigProblem("name", "", NAME_REQUIRED))
    normalised, warnings, alias_problems = normalise_aliases(props)
    problems += alias_problems
    if problems and strict:
        raise ConfigError(problems)
    for warning in warnings:
        log.warning("%s", warning)
    return ConnectorConfig(name, normalised, tuple(warnings), tuple(problems))


_CHAIN_AUTH_MODES = frozenset({"EC2", "ECS", "ENV"})
"""Seed-era ``aws.auth.mode`` values that the default credential chain covers."""


def normalise_aliases(props: Mapping[str, str]) -> tuple[dict[str, str], list[str], list[ConfigProblem]]:
    """Map deprecated short keys onto ``connect.s3.*``; both given with different values is an error.

    ``connect.s3.*`` keys are lower-cased, as Lenses does before parsing.
    """
    out: dict[str, str] = {}
    for key, value in props.items():
        out[key.lower() if key.lower().startswith("connect.s3.") else key] = value
    warnings: list[str] = []
    problems: list[ConfigProblem] = []
    for old, new in DEPRECATED_ALIASES.items():
        if old not in out:
            continue
        value = out.pop(old)
        if new in out and out[new] != value:
            problems.append(
                ConfigProblem(
                    old,
                    mask(old, value),
                    f"conflicts with {new}={mask(new, out[new])!r}; "
                    f"{old} is a deprecated alias of {new}: keep only {new}",
                )
            )
            continue
        out[new] = value
        warnings.append(f"configuration key {old} is deprecated: use {new} (Lenses 7+ rejects {old})")
    mode = out.get("connect.s3.aws.auth.mode")
    if mode is not None and mode.strip().upper() in _CHAIN_AUTH_MODES:
        # pre-7.0 modes that all meant "let the AWS SDK find credentials": today's Default
        out["connect.s3.aws.auth.mode"] = "Default"
        warnings.append(
            f"aws.auth.mode {mode.strip()} is deprecated: it means connect.s3.aws.auth.mode=Default "
            "(the default AWS credential chain: environment, profile, container or instance role)"
        )
    return out, warnings, problems


def parse_properties(text: str) -> dict[str, str]:
    """A Java ``.properties`` reader covering what connector files use."""
    props: dict[str, str] = {}
    logical = ""
    for raw_line in text.splitlines():
        line = raw_line.strip() if not logical else raw_line.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if _continues(line):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    if logical:
        key, value = _split_property(logical)
        props[key] = value
    return props


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_property(line: str) -> tuple[str, str]:
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
            continue
        if ch == "\\":
            escaped = True
        elif ch in "=:":
            return _unescape(line[:i].strip()), _unescape(line[i + 1 :].strip())
        elif ch.isspace():
            rest = line[i:].lstrip()
            if rest[:1] in ("=", ":"):
                rest = rest[1:].lstrip()
            return _unescape(line[:i]), _unescape(rest)
    return _unescape(line), ""


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out = []
    chars = iter(text)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            out.append({"n": "\n", "t": "\t", "r": "\r"}.get(nxt, nxt))
        else:
            out.append(ch)
    return "".join(out)


def _as_string(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
