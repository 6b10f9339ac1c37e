"""Targeted behaviour of kcql.parse beyond the corpus: API, messages, expectations, positions."""

from __future__ import annotations

import dataclasses

import pytest

import kcql
from kcql.errors import KcqlSemanticError, KcqlSyntaxError, SinkError
from kcql.model import FileNaming, SinkPlan, StoreFormat
from kcql.parser import OTHER_CONNECTOR_KEYWORDS


def test_parse_returns_frozen_plans_in_order() -> None:
    plans = kcql.parse("INSERT INTO a SELECT * FROM t1; INSERT INTO b:p SELECT * FROM t2 STOREAS avro;")
    assert [(p.bucket, p.prefix, p.source, p.format) for p in plans] == [
        ("a", "", "t1", StoreFormat.JSON),
        ("b", "p", "t2", StoreFormat.AVRO),
    ]
    assert isinstance(plans, tuple)
    with pytest.raises(dataclasses.FrozenInstanceError):
        plans[0].bucket = "x"  # type: ignore[misc]
    again = kcql.parse("INSERT INTO a SELECT * FROM t1")[0]
    assert again == plans[0] and hash(again) == hash(plans[0])  # usable as a dict key
    assert plans[1].statement == "INSERT INTO b:p SELECT * FROM t2 STOREAS avro"


def test_parse_one() -> None:
    plan = kcql.parse_one("INSERT INTO a SELECT * FROM t;")
    assert isinstance(plan, SinkPlan) and plan.source == "t"
    with pytest.raises(KcqlSyntaxError, match="exactly one KCQL statement, found 2") as info:
        kcql.parse_one("INSERT INTO a SELECT * FROM t;\nINSERT INTO a SELECT * FROM u")
    assert info.value.line == 2


def test_errors_are_sink_errors_and_value_errors() -> None:
    with pytest.raises(SinkError):
        kcql.parse("nonsense")
    with pytest.raises(ValueError):  # sink.runtime.loop catches ValueError
        kcql.parse("INSERT INTO a SELECT * FROM t STOREAS ORC")


def test_non_string_input_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="must be a str"):
        kcql.parse(b"INSERT INTO a SELECT * FROM t")  # type: ignore[arg-type]


def test_syntax_error_lists_expected_keywords_not_terminal_names() -> None:
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO a SELECT * FROM t STOREAS json LIMIT")
    err = info.value
    assert err.message == "unexpected end of input"
    assert err.expected == ("a name",)
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse("INSERT INTO a SELECT * FROM t foo")
    assert info.value.expected == (
        "IGNORE",
        "PARTITIONBY",
        "NOPARTITION",
        "STOREAS",
        "WITHPARTITIONER",
        "WITH_FLUSH_SIZE",
        "WITH_FLUSH_INTERVAL",
        "WITH_FLUSH_COUNT",
        "LIMIT",
        "PROPERTIES",
        "';'",
        "end of input",
    )
    rendered = str(info.value)
    assert "expected one of: IGNORE, PARTITIONBY" in rendered
    for internal in ("NAME", "BQ", "GNAME", "_SEMI", "$END", "Token("):
        assert internal not in rendered.replace("PARTITIONBY", "").replace("NOPARTITION", "")


def test_error_position_in_a_later_statement_and_line() -> None:
    text = "INSERT INTO a SELECT * FROM t;\n\tINSERT INTO b SELECT * FROM u STOREAS XML"
    with pytest.raises(KcqlSemanticError) as info:
        kcql.parse(text)
    err = info.value
    assert (err.line, err.column) == (2, 40)
    assert err.render().splitlines()[2] == "  \t" + " " * 38 + "^"  # tabs kept so the caret lines up


def test_keywords_are_reserved_unless_backticked() -> None:
    with pytest.raises(KcqlSyntaxError, match="LIMIT is a keyword"):
        kcql.parse("INSERT INTO a SELECT * FROM limit")
    assert kcql.parse_one("INSERT INTO a SELECT * FROM `limit`").source == "limit"
    # a keyword inside a longer name is just part of the name
    assert kcql.parse_one("INSERT INTO a SELECT * FROM from_here").source == "from_here"
    assert kcql.parse_one("INSERT INTO a SELECT * FROM t PARTITIONBY _value.from").partition_by[0].path == (
        "from",
    )


def test_quoted_first_segment_is_a_field_not_a_special_source() -> None:
    (field,) = kcql.parse_one("INSERT INTO a SELECT * FROM t PARTITIONBY `_key`").partition_by or ()
    assert (field.kind, field.path) == ("value", ("_key",))


def test_display_names_follow_lenses() -> None:
    plan = kcql.parse_one(
        "INSERT INTO a SELECT * FROM t PARTITIONBY _key, _key.`cost.centre.id`, x.y, _header.h.z, _topic, "
        "_partition, _date.uuuu"
    )
    assert [f.display_name for f in plan.partition_by or ()] == [
        "key",
        "cost.centre.id",
        "x.y",
        "h.z",
        "topic",
        "partition",
        "date",
    ]


def test_legacy_and_properties_merge_in_order() -> None:
    plan = kcql.parse_one(
        "INSERT INTO a SELECT * FROM t PARTITIONBY x WITHPARTITIONER=KeysAndValues WITH_FLUSH_COUNT=10 "
        "PROPERTIES('flush.count'=10, 'flush.interval'=5)"
    )
    assert plan.properties == (
        ("partition.include.keys", "true"),
        ("flush.count", "10"),
        ("flush.interval", "5"),
    )
    assert plan.include_keys is True and plan.flush.count == 10 and plan.flush.interval == 5


def test_unknown_property_names_every_known_key() -> None:
    with pytest.raises(KcqlSemanticError) as info:
        kcql.parse("INSERT INTO a SELECT * FROM t PROPERTIES('flush.counts'=1)")
    for key in ("flush.count", "store.envelope.fields.metadata", "padding.length.partition", "file.naming"):
        assert key in info.value.message


def test_naming_and_padding_properties_reach_the_plan() -> None:
    plan = kcql.parse_one(
        "INSERT INTO a SELECT * FROM t PROPERTIES('file.naming'=CONFLUENT, 'padding.type'=noop, "
        "'padding.length.offset'=20)"
    )
    assert plan.naming is FileNaming.CONFLUENT
    assert (plan.padding.type, plan.padding.offset, plan.padding.partition) == ("NoOp", 20, None)
    assert plan.padding.pad_offset(7) == "7"


def test_include_keys_rules() -> None:
    def keys(text: str) -> bool:
        return kcql.parse_one("INSERT INTO a SELECT * FROM t " + text).include_keys  # noqa: S608 (KCQL)

    # nothing chooses: KeysAndValues with PARTITIONBY, in both dialects (Lenses 2.1 to 11.x code;
    # the Lenses article's "Values only [default]" is wrong)
    assert keys("PARTITIONBY x") is True
    assert keys("PARTITIONBY name,title WITH_FLUSH_COUNT = 2") is True
    assert keys("PARTITIONBY x STOREAS `AVRO` WITH_FLUSH_COUNT = 5000") is True
    assert keys("PARTITIONBY x PROPERTIES()") is True
    assert keys("PARTITIONBY x WITHPARTITIONER=KeysAndValues") is True
    # values only: only when asked for
    assert keys("PARTITIONBY x WITHPARTITIONER=Values") is False
    assert keys("PARTITIONBY x WITHPARTITIONER=Values PROPERTIES()") is False
    assert keys("PARTITIONBY x PROPERTIES('partition.include.keys'=false)") is False
    assert keys("PROPERTIES()") is False
    assert keys("WITHPARTITIONER=KeysAndValues") is False  # 2.x-4.x: only shaped PARTITIONBY dirs
    assert keys("PROPERTIES('partition.include.keys'=true)") is True
    assert keys("NOPARTITION PROPERTIES()") is False


def test_readme_kcql_reference_examples_compile() -> None:
    """Every statement in the README's KCQL reference example block compiles (docs cannot rot)."""
    from pathlib import Path

    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## KCQL reference", 1)[1]
    block = section.split("```sql", 1)[1].split("```", 1)[0]
    text = "\n".join(line for line in block.splitlines() if not line.lstrip().startswith("--"))
    plans = kcql.parse(text)
    assert len(plans) == 10
    assert plans[-1].naming is FileNaming.CONFLUENT
    assert plans[-2].date_source.zone == "Europe/Paris"


def test_error_quotes_the_line_the_parser_counted_with_crlf_and_lone_cr() -> None:
    # CRLF files: line 2 is quoted without its "\r"
    with pytest.raises(KcqlSemanticError) as info:
        kcql.parse("INSERT INTO b SELECT * FROM t\r\nPARTITIONBY _value\r\n")
    assert (info.value.line, info.value.column) == (2, 13)
    assert info.value.render().splitlines()[1:3] == ["  PARTITIONBY _value", "  " + " " * 12 + "^"]
    # a lone "\r" is not a line break for the parser, so the quoted line must not split there either
    with pytest.raises(KcqlSemanticError) as info:
        kcql.parse("INSERT INTO b SELECT * FROM t\rPARTITIONBY _value")
    assert (info.value.line, info.value.column) == (1, 43)
    quoted, caret = info.value.render().splitlines()[1:3]
    assert quoted == "  INSERT INTO b SELECT * FROM t PARTITIONBY _value"
    assert caret.index("^") == 2 + 42 and quoted[2 + 42 :].startswith("_value")


@pytest.mark.parametrize("keyword", sorted(OTHER_CONNECTOR_KEYWORDS))
def test_other_connectors_keywords_are_named_and_positioned(keyword: str) -> None:
    text = f"INSERT INTO b SELECT * FROM t\n  {keyword.lower()} x"  # noqa: S608 (KCQL)
    with pytest.raises(KcqlSyntaxError) as info:
        kcql.parse(text)
    assert (info.value.line, info.value.column) == (2, 3)
    assert info.value.message == (
        f"unexpected keyword {keyword}: {keyword} belongs to the KCQL of other Lenses connectors and is "
        "not supported by an S3 sink"
    )


def test_readme_lists_every_other_connector_keyword() -> None:
    from pathlib import Path

    readme = (Path(__file__).parents[3] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## KCQL reference", 1)[1].split("\n## ", 1)[0]
    missing = [k for k in OTHER_CONNECTOR_KEYWORDS if f"`{k}`" not in section]
    assert not missing
