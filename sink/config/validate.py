"""The one validation of a connector config, used by every entry point.

``kcql-sink run`` (before it builds anything), ``PUT /connector-plugins/{plugin}/config/validate``,
``POST /connectors`` and ``PUT``/``PATCH /connectors/{name}/config`` all call :func:`validate`, so
the same config gets the same problems, with the same words, wherever it is given. What only one
entry point can know stays there: the CLI adds the config file's own problems and the bootstrap
servers; the REST API adds ``connector.class``, the connector name in the URL and JSON nulls.

Validation builds no Kafka consumer or client, no Schema Registry client and no storage client,
and opens no socket: a config is checked the same whether or not its broker, registry or bucket
is reachable, and checking it has no side effect anywhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from kcql.errors import ConfigError, ConfigProblem, KcqlError
from kcql.model import SinkPlan
from sink.config.consumer_overrides import consumer_override_problems
from sink.config.errors import parse_error_settings
from sink.config.files import normalise_aliases
from sink.config.secrets import HIDDEN, is_secret_key, mask
from sink.config.settings import SettingsReader, parse_settings, staging_problem, with_connector_padding
from sink.config.subscription import resolve_subscription
from sink.config.whole_numbers import parse_whole_number

__all__ = ["MAX_TASKS", "TASKS_MAX_RULE", "parse_tasks_max", "validate"]

MAX_TASKS = 256
"""Upper bound of ``tasks.max``: each task is an OS process under ``kcql-sink run`` and a thread
(with its own consumer) in ``kcql-sink worker``; an unbounded value would start either without limit."""

TASKS_MAX_RULE = (
    f"must be a whole number from 1 to {MAX_TASKS} "
    "(each task is a process of kcql-sink run, a thread of kcql-sink worker)"
)

_SHORTEST_SCRUBBED = 4
"""Secret values at least this long are also removed from the problems' texts (a librdkafka or
KCQL message quoting one); shorter ones would mangle every sentence they occur in."""


def parse_tasks_max(props: Mapping[str, str]) -> tuple[int, list[ConfigProblem]]:
    """``tasks.max`` (default 1) and its problem, if any: one rule for the CLI and the worker.

    A whole number from 1 to :data:`MAX_TASKS`, surrounding whitespace ignored, ASCII digits only
    (:func:`~sink.config.whole_numbers.parse_whole_number`). An invalid value counts as 1.
    """
    raw = props.get("tasks.max")
    if raw is None:
        return 1, []
    try:
        return parse_whole_number(raw, minimum=1, maximum=MAX_TASKS), []
    except ValueError:
        return 1, [ConfigProblem("tasks.max", raw, TASKS_MAX_RULE)]


def validate(props: Mapping[str, str]) -> list[ConfigProblem]:
    """Every problem with the connector properties ``props``, at once, secret values masked.

    There is one validate because there used to be three (the CLI's, the REST plugin's, and the
    runtime's constructor), and they drifted: ``tasks.max`` had two rules, one of them crashing
    on some inputs, and a config the worker accepted could fail when its task started. Checked:

    * connector settings (storage, S3, exactly-once, writers): :func:`sink.config.settings.parse_settings`;
    * the KCQL in ``connect.s3.kcql`` compiles (errors keep their line, column and caret), and
      with S3 storage every target bucket has a valid name;
    * error handling and the retry settings: :func:`sink.config.errors.parse_error_settings`;
    * converters: :func:`sink.records.converters.converter_problems`;
    * ``tasks.max``: :func:`parse_tasks_max`;
    * ``topics``/``topics.regex`` against the KCQL sources:
      :func:`sink.config.subscription.resolve_subscription`;
    * ``consumer.override.*`` values, by librdkafka's own parser without a client:
      :func:`sink.config.consumer_overrides.consumer_override_problems`;
    * ``transforms``/``predicates``: :func:`_transform_problems`;
    * ``connect.json.validate`` (true/false: whether one-line JSON values written through as they
      came are checked first);
    * deprecated short keys given twice with different values, and a staging directory inside
      the local storage root.

    Args:
        props: the connector's properties as given (deprecated aliases are mapped here).

    Returns:
        The problems in a stable order, each once; empty when the config is valid. No value of a
        secret key (:mod:`sink.config.secrets`) appears in any of them.
    """
    from sink.records.converters import converter_problems  # imports the Avro stack; only here

    normalised, _warnings, alias_problems = normalise_aliases(props)
    problems: list[ConfigProblem] = list(alias_problems)
    settings = None
    try:
        settings = parse_settings(normalised)
    except ConfigError as exc:
        problems += exc.problems
    else:
        if (staging := staging_problem(settings)) is not None:
            problems.append(staging)
    plans = _compile_kcql(normalised, problems)
    if settings is not None:
        problems += with_connector_padding(plans, settings)[1]
    problems += _storage_problems(normalised, plans)
    problems += parse_error_settings(normalised)[1]
    problems += converter_problems(normalised)
    problems += parse_tasks_max(normalised)[1]
    if plans:
        problems += resolve_subscription(normalised, plans)[1]
    problems += consumer_override_problems(normalised)
    problems += _transform_problems(normalised)
    problems += _projection_problems(plans)
    reader = SettingsReader(normalised)
    reader.boolean("connect.json.validate", True)
    problems += reader.problems
    return _shown(problems, props)


def _transform_problems(props: Mapping[str, str]) -> list[ConfigProblem]:
    """``transforms``/``predicates``: unknown classes and settings, named by key (Connect fails a
    connector whose SMT config its ConfigDef rejects)."""
    from sink.transforms import transform_problems

    return transform_problems(props)


def _projection_problems(plans: Sequence[SinkPlan]) -> list[ConfigProblem]:
    """Each statement's SELECT/IGNORE as the task will apply it (two entries giving one field,
    IGNORE of a key or header field), so a config the task would refuse at start is refused here."""
    from kcql.errors import ConfigError
    from sink.transforms.projection import compile_projection

    problems: list[ConfigProblem] = []
    for plan in plans:
        try:
            compile_projection(plan)
        except ConfigError as exc:
            problems += exc.problems
    return problems


def _compile_kcql(props: Mapping[str, str], problems: list[ConfigProblem]) -> Sequence[SinkPlan]:
    """The compiled statements, or none (a missing KCQL is parse_settings' problem)."""
    import kcql

    text = props.get("connect.s3.kcql") or ""
    if not text.strip():
        return ()
    try:
        return kcql.parse(text)
    except KcqlError as exc:
        problems.append(ConfigProblem("connect.s3.kcql", text, exc.render()))
    except ConfigError as exc:
        problems += exc.problems
    except ValueError as exc:
        problems.append(ConfigProblem("connect.s3.kcql", text, str(exc)))
    return ()


def _storage_problems(props: Mapping[str, str], plans: Sequence[SinkPlan]) -> list[ConfigProblem]:
    """Bucket names S3 would refuse (what the task refuses at start-up, in the same sentences)."""
    from sink.config.buckets import bucket_name_problem

    reader = SettingsReader(props)
    kind = reader.choice("connect.storage", ("local", "s3"), "s3")
    if reader.problems:  # an unknown connect.storage (parse_settings reports it): nothing to check
        return []
    problems = []
    if kind == "s3":
        problems += [
            ConfigProblem("connect.s3.kcql", plan.statement or plan.bucket, why)
            for plan in plans
            if (why := bucket_name_problem(plan.bucket))
        ]
    return problems


def _shown(problems: list[ConfigProblem], props: Mapping[str, str]) -> list[ConfigProblem]:
    """Each problem once, in order, as it may be shown: secret values masked and scrubbed."""
    secrets = sorted(
        {v for k, v in props.items() if len(v) >= _SHORTEST_SCRUBBED and is_secret_key(k)},
        key=len,
        reverse=True,  # a secret containing another is replaced whole
    )

    def scrub(text: str) -> str:
        for secret in secrets:
            text = text.replace(secret, HIDDEN)
        return text

    shown = [ConfigProblem(p.key, scrub(mask(p.key, p.value)), scrub(p.why)) for p in problems]
    return list(dict.fromkeys(shown))
