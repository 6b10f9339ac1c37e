"""``transforms=``/``predicates=`` parsed into one chain: order, predicates, Python callables, errors.

The stock SMTs' own behaviour is tested in test_smt_*.py; here, how a Connect config puts them
together (Connect's rules: aliases in order, ``predicate`` + ``negate``, unknown keys refused).
"""

from __future__ import annotations

import pytest

from kcql.errors import ConfigError, RecordError
from sink.config.validate import validate
from sink.records.record import SinkRecord
from sink.transforms.chain import PYTHON_TRANSFORM, parse_transforms

M = "tests.unit.transforms.mappers"


def record(value: object, topic: str = "orders", offset: int = 7) -> SinkRecord:
    return SinkRecord(topic=topic, partition=0, offset=offset, timestamp=1_700_000_000_000, value=value)


def python(alias: str, function: str) -> dict[str, str]:
    return {f"transforms.{alias}.type": PYTHON_TRANSFORM, f"transforms.{alias}.function": function}


def test_no_transforms_is_an_empty_chain() -> None:
    assert len(parse_transforms({})) == 0
    assert parse_transforms({"transforms": " "}).apply(record({"id": 1})) == [record({"id": 1})]


def test_python_callables_map_filter_and_fan_out_in_order() -> None:
    chain = parse_transforms(
        {
            "transforms": "even,upper,split",
            **python("even", f"{M}:only_even"),
            **python("upper", f"{M}:upper_names"),
            **python("split", f"{M}:one_per_item"),
        }
    )
    assert chain.apply(record({"id": 1, "name": "a", "items": [1]})) == []
    out = chain.apply(record({"id": 2, "name": "ab", "items": ["x", "y"]}))
    assert [r.value for r in out] == [{"id": 2, "item": "x"}, {"id": 2, "item": "y"}]
    assert {r.offset for r in out} == {7}


def test_a_failing_or_misbehaving_callable_is_a_record_error_at_the_transformation_stage() -> None:
    for function, says in ((f"{M}:broken", "KeyError"), (f"{M}:wrong_type", "returned str")):
        chain = parse_transforms({"transforms": "m", **python("m", function)})
        with pytest.raises(RecordError, match=says) as caught:
            chain.apply(record({"id": 1}))
        assert caught.value.stage == "TRANSFORMATION" and caught.value.offset == 7
        assert "topic 'orders' partition 0 offset 7" in str(caught.value) and "'m'" in str(caught.value)


@pytest.mark.parametrize(
    ("function", "says"),
    [
        ("no_colon", "module:callable"),
        ("tests.unit.transforms.nope:f", "cannot import"),
        (f"{M}:missing", "has no 'missing'"),
        (f"{M}:NOT_CALLABLE", "not callable"),
    ],
)
def test_a_callable_that_cannot_be_loaded_is_a_config_error_at_start(function: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says) as caught:
        parse_transforms({"transforms": "m", **python("m", function)})
    assert [p.key for p in caught.value.problems] == ["transforms.m.function"]


def test_predicates_limit_a_transform_and_negate_inverts_them() -> None:
    props = {
        "transforms": "drop",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.drop.predicate": "isAudit",
        "predicates": "isAudit",
        "predicates.isAudit.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
        "predicates.isAudit.pattern": "audit-.*",
    }
    chain = parse_transforms(props)
    assert chain.apply(record({"id": 1}, topic="audit-eu")) == []
    assert len(chain.apply(record({"id": 1}, topic="orders"))) == 1
    negated = parse_transforms({**props, "transforms.drop.negate": "true"})
    assert len(negated.apply(record({"id": 1}, topic="audit-eu"))) == 1
    assert negated.apply(record({"id": 1}, topic="orders")) == []


def test_every_config_problem_is_named_at_once() -> None:
    with pytest.raises(ConfigError) as caught:
        parse_transforms(
            {
                "transforms": "a,b,c,d",
                "transforms.a.type": "org.apache.kafka.connect.transforms.ReplaceField",
                "transforms.b.type": "org.apache.kafka.connect.transforms.Filter",
                "transforms.b.predicate": "nowhere",
                "transforms.c.type": "org.apache.kafka.connect.transforms.Filter",
                "transforms.c.negate": "maybe",
                "transforms.d.type": "org.apache.kafka.connect.transforms.Filter",
                "transforms.d.colour": "red",
            }
        )
    problems = {p.key: p.why for p in caught.value.problems}
    assert (
        "did you mean" in problems["transforms.a.type"]
        and "ReplaceField$Value" in problems["transforms.a.type"]
    )
    assert "names no predicate" in problems["transforms.b.predicate"]
    assert "true or false" in problems["transforms.c.negate"]
    assert "not a setting" in problems["transforms.d.colour"]


def test_validate_names_each_bad_transform_setting_and_accepts_good_ones() -> None:
    base = {
        "name": "c",
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": "orders",
        "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM orders",
        "connect.storage": "local",
        "connect.local.root": "/tmp/x",
    }
    assert validate(base) == []
    problems = validate({**base, "transforms": "m", "transforms.m.type": "org.example.Nope"})
    assert [p.key for p in problems] == ["transforms.m.type"]
    assert validate({**base, "transforms": "m", **python("m", f"{M}:upper_names")}) == []
