"""A connector's ``transforms=`` and ``predicates=`` settings, parsed into one chain.

Connect's rules: ``transforms`` lists aliases in the order they apply; ``transforms.<a>.type``
names the class (a stock SMT by its Connect class name, or :data:`PYTHON_TRANSFORM` with
``transforms.<a>.function=module:callable``); ``transforms.<a>.predicate`` names an alias of
``predicates``, whose ``predicates.<p>.type`` is a predicate class; ``transforms.<a>.negate=true``
applies the transform to the records the predicate does not match. Every other
``transforms.<a>.*`` key is the transform's own setting, and one it does not know is an error.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from kcql.errors import ConfigError, ConfigProblem, RecordError
from sink.records.record import SinkRecord
from sink.transforms.base import Predicate, Transform, TransformSettings, record_error

__all__ = [
    "PYTHON_BATCH_TRANSFORM",
    "PYTHON_TRANSFORM",
    "PythonBatchTransform",
    "PythonTransform",
    "TransformChain",
    "parse_transforms",
    "transform_problems",
]

PYTHON_TRANSFORM = "kcql.sink.transforms.Python"
"""The class name of a Python callable used as a transform."""
PYTHON_BATCH_TRANSFORM = "kcql.sink.transforms.PythonBatch"
"""The class name of a Python callable that transforms a batch of records at once."""

_OWN_KEYS = ("type", "predicate", "negate")


class PythonTransform(Transform):
    """``function=module:callable``: the callable takes a record and returns ``None`` (drop it),
    a record, or an iterable of records (fan-out). It is imported from the Python path when the
    connector starts, so a typo is a config error, not a failure at the first record."""

    keeps_topic = False

    def __init__(self, name: str, settings: TransformSettings) -> None:
        super().__init__(name, settings)
        spec = settings.require("function")
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise settings.error("function", spec, "must be module:callable (e.g. my_mappers:upper_names)")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise settings.error("function", spec, f"cannot import {module_name!r}: {exc}") from None
        target: object = module
        for part in attr.split("."):
            target = getattr(target, part, None)
            if target is None:
                raise settings.error("function", spec, f"{module_name!r} has no {attr!r}")
        if not callable(target):
            raise settings.error("function", spec, f"{attr!r} is not callable")
        self.function: Callable[[SinkRecord], object] = target
        settings.check_all_used()

    def apply(self, record: SinkRecord) -> SinkRecord | None:
        out = self.apply_many(record)
        if len(out) > 1:
            raise record_error(record, self.name, "returned several records where one was expected")
        return out[0] if out else None

    def apply_many(self, record: SinkRecord) -> list[SinkRecord]:
        """Every record the callable returns for ``record`` (zero, one or many)."""
        try:
            result = self.function(record)
        except Exception as exc:  # user code: any failure is this record's error
            raise record_error(record, self.name, f"{type(exc).__name__}: {exc}") from exc
        if result is None:
            return []
        if isinstance(result, SinkRecord):
            result.raw_value = None  # the callable may have changed the value in place
            return [result]
        if isinstance(result, Iterable) and not isinstance(result, (str, bytes, dict)):
            out = list(result)
            if all(isinstance(item, SinkRecord) for item in out):
                for item in out:
                    item.raw_value = None
                return out
        raise record_error(
            record, self.name, f"returned {type(result).__name__}; expected None, a SinkRecord or records"
        )


class PythonBatchTransform(PythonTransform):
    """``function=module:callable`` taking the list of records of one consumed run (those its
    predicate selects) and returning the records they become, in any number: each keeps the
    offset of the record it was made from (``dataclasses.replace``). For callables that work on
    many records at once (vectorised with Arrow or pandas, a lookup per batch). If the call raises,
    the records are given to it one at a time, so the error lands on the record that causes it."""

    def apply_many(self, record: SinkRecord) -> list[SinkRecord]:
        return self._checked([record], self._call([record], record))

    def apply_list(self, records: list[SinkRecord]) -> tuple[list[SinkRecord], dict[int, RecordError]]:
        """What ``records`` become, and the error of each record (by offset) that failed."""
        try:
            return self._checked(records, self._call(records, records[0])), {}
        except RecordError:
            pass
        out: list[SinkRecord] = []
        failures: dict[int, RecordError] = {}
        for record in records:
            try:
                out += self.apply_many(record)
            except RecordError as exc:
                failures[record.offset] = exc
        return out, failures

    def _call(self, records: list[SinkRecord], first: SinkRecord) -> object:
        try:
            return self.function(records)  # type: ignore[arg-type]
        except Exception as exc:  # user code: any failure is the records' error
            raise record_error(first, self.name, f"{type(exc).__name__}: {exc}") from exc

    def _checked(self, records: list[SinkRecord], result: object) -> list[SinkRecord]:
        first = records[0]
        if (
            result is None
            or isinstance(result, (str, bytes, dict, SinkRecord))
            or not isinstance(result, Iterable)
        ):
            raise record_error(
                first, self.name, f"returned {type(result).__name__}; expected a list of records"
            )
        out = list(result)
        offsets = {r.offset for r in records}
        for item in out:
            if not isinstance(item, SinkRecord):
                raise record_error(first, self.name, f"returned a {type(item).__name__} among the records")
            if item.offset not in offsets:
                raise record_error(
                    first,
                    self.name,
                    f"returned a record with offset {item.offset}, which no record given had",
                )
            item.raw_value = None
        out.sort(key=lambda r: r.offset)  # stable: the callable's order within one offset stays
        return out


def _classes() -> tuple[dict[str, type[Transform]], dict[str, type[Predicate]]]:
    from sink.transforms.fields import FIELD_TRANSFORMS
    from sink.transforms.predicates import PREDICATES
    from sink.transforms.routing import ROUTING_TRANSFORMS

    return {
        **FIELD_TRANSFORMS,
        **ROUTING_TRANSFORMS,
        PYTHON_TRANSFORM: PythonTransform,
        PYTHON_BATCH_TRANSFORM: PythonBatchTransform,
    }, dict(PREDICATES)


@dataclass(frozen=True)
class _Step:
    transform: Transform
    predicate: Predicate | None
    negate: bool


class TransformChain:
    """The configured transforms in order; :meth:`apply` runs them on one record."""

    def __init__(self, steps: list[_Step]) -> None:
        self._steps = steps

    def __len__(self) -> int:
        return len(self._steps)

    @property
    def drops_all(self) -> bool:
        """The first step is a Filter that applies to every record: nothing gets through."""
        from sink.transforms.routing import Filter

        return (
            bool(self._steps)
            and isinstance(self._steps[0].transform, Filter)
            and (self._steps[0].predicate is None)
        )

    def for_topic(self, topic: str) -> TransformChain:
        """This chain as it acts on records consumed from ``topic``: steps whose predicate the topic
        alone decides (``TopicNameMatches``) are dropped or made unconditional, up to the first
        step that may rename the topic. An empty result means the topic's batches keep their
        cheap forms; :attr:`drops_all` that they need not be converted at all."""
        steps: list[_Step] = []
        decided = True
        for step in self._steps:
            answer = step.predicate.test_topic(topic) if decided and step.predicate is not None else None
            if answer is None:
                steps.append(step)
            elif answer != step.negate:
                steps.append(_Step(step.transform, None, False))
            decided = decided and step.transform.keeps_topic
        return TransformChain(steps)

    def apply_batch(self, records: list[SinkRecord]) -> tuple[list[SinkRecord], dict[int, RecordError]]:
        """What ``records`` (consecutive records of one partition) become, in offset order, and
        the error of each record that failed (by offset; nothing made of it is in the result).

        Per-record steps run record by record; a :class:`PythonBatchTransform` step gets every
        record its predicate selects in one call.
        """
        failures: dict[int, RecordError] = {}
        current = records
        for step in self._steps:
            if isinstance(step.transform, PythonBatchTransform):
                chosen = [
                    r for r in current if step.predicate is None or step.predicate.test(r) != step.negate
                ]
                if not chosen:
                    continue
                made, failed = step.transform.apply_list(chosen)
                failures.update(failed)
                picked = {id(r) for r in chosen}
                current = sorted([r for r in current if id(r) not in picked] + made, key=_offset)
            else:
                out: list[SinkRecord] = []
                for record in current:
                    if record.offset in failures:
                        continue
                    try:
                        out += self._step(step, record)
                    except RecordError as exc:
                        failures[record.offset] = exc
                current = out
            if failures:
                current = [r for r in current if r.offset not in failures]
        return current, failures

    @staticmethod
    def _step(step: _Step, record: SinkRecord) -> list[SinkRecord]:
        if step.predicate is not None and step.predicate.test(record) == step.negate:
            return [record]  # not for this transform
        if isinstance(step.transform, PythonTransform):
            return step.transform.apply_many(record)
        done = step.transform.apply(record)
        return [] if done is None else [done]

    def apply(self, record: SinkRecord) -> list[SinkRecord]:
        """The records ``record`` becomes: none (dropped), one, or several (a Python fan-out).

        Raises:
            RecordError: (stage ``TRANSFORMATION``) a transform failed on it.
        """
        records = [record]
        for step in self._steps:
            records = [made for current in records for made in self._step(step, current)]
            if not records:
                break
        return records


def _offset(record: SinkRecord) -> int:
    return record.offset


def _sub(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix) :]: v for k, v in props.items() if k.startswith(prefix)}


def parse_transforms(props: Mapping[str, str]) -> TransformChain:
    """The chain ``props`` configure (empty when ``transforms`` is unset).

    Raises:
        ConfigError: every problem found, each naming its key.
    """
    names = [n.strip() for n in (props.get("transforms") or "").split(",") if n.strip()]
    if not names:
        return TransformChain([])
    transforms, predicate_classes = _classes()
    problems: list[ConfigProblem] = []
    predicates: dict[str, Predicate] = {}
    for alias in [n.strip() for n in (props.get("predicates") or "").split(",") if n.strip()]:
        own = _sub(props, f"predicates.{alias}.")
        kind = own.pop("type", "")
        predicate_class = predicate_classes.get(kind)
        if predicate_class is None:
            problems.append(
                ConfigProblem(
                    f"predicates.{alias}.type", kind, _unknown(kind, predicate_classes, "predicate")
                )
            )
            continue
        try:
            predicates[alias] = predicate_class(alias, TransformSettings(f"predicates.{alias}.", own))
        except ConfigError as exc:
            problems += exc.problems
    steps: list[_Step] = []
    for alias in names:
        prefix = f"transforms.{alias}."
        own = _sub(props, prefix)
        kind = own.get("type", "")
        transform_class = transforms.get(kind)
        if transform_class is None:
            problems.append(ConfigProblem(prefix + "type", kind, _unknown(kind, transforms, "transform")))
            continue
        predicate = None
        if own.get("predicate"):
            predicate = predicates.get(own["predicate"])
            if predicate is None:
                problems.append(
                    ConfigProblem(
                        prefix + "predicate", own["predicate"], "names no predicate listed in 'predicates'"
                    )
                )
                continue
        negate_text = (own.get("negate") or "false").strip().lower()
        if negate_text not in ("true", "false"):
            problems.append(ConfigProblem(prefix + "negate", own.get("negate", ""), "must be true or false"))
            continue
        settings = TransformSettings(prefix, {k: v for k, v in own.items() if k not in _OWN_KEYS})
        try:
            steps.append(_Step(transform_class(alias, settings), predicate, negate_text == "true"))
        except ConfigError as exc:
            problems += exc.problems
    if problems:
        raise ConfigError(problems)
    return TransformChain(steps)


def _unknown(kind: str, known: Mapping[str, object], noun: str) -> str:
    if not kind:
        return "is required"
    short = kind.rsplit(".", 1)[-1]
    near = sorted(k for k in known if k.rsplit(".", 1)[-1].split("$")[0] == short.split("$")[0])
    hint = f" (did you mean {' or '.join(near)}?)" if near else ""
    return f"is not a {noun} kcql-sink knows{hint}"


def transform_problems(props: Mapping[str, str]) -> list[ConfigProblem]:
    """What is wrong with the ``transforms``/``predicates`` settings (for ``validate``)."""
    try:
        parse_transforms(props)
    except ConfigError as exc:
        return list(exc.problems)
    return []
