"""``_date`` from a record field and in a time zone (timestamp.field/format/unit, timezone).

Every expected directory is worked out by hand from the calendar and the zone rules (Paris is
UTC+1 in winter, UTC+2 from 2026-03-29 01:00 UTC; Tokyo is UTC+9), never by the code under test.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

import kcql
from kcql.errors import KcqlSemanticError
from kcql.explain import explain_dict
from partitioners import Partitioner, PartitionError
from sink.records.record import SinkRecord

HOURLY = "PARTITIONBY _date.`'date='uuuu-MM-dd/'hour='HH`"


def path(
    properties: str,
    *,
    value: Any = None,
    key: Any = None,
    headers: Any = (),
    timestamp: int | None = None,
    partition_by: str = HOURLY,
) -> str:
    keys = "'partition.include.keys'=false"
    text = f"INSERT INTO b SELECT * FROM t {partition_by} PROPERTIES({keys}, {properties})"  # noqa: S608
    plan = kcql.parse_one(text)
    record = SinkRecord(
        topic="t", partition=0, offset=42, timestamp=timestamp, key=key, value=value, headers=headers
    )
    return Partitioner(plan).path_for(record)


PARIS = "'timestamp.field'='_value.created', 'timezone'='Europe/Paris'"


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        ("2026-03-28T23:30:00Z", "date=2026-03-29/hour=00"),  # winter: UTC+1
        ("2026-03-29T01:30:00Z", "date=2026-03-29/hour=03"),  # summer time began at 01:00 UTC
        ("2026-11-24T10:15:00+01:00", "date=2026-11-24/hour=10"),  # an offset of its own
        ("2026-11-24T10:15:00-05:00", "date=2026-11-24/hour=16"),
        ("2026-07-01T12:00:00", "date=2026-07-01/hour=12"),  # no offset: local time in the zone
        ("2026-07-01", "date=2026-07-01/hour=00"),
    ],
)
def test_iso_text_in_paris(created: str, expected: str) -> None:
    assert path(PARIS, value={"created": created}, timestamp=0) == expected


def test_epoch_numbers_in_their_unit() -> None:
    # 1_700_000_000 s is 2023-11-14T22:13:20Z: 23:13 in Paris
    assert path(PARIS, value={"created": 1_700_000_000_000}) == "date=2023-11-14/hour=23"
    seconds = PARIS + ", 'timestamp.unit'='seconds'"
    assert path(seconds, value={"created": 1_700_000_000}) == "date=2023-11-14/hour=23"
    nanos = PARIS + ", 'timestamp.unit'='nanoseconds'"
    assert path(nanos, value={"created": 1_700_000_000_123_456_789}) == "date=2023-11-14/hour=23"


def test_a_custom_format_is_local_time_in_the_zone() -> None:
    props = PARIS + ", 'timestamp.format'='dd/MM/uuuu HH:mm'"
    assert path(props, value={"created": "24/11/2026 09:05"}) == "date=2026-11-24/hour=09"


def test_key_and_header_fields_and_date_values() -> None:
    key = "'timestamp.field'='_key.at', 'timezone'='Asia/Tokyo'"
    assert path(key, key={"at": "2026-11-24T20:00:00Z"}) == "date=2026-11-25/hour=05"
    header = "'timestamp.field'='_header.when'"
    headers = (("when", "2026-01-01T00:00:00Z"), ("when", "2026-02-02T02:00:00Z"))  # the last one wins
    assert path(header, headers=headers) == "date=2026-02-02/hour=02"
    avro = {"created": dt.datetime(2026, 1, 1, 23, 30, tzinfo=dt.UTC)}  # a timestamp-millis value
    assert path(PARIS, value=avro) == "date=2026-01-02/hour=00"
    assert path(PARIS, value={"created": dt.date(2026, 5, 1)}) == "date=2026-05-01/hour=00"
    nested = "'timestamp.field'='meta.created'"
    assert path(nested, value={"meta": {"created": "2026-05-01T07:00:00Z"}}) == "date=2026-05-01/hour=07"


def test_the_kafka_timestamp_in_a_zone() -> None:
    # 2023-11-14T22:13:20Z is 07:13 on the 15th in Tokyo
    assert path("'timezone'='Asia/Tokyo'", timestamp=1_700_000_000_000) == "date=2023-11-15/hour=07"
    assert path("'flush.count'=1", timestamp=1_700_000_000_000) == "date=2023-11-14/hour=22"  # UTC default


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"id": 1}, "missing or null"),
        ({"created": None}, "missing or null"),
        (None, "missing or null"),
        ({"created": "yesterday"}, "'yesterday' is not ISO-8601"),
        ({"created": True}, "is a boolean"),
        ({"created": [1]}, "a list is not a time"),
    ],
)
def test_a_record_without_a_usable_time_cannot_be_placed(value: Any, says: str) -> None:
    with pytest.raises(PartitionError, match=says) as caught:
        path(PARIS, value=value, timestamp=1)
    error = caught.value
    assert error.offset == 42 and "_value.created" in str(error) and "offset 42" in str(error)


@pytest.mark.parametrize(
    ("properties", "says"),
    [
        ("'timezone'='Mars/Base'", "timezone 'Mars/Base' is not a time zone"),
        ("'timestamp.field'='a', 'timestamp.unit'='days'", "timestamp.unit must be one of"),
        ("'timestamp.format'='uuuu'", "set timestamp.field too"),
        ("'timestamp.field'='a', 'timestamp.format'='uuuu-QQ'", "timestamp.format 'uuuu-QQ'"),
        ("'timestamp.field'='_header'", "_header needs a header name"),
        ("'timestamp.field'='_topic'", "takes a key, value or header field"),
        ("'timestamp.field'='a..b'", "a path segment is empty"),
    ],
)
def test_bad_settings_are_kcql_errors_at_the_property(properties: str, says: str) -> None:
    with pytest.raises(KcqlSemanticError, match=says) as caught:
        path(properties)
    assert caught.value.line == 1 and caught.value.column > len(f"INSERT INTO b SELECT * FROM t {HOURLY}")  # noqa: S608


def test_the_properties_need_a_date_entry() -> None:
    with pytest.raises(KcqlSemanticError, match="no PARTITIONBY _date"):
        path("'timezone'='Europe/Paris'", partition_by="PARTITIONBY country")


def test_explain_shows_the_source_and_zone() -> None:
    plan = kcql.parse_one(f"INSERT INTO b SELECT * FROM t {HOURLY} PROPERTIES({PARIS})")  # noqa: S608
    assert explain_dict(plan)["date"] == {
        "source": "_value.created",
        "zone": "Europe/Paris",
        "format": "ISO-8601",
        "unit": "milliseconds",
    }
    default = kcql.parse_one(f"INSERT INTO b SELECT * FROM t {HOURLY}")  # noqa: S608
    assert explain_dict(default)["date"] == {
        "source": "record timestamp",
        "zone": "UTC",
        "format": None,
        "unit": None,
    }
    assert explain_dict(kcql.parse_one("INSERT INTO b SELECT * FROM t"))["date"] is None


def test_an_out_of_range_kafka_timestamp_in_a_zone_is_a_partition_error() -> None:
    with pytest.raises(PartitionError, match="cannot be formatted") as caught:
        path("'timezone'='Europe/Paris'", timestamp=10**18)
    assert caught.value.offset == 42
