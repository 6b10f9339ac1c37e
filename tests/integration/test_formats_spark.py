"""Spark reads what the format writers produce: Parquet, JSON (plain and .gz) and CSV.

Spark is the reader our users query with, and it is independent of our code. AVRO is checked with
fastavro in the unit tests: pyspark ships without the external spark-avro module, and nothing may
be downloaded at test time.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pytest

from formats import FormatSettings
from kcql.model import EnvelopeFields, StoreFormat
from tests.unit.formats.records import CREATED_MS, orders, write_rolling

pytestmark = pytest.mark.spark

N = 40


def _dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_parquet_values_and_envelope(spark, tmp_path: Path) -> None:
    plain = _dir(tmp_path, "plain")
    env = _dir(tmp_path, "env")
    write_rolling(plain, FormatSettings(format=StoreFormat.PARQUET, codec="SNAPPY"), orders(N), batch=7)
    write_rolling(
        env, FormatSettings(format=StoreFormat.PARQUET, codec="ZSTD", envelope=EnvelopeFields()), orders(N)
    )

    df = spark.read.parquet(str(plain))
    types = dict(df.dtypes)
    assert types["price"] == "decimal(10,2)"
    assert types["created"] == "timestamp"
    assert types["day"] == "date"
    assert types["address"] == "struct<street:string,zip:string>"
    assert types["attrs"] == "map<string,bigint>"
    row = (
        df.where("id = 0").select("name", "price", "created", "day", "address.street", "note", "tags").first()
    )
    assert row.name == 'ördér-0 ✓, "quoted"'
    assert row.price == Decimal("12.34")
    assert row.created.replace(tzinfo=UTC) == datetime(2024, 3, 1, 12, 30, 45, 123000, tzinfo=UTC)
    assert row.day == date(2024, 3, 1)
    assert row.street == "0 Main St"
    assert row.note == "note 0\nsecond line"
    stats = df.selectExpr(
        "count(*) AS n", "count(note) AS notes", "sum(price) AS total", "max(attrs['k']) AS k"
    ).first()
    assert stats.n == N and stats.notes == N // 2 and stats.k == N - 1
    assert stats.total == sum(Decimal("12.34") + i for i in range(N))

    edf = spark.read.parquet(str(env))
    assert edf.columns == ["key", "value", "headers", "metadata"]
    agg = edf.selectExpr(
        "count(*) AS n",
        "count(key) AS keys",
        "sum(size(filter(headers, h -> h.name = 'trace-id'))) AS traces",
        "sum(size(filter(headers, h -> h.name = 'bin' AND h.value_bytes = X'00FF'))) AS bins",
        "min(metadata.timestamp) AS ts",
        "max(metadata.offset) AS last",
        "sum(value.price) AS total",
    ).first()
    assert agg.n == N
    assert agg.keys == N - N // 3  # every third key is null
    expected_headers = [i % 4 for i in range(N)]  # records carry 0..3 of the three headers
    assert agg.traces == sum(min(h, 1) + (1 if h == 3 else 0) for h in expected_headers)
    assert agg.bins == sum(1 for h in expected_headers if h >= 2)
    assert agg.ts == CREATED_MS and agg.last == N - 1
    assert agg.total == stats.total


@pytest.mark.parametrize("codec", ["UNCOMPRESSED", "GZIP"])
def test_json_lines_plain_and_gzip(spark, tmp_path: Path, codec: str) -> None:
    out = _dir(tmp_path, "json")
    paths = write_rolling(out, FormatSettings(format=StoreFormat.JSON, codec=codec), orders(N))
    assert paths[0].suffix == (".gz" if codec == "GZIP" else ".json")
    df = spark.read.option("prefersDecimal", "true").json(str(out))
    assert df.count() == N
    row = df.where("id = 1").select("name", "price", "created", "day", "note", "address.zip").first()
    assert row.name == 'ördér-1 ✓, "quoted"'
    assert row.price == Decimal("13.34")  # written as a number, so Spark infers a decimal
    assert row.created == CREATED_MS and row.day == 19783
    assert row.note is None and row.zip is None
    assert "_corrupt_record" not in df.columns


def test_json_envelope(spark, tmp_path: Path) -> None:
    out = _dir(tmp_path, "jenv")
    write_rolling(out, FormatSettings(format=StoreFormat.JSON, envelope=EnvelopeFields()), orders(N))
    df = spark.read.json(str(out))
    agg = df.selectExpr(
        "count(*) AS n",
        "count(key) AS keys",
        "count(headers.`trace-id`) AS traced",
        "max(metadata.offset) AS last",
    ).first()
    assert agg.n == N and agg.keys == N - N // 3 and agg.last == N - 1
    assert agg.traced == sum(1 for i in range(N) if i % 4)


def test_csv_with_headers(spark, tmp_path: Path) -> None:
    out = _dir(tmp_path, "csv")
    write_rolling(out, FormatSettings(format=StoreFormat.CSV_WITHHEADERS), orders(N), batch=9)
    df = (
        spark.read.option("header", "true")
        .option("multiLine", "true")  # values with newlines are quoted, per RFC 4180
        .option("escape", '"')
        .option("inferSchema", "true")
        .csv(str(out))
    )
    assert df.columns == ["id", "name", "price", "created", "day", "note", "address", "tags", "attrs"]
    agg = df.selectExpr(
        "count(*) AS n",
        "count(note) AS notes",
        "max(id) AS last",
        "min(created) AS created",
        "max(get_json_object(address, '$.street')) AS street",
    ).first()
    assert agg.n == N and agg.notes == N // 2 and agg.last == N - 1
    assert agg.created.replace(tzinfo=UTC) == datetime(2024, 3, 1, 12, 30, 45, 123000, tzinfo=UTC)
    assert agg.street == "9 Main St"
    row = df.where("id = 0").select("name", "note").first()
    assert row.name == 'ördér-0 ✓, "quoted"' and row.note == "note 0\nsecond line"


def test_rolled_parquet_files_after_schema_changes_merge_in_spark(spark, tmp_path: Path) -> None:
    from tests.unit.formats.records import record

    v1 = {"type": "record", "name": "U", "fields": [{"name": "id", "type": "long"}]}
    v2 = {
        "type": "record",
        "name": "U",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "email", "type": ["null", "string"], "default": None},
        ],
    }
    recs = [
        record(0, {"id": 0}, schema=v1),
        record(1, {"id": 1, "email": "a@x"}, schema=v2),  # newer: new file
        record(2, {"id": 2}, schema=v1),  # older: projected onto v2 under BACKWARD
        record(3, {"id": 3, "extra-field": "ü"}),  # schemaless: new file, inferred schema
    ]
    out = _dir(tmp_path, "evolved")
    settings = FormatSettings(format=StoreFormat.PARQUET, schema_compatibility="BACKWARD")
    paths = write_rolling(out, settings, recs)
    assert len(paths) == 3
    df = spark.read.option("mergeSchema", "true").parquet(str(out))
    rows = {r.id: r.asDict() for r in df.collect()}
    assert set(rows) == {0, 1, 2, 3}
    assert rows[1]["email"] == "a@x" and rows[2]["email"] is None
    assert rows[3]["extra-field"] == "ü"
