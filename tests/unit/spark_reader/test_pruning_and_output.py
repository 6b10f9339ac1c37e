"""Pure pieces of the Spark side: file pruning by pushed filters, config loading, sql output."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest
from pyspark.sql.datasource import (
    EqualTo,
    GreaterThanOrEqual,
    In,
    IsNull,
    LessThan,
    Not,
    StringStartsWith,
)

from kcql.errors import ConfigError
from kcql.model import StoreFormat
from sink.cli import _reader_config, cat, sql
from spark_reader.catalog import DataFile, list_files, partition_columns, view_specs
from spark_reader.datasource import _matches, file_columns, make_source
from spark_reader.storage import StorageSettings
from tests.unit.spark_reader import lenses_data as ld

ROW = {"_topic": "orders", "_partition": 3, "region": "eu", "n": None}


@pytest.mark.parametrize(
    ("flt", "keep"),
    [
        (EqualTo(("region",), "eu"), True),
        (EqualTo(("region",), "us"), False),
        (In(("_partition",), (1, 3)), True),
        (In(("_partition",), (1, 2)), False),
        (GreaterThanOrEqual(("_partition",), 3), True),
        (LessThan(("_partition",), 3), False),
        (IsNull(("n",)), True),
        (EqualTo(("n",), "x"), False),  # NULL never equals
        (Not(EqualTo(("n",), "x")), False),  # nor differs
        (Not(EqualTo(("region",), "us")), True),
        (StringStartsWith(("_topic",), "ord"), True),
        (EqualTo(("_partition",), "three"), False),
        (LessThan(("_partition",), "x"), True),  # incomparable: keep the file, Spark decides
    ],
)
def test_pushed_filters_select_files(flt, keep: bool) -> None:
    assert _matches(flt, ROW) is keep


def test_reader_prunes_on_partition_columns_and_source_fields(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.JSON, "kv")
    keys = ld.write_with_sink_libs(p, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path)
    spec = view_specs({"connect.local.root": str(tmp_path)}, plans=[p])[0]
    files = list_files(p, spec.storage)
    import pyarrow as pa

    value_schema = pa.schema([("id", pa.int64()), ("name", pa.string()), ("region", pa.string())])
    pcols = partition_columns(p, files, taken=value_schema.names)
    source = make_source(spec, value_schema, pcols)
    assert "SECRET" not in json.dumps(source.spark_schema.jsonValue())

    def planned(*filters) -> list[str]:
        reader = source({}).reader(source.spark_schema)
        returned = list(reader.pushFilters(list(filters)))
        assert returned == list(filters)  # Spark re-checks every filter
        return [f.key for part in reader.partitions() for f in part.value]

    assert sorted(planned()) == sorted(keys)
    eu1 = planned(EqualTo(("part_region",), "eu"), EqualTo(("partition",), 1))
    assert eu1 and all(k.startswith("data/region=eu/partition=1/") for k in eu1)
    slash = planned(EqualTo(("region",), "ap/south %east"))  # the value field PARTITIONBY came from
    assert slash and all(k.startswith("data/region=ap%2Fsouth %25east/") for k in slash)
    assert planned(EqualTo(("_topic",), "nope")) == []
    row = file_columns(files[0], pcols)
    assert isinstance(row["partition"], int) and row["_file"] == files[0].key


def test_config_loader_shapes(tmp_path: Path) -> None:
    """The reader commands load configs exactly like `kcql-sink run` (sink.config.files)."""
    connect = tmp_path / "c.json"
    connect.write_text(
        json.dumps({"name": "s3-sink", "config": {"connect.s3.kcql": "INSERT INTO b SELECT * FROM t"}})
    )
    flat = tmp_path / "f.json"
    flat.write_text(json.dumps({"name": "n", "connect.s3.kcql": "x", "connect.local.root": "/d"}))
    props = tmp_path / "p.properties"
    props.write_text(
        "# comment\nname=n\nconnect.s3.kcql=INSERT INTO b \\\n  SELECT * FROM t\nconnect.local.root=/d\n"
    )
    assert _reader_config.load_config(str(connect))["name"] == "s3-sink"
    assert _reader_config.load_config(str(flat))["connect.local.root"] == "/d"
    loaded = _reader_config.load_config(str(props))
    assert (
        loaded["connect.s3.kcql"] == "INSERT INTO b SELECT * FROM t" and loaded["connect.local.root"] == "/d"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    with pytest.raises(ConfigError, match="line 1"):
        _reader_config.load_config(str(bad))
    with pytest.raises(ConfigError, match="cannot read"):
        _reader_config.load_config(str(tmp_path / "missing.json"))


def test_sql_output_formats() -> None:
    rows = [{"a": 1, "b": {"x": b"\x00"}, "c": None}, {"a": 22, "b": None, "c": "t"}]
    out = io.StringIO()
    sql._print(rows, ["a", "b", "c"], "table", out)
    text = out.getvalue()
    assert (
        "| a  | b             | c    |" in text
        and "| 22 | NULL          | t    |" in text
        and "(2 rows)" in text
    )
    out = io.StringIO()
    sql._print(rows, ["a", "b", "c"], "json", out)
    assert json.loads(out.getvalue().splitlines()[0]) == {"a": 1, "b": {"x": "AA=="}, "c": None}
    out = io.StringIO()
    sql._print(rows, ["a", "b", "c"], "csv", out)
    assert out.getvalue().splitlines() == ["a,b,c", '1,"{""x"": ""AA==""}",', "22,,t"]


def test_command_argument_errors(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    sql.register(sub)
    cat.register(sub)
    args = parser.parse_args(["cat", "--config", str(tmp_path / "x.json"), "--from-offset", "-1"])
    with pytest.raises(cat.CatError, match="--from-offset"):
        args.func(args)
    args = parser.parse_args(["sql", "SELECT 1", "--config", "x.json", "--view", "nonsense"])
    with pytest.raises(ConfigError):  # the missing config is reported first
        args.func(args)


def test_datafile_sort_key() -> None:
    a = DataFile("x/1", 1, "t", 0, last_offset=10)
    b = DataFile("x/2", 1, "t", 0, last_offset=9)
    assert sorted([a, b], key=DataFile.sort_key) == [b, a]
    assert StorageSettings(kind="local", root="/r") == StorageSettings(kind="local", root="/r")
