"""Kafka's TimestampConverter, RegexRouter, TimestampRouter, Filter, DropHeaders, InsertHeader and the
predicates: the cases of Apache Kafka's own tests (``TimestampConverterTest``, ``RegexRouterTest``,
``TimestampRouterTest``, ``DropHeadersTest``, ``InsertHeaderTest``, ``TopicNameMatchesTest``) and
the examples of Kafka's SMT documentation, with Connect's ``Timestamp``/``Date``/``Time`` schemas
written as the Avro logical types this project carries.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from kcql.errors import ConfigError, RecordError
from sink.records.record import SinkRecord
from sink.transforms.base import Predicate, Transform, TransformSettings
from sink.transforms.chain import parse_transforms
from sink.transforms.predicates import PREDICATES
from sink.transforms.routing import ROUTING_TRANSFORMS

PKG = "org.apache.kafka.connect.transforms."
UTC = dt.UTC

# TimestampConverterTest's constants: one day and 1234 ms after the epoch
DATE_PLUS_TIME = dt.datetime(1970, 1, 2, 0, 0, 1, 234000, tzinfo=UTC)
DATE_PLUS_TIME_UNIX = 86_401_234
DATE_PLUS_TIME_UNIX_MICROS = DATE_PLUS_TIME_UNIX * 1000 + 123
DATE_PLUS_TIME_UNIX_NANOS = DATE_PLUS_TIME_UNIX_MICROS * 1000 + 456
DATE_PLUS_TIME_UNIX_SECONDS = 86_401
DATE = dt.date(1970, 1, 2)
TIME = dt.time(0, 0, 1, 234000)
STRING_DATE_FMT = "yyyy MM dd HH mm ss SSS z"
DATE_PLUS_TIME_STRING = "1970 01 02 00 00 01 234 UTC"

TIMESTAMP = {"type": "long", "logicalType": "timestamp-millis"}
DATE_SCHEMA = {"type": "int", "logicalType": "date"}
TIME_SCHEMA = {"type": "int", "logicalType": "time-millis"}


def smt(kind: str, **settings: str) -> Transform:
    values = {key.replace("_", "."): value for key, value in settings.items()}
    return ROUTING_TRANSFORMS[PKG + kind]("t1", TransformSettings("transforms.t1.", values))


def predicate(kind: str, **settings: str) -> Predicate:
    return PREDICATES[PKG + "predicates." + kind]("p", TransformSettings("predicates.p.", settings))


def rec(value: Any = None, schema: Any = None, **kw: Any) -> SinkRecord:
    base: dict[str, Any] = {"topic": "test", "partition": 0, "offset": 5, "timestamp": None}
    return SinkRecord(**{**base, **kw}, value=value, value_schema=schema)


def apply(transform: Transform, record: SinkRecord) -> SinkRecord:
    out = transform.apply(record)
    assert out is not None
    return out


# ----------------------------------------------------------------------------- TimestampConverter


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        ({}, "transforms.t1.target.type"),  # testConfigNoTargetType
        ({"target_type": "invalid"}, "transforms.t1.target.type"),  # testConfigInvalidTargetType
        ({"target_type": "unix", "unix_precision": "invalid"}, "transforms.t1.unix.precision"),
        ({"target_type": "string"}, "transforms.t1.format"),  # testConfigMissingFormat
        (
            {"target_type": "string", "format": "bad-format"},
            "transforms.t1.format",
        ),  # testConfigInvalidFormat
        ({"target_type": "unix", "nope": "1"}, "transforms.t1.nope"),
    ],
)
def test_timestamp_converter_config_errors(settings: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError) as caught:
        smt("TimestampConverter$Value", **settings)
    assert [p.key for p in caught.value.problems] == [key]


def test_timestamp_converter_valid_unix_precision() -> None:
    smt("TimestampConverter$Value", target_type="unix", unix_precision="seconds")


@pytest.mark.parametrize(
    ("target", "given", "expected"),
    [
        ("Timestamp", DATE_PLUS_TIME, DATE_PLUS_TIME),  # testSchemalessIdentity
        ("Date", DATE_PLUS_TIME, DATE),  # testSchemalessTimestampToDate
        ("Time", DATE_PLUS_TIME, TIME),  # testSchemalessTimestampToTime
        ("unix", DATE_PLUS_TIME, DATE_PLUS_TIME_UNIX),  # testSchemalessTimestampToUnix
        ("string", DATE_PLUS_TIME, DATE_PLUS_TIME_STRING),  # testSchemalessTimestampToString
        ("Timestamp", DATE, dt.datetime(1970, 1, 2, tzinfo=UTC)),  # testSchemalessDateToTimestamp
        ("Timestamp", TIME, dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=UTC)),  # ...TimeToTimestamp
        ("Timestamp", DATE_PLUS_TIME_UNIX, DATE_PLUS_TIME),  # testSchemalessUnixToTimestamp
        ("Timestamp", DATE_PLUS_TIME_STRING, DATE_PLUS_TIME),  # testSchemalessStringToTimestamp
        ("string", None, None),  # testSchemalessNullValueToString (and the others)
        ("unix", None, None),
    ],
)
def test_timestamp_converter_schemaless(target: str, given: Any, expected: Any) -> None:
    out = apply(smt("TimestampConverter$Value", target_type=target, format=STRING_DATE_FMT), rec(given))
    assert out.value_schema is None and out.value == expected


@pytest.mark.parametrize(
    ("precision", "expected"),
    [("microseconds", 86_401_234_000), ("nanoseconds", 86_401_234_000_000), ("seconds", 86_401)],
)
def test_timestamp_converter_string_to_unix_precisions(precision: str, expected: int) -> None:
    # testSchemalessStringToUnix_*: the sub-millisecond part is lost (java.util.Date is the pivot)
    xform = smt(
        "TimestampConverter$Value", target_type="unix", unix_precision=precision, format=STRING_DATE_FMT
    )
    assert apply(xform, rec(DATE_PLUS_TIME_STRING)).value == expected


@pytest.mark.parametrize(
    ("target", "schema", "given", "out_schema", "expected"),
    [
        ("Timestamp", TIMESTAMP, DATE_PLUS_TIME, TIMESTAMP, DATE_PLUS_TIME),  # testWithSchemaIdentity
        ("Date", TIMESTAMP, DATE_PLUS_TIME, DATE_SCHEMA, DATE),
        ("Time", TIMESTAMP, DATE_PLUS_TIME, TIME_SCHEMA, TIME),
        ("unix", TIMESTAMP, DATE_PLUS_TIME, "long", DATE_PLUS_TIME_UNIX),
        ("string", TIMESTAMP, DATE_PLUS_TIME, "string", DATE_PLUS_TIME_STRING),
        ("Timestamp", DATE_SCHEMA, DATE, TIMESTAMP, dt.datetime(1970, 1, 2, tzinfo=UTC)),
        ("Timestamp", TIME_SCHEMA, TIME, TIMESTAMP, dt.datetime(1970, 1, 1, 0, 0, 1, 234000, tzinfo=UTC)),
        ("Timestamp", "long", DATE_PLUS_TIME_UNIX, TIMESTAMP, DATE_PLUS_TIME),
        ("Timestamp", "string", DATE_PLUS_TIME_STRING, TIMESTAMP, DATE_PLUS_TIME),
    ],
)
def test_timestamp_converter_with_schema(
    target: str, schema: Any, given: Any, out_schema: Any, expected: Any
) -> None:
    out = apply(
        smt("TimestampConverter$Value", target_type=target, format=STRING_DATE_FMT), rec(given, schema)
    )
    assert out.value_schema == out_schema and out.value == expected


@pytest.mark.parametrize("target", ["Timestamp", "unix", "Time", "Date", "string"])
@pytest.mark.parametrize("source", [TIMESTAMP, DATE_SCHEMA, TIME_SCHEMA, "long", "string"])
def test_timestamp_converter_null_values_with_optional_schemas(target: str, source: Any) -> None:
    # testWithSchemaNullValueTo* and testWithSchemaNullFieldTo*: optional in, optional out, null kept
    expected = {
        "Timestamp": TIMESTAMP,
        "unix": "long",
        "Time": TIME_SCHEMA,
        "Date": DATE_SCHEMA,
        "string": "string",
    }[target]
    xform = smt("TimestampConverter$Value", target_type=target, format=STRING_DATE_FMT)
    out = apply(xform, rec(None, ["null", source]))
    assert out.value is None and out.value_schema == ["null", expected]
    struct = {
        "type": "record",
        "name": "S",
        "fields": [
            {"name": "ts", "type": ["null", source], "default": None},
            {"name": "other", "type": "string"},
        ],
    }
    field = smt("TimestampConverter$Value", target_type=target, format=STRING_DATE_FMT, field="ts")
    out = apply(field, rec({"ts": None, "other": "test"}, struct))
    assert out.value == {"ts": None, "other": "test"}
    assert out.value_schema == {
        "type": "record",
        "name": "S",
        "fields": [
            {"name": "ts", "type": ["null", expected], "default": None},
            {"name": "other", "type": "string"},
        ],
    }
    out = apply(field, rec(None, ["null", struct]))  # the entire struct is null
    assert out.value is None and out.value_schema == ["null", out.value_schema[1]]
    assert out.value_schema[1]["fields"][0]["type"] == ["null", expected]


def test_timestamp_converter_fields() -> None:
    # testSchemalessFieldConversion
    xform = smt("TimestampConverter$Value", target_type="Date", field="ts")
    assert apply(xform, rec({"ts": DATE_PLUS_TIME})).value == {"ts": DATE}
    # testWithSchemaFieldConversion (+ _Micros, _Nanos, _Seconds)
    struct = {
        "type": "record",
        "name": "S",
        "fields": [{"name": "ts", "type": "long"}, {"name": "other", "type": "string"}],
    }
    for precision, given, expected in (
        ("milliseconds", DATE_PLUS_TIME_UNIX, DATE_PLUS_TIME),
        ("microseconds", DATE_PLUS_TIME_UNIX_MICROS, DATE_PLUS_TIME),
        ("nanoseconds", DATE_PLUS_TIME_UNIX_NANOS, DATE_PLUS_TIME),
        ("seconds", DATE_PLUS_TIME_UNIX_SECONDS, dt.datetime(1970, 1, 2, 0, 0, 1, tzinfo=UTC)),
    ):
        xform = smt("TimestampConverter$Value", target_type="Timestamp", field="ts", unix_precision=precision)
        out = apply(xform, rec({"ts": given, "other": "test"}, struct))
        assert out.value == {"ts": expected, "other": "test"}
        assert out.value_schema == {
            "type": "record",
            "name": "S",
            "fields": [{"name": "ts", "type": TIMESTAMP}, {"name": "other", "type": "string"}],
        }


def test_timestamp_converter_key_variant_and_record_errors() -> None:
    key = smt("TimestampConverter$Key", target_type="unix")
    out = apply(key, SinkRecord(topic="t", partition=0, offset=1, key=DATE_PLUS_TIME, value="v"))
    assert out.key == DATE_PLUS_TIME_UNIX and out.value == "v"
    with pytest.raises(RecordError, match="does not support float objects") as caught:
        smt("TimestampConverter$Value", target_type="unix").apply(rec(1.5))
    assert caught.value.stage == "TRANSFORMATION" and caught.value.offset == 5
    with pytest.raises(RecordError, match="does not match pattern"):
        smt("TimestampConverter$Value", target_type="unix", format="yyyy-MM-dd").apply(rec("24/11/2026"))
    with pytest.raises(RecordError, match="requires format option"):
        smt("TimestampConverter$Value", target_type="unix").apply(rec("2026-11-24"))


def test_timestamp_converter_documentation_example() -> None:
    # Kafka docs: field=event_date_long, target.type=string, format=yyyy-MM-dd HH:mm:ss
    xform = smt(
        "TimestampConverter$Value",
        field="event_date_long",
        target_type="string",
        format="yyyy-MM-dd HH:mm:ss",
    )
    out = apply(xform, rec({"event_date_long": 1_700_000_000_000}))
    assert out.value == {"event_date_long": "2023-11-14 22:13:20"}


# ------------------------------------------------------------------------------------ routers


@pytest.mark.parametrize(
    ("regex", "replacement", "topic", "expected"),
    [
        ("foo", "bar", "foo", "bar"),  # staticReplacement
        ("foo", "bar", "orig", "orig"),  # doesntMatch
        ("(.*)", "$1", "orig", "orig"),  # identity
        ("(.*)", "prefix-$1", "orig", "prefix-orig"),  # addPrefix
        ("(.*)", "$1-suffix", "orig", "orig-suffix"),  # addSuffix
        (r"(.*)-(\d\d\d\d\d\d\d\d)", "$1", "index-20160117", "index"),  # slice
        ("foo", "bar", "xfoo", "xfoo"),  # matches() is a whole-topic match
        ("(?<name>.*)", "${name}-x", "orig", "orig-x"),
        (r"(.*)", r"\$1-$1", "orig", "$1-orig"),
    ],
)
def test_regex_router(regex: str, replacement: str, topic: str, expected: str) -> None:
    regex = regex.replace("(?<", "(?P<")  # Java's named group, as Python writes it
    out = apply(smt("RegexRouter", regex=regex, replacement=replacement), rec(topic=topic))
    assert out.topic == expected and out.offset == 5


def test_regex_router_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"transforms\.t1\.regex"):
        smt("RegexRouter", regex="(", replacement="x")
    with pytest.raises(ConfigError, match=r"transforms\.t1\.replacement"):
        smt("RegexRouter", regex="x")


def test_timestamp_router() -> None:
    # defaultConfiguration: 1483425001864 is 2017-01-03 in UTC
    assert apply(smt("TimestampRouter"), rec(topic="test", timestamp=1483425001864)).topic == "test-20170103"
    custom = smt("TimestampRouter", topic_format="${timestamp}_${topic}", timestamp_format="yyyy/MM/dd HH")
    assert apply(custom, rec(topic="t", timestamp=1483425001864)).topic == "2017/01/03 06_t"
    with pytest.raises(RecordError, match="Timestamp missing on record"):
        smt("TimestampRouter").apply(rec(timestamp=None))


# ------------------------------------------------------------------------ Filter and headers


def test_filter_drops_and_a_predicate_limits_it() -> None:
    assert smt("Filter").apply(rec("x")) is None
    chain = parse_transforms(
        {
            "transforms": "drop",
            "transforms.drop.type": PKG + "Filter",
            "transforms.drop.predicate": "tomb",
            "predicates": "tomb",
            "predicates.tomb.type": PKG + "predicates.RecordIsTombstone",
        }
    )
    assert chain.apply(rec(None)) == [] and chain.apply(rec("x")) == [rec("x")]


HEADERS = (
    ("AAA", "dummy value"),
    ("BBB", "dummy value"),
    ("AAA", "dummy value"),
    ("CCC", "dummy value"),
    ("DDD", "dummy value"),
    ("DDD", "dummy value"),
)


@pytest.mark.parametrize(
    ("names", "headers", "expected"),
    [
        ("AAA", (("AAA", "dummy value"),), ()),  # dropAllHeaders
        ("BBB", (("AAA", "dummy value"), ("BBB", "dummy value")), (("AAA", "dummy value"),)),
        ("BBB", (), ()),  # dropOneHeaderOutOfZero
        (
            "AAA",
            (("BBB", "dummy value"), ("CCC", "dummy value")),
            (("BBB", "dummy value"), ("CCC", "dummy value")),
        ),
        ("AAA,BBB", HEADERS, (("CCC", "dummy value"), ("DDD", "dummy value"), ("DDD", "dummy value"))),
    ],
)
def test_drop_headers(
    names: str, headers: tuple[tuple[str, Any], ...], expected: tuple[tuple[str, Any], ...]
) -> None:
    assert apply(smt("DropHeaders", headers=names), rec("v", headers=headers)).headers == expected


def test_drop_headers_needs_names() -> None:
    with pytest.raises(ConfigError, match=r"transforms\.t1\.headers"):
        smt("DropHeaders")


@pytest.mark.parametrize(
    ("literal", "expected"),
    [
        ("dummy value", "dummy value"),  # insertHeaderWithStringValue
        ("2", 2),  # insertHeaderWithInt8Value
        ("18000", 18000),
        ("50000", 50000),
        ("87474836647", 87474836647),
        ("2353245343456.435435", 2353245343456.435435),  # ...FloatValue (a double)
        ("2019-08-23", dt.date(2019, 8, 23)),  # insertHeaderWithDateValue
        ("14\\:34\\:54.346Z", dt.time(14, 34, 54, 346000)),  # insertHeaderWithTimeValue
        ("2019-08-23T14\\:34\\:54.346Z", dt.datetime(2019, 8, 23, 14, 34, 54, 346000, tzinfo=UTC)),
    ],
)
def test_insert_header(literal: str, expected: Any) -> None:
    out = apply(smt("InsertHeader", header="AAA", value_literal=literal), rec("v", headers=(("BBB", "x"),)))
    assert out.headers == (("BBB", "x"), ("AAA", expected))
    assert type(out.headers[1][1]) is type(expected)


def test_insert_header_null_value_same_key_and_blank_name() -> None:
    assert apply(smt("InsertHeader", header="AAA"), rec("v")).headers == (("AAA", None),)
    same = apply(smt("InsertHeader", header="AAA", value_literal="new"), rec("v", headers=(("AAA", "old"),)))
    assert same.headers == (("AAA", "old"), ("AAA", "new"))
    with pytest.raises(ConfigError, match=r"transforms\.t1\.header"):
        smt("InsertHeader", header="", value_literal="x")


# --------------------------------------------------------------------------------- predicates


def test_topic_name_matches() -> None:
    p = predicate("TopicNameMatches", pattern="my-prefix-.*")
    for topic, expected in (
        ("my-prefix-", True),
        ("my-prefix-foo", True),
        ("x-my-prefix-", False),
        ("x-my-prefix-foo", False),
        ("your-prefix-", False),
        ("your-prefix-foo", False),
    ):
        assert p.test(rec(topic=topic)) is expected
    with pytest.raises(ConfigError, match=r"predicates\.p\.pattern"):
        predicate("TopicNameMatches", pattern="*")
    with pytest.raises(ConfigError, match=r"predicates\.p\.pattern"):
        predicate("TopicNameMatches")


def test_has_header_key_and_record_is_tombstone() -> None:
    p = predicate("HasHeaderKey", name="headerName")
    assert p.test(rec(headers=(("headerName", "value"),))) and p.test(rec(headers=(("headerName", None),)))
    assert not p.test(rec(headers=(("other", "v"),))) and not p.test(rec())
    with pytest.raises(ConfigError, match=r"predicates\.p\.name"):
        predicate("HasHeaderKey")
    tomb = predicate("RecordIsTombstone")
    assert tomb.test(rec(None)) and not tomb.test(rec("v"))
    with pytest.raises(ConfigError, match=r"predicates\.p\.extra"):
        predicate("RecordIsTombstone", extra="1")


def test_timestamp_converter_truncates_like_java_long_division() -> None:
    # 1_700_000_000_123_999_999 ns is 22:13:20.123999999: Java keeps .123 (a float would round to .124)
    xform = smt("TimestampConverter$Value", target_type="Timestamp", unix_precision="nanoseconds")
    out = apply(xform, rec(1_700_000_000_123_999_999))
    assert out.value == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=UTC)
    back = smt("TimestampConverter$Value", target_type="unix", unix_precision="seconds")
    before_epoch = dt.datetime(1969, 12, 31, 23, 59, 58, 500000, tzinfo=UTC)  # -1,500 ms
    assert apply(back, rec(before_epoch)).value == -1  # toward zero, as TimeUnit.toSeconds
