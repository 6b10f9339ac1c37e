"""Listing committed files: storage settings, hidden objects, every layout, view naming."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from kcql.errors import ConfigError
from kcql.model import FileNaming, StoreFormat
from spark_reader.catalog import list_files, partition_columns, sanitize_identifier, view_specs
from spark_reader.storage import StorageSettings
from tests.unit.spark_reader import lenses_data as ld

LAYOUTS = ("default", "default-kv", "values", "kv", "nopartition")


@pytest.mark.parametrize("layout", LAYOUTS)
def test_lists_exactly_the_committed_files(tmp_path: Path, layout: str) -> None:
    p = ld.plan(StoreFormat.JSON, layout)
    keys = ld.write_with_sink_libs(p, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path)
    assert (tmp_path / "bkt" / ".indexes").is_dir()  # the litter is really there
    files = list_files(p, StorageSettings(kind="local", root=str(tmp_path)))
    assert sorted(f.key for f in files) == sorted(keys)
    # sorted by topic, partition, offset
    assert [(f.partition, f.last_offset) for f in files] == sorted(
        (f.partition, f.last_offset) for f in files
    )
    by_partition = {f.partition for f in files}
    assert by_partition == {0, 1}


def test_partition_values_are_unescaped_and_typed(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.JSON, "kv")
    ld.write_with_sink_libs(p, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path)
    files = list_files(p, StorageSettings(kind="local", root=str(tmp_path)))
    assert {f.values[0] for f in files} == set(ld.REGIONS)
    assert {f.values[1] for f in files} == {"0", "1"}
    cols = partition_columns(p, files, taken=["id", "name", "amount", "region"])
    assert [(c.column, c.integer) for c in cols] == [("part_region", False), ("partition", True)]


def test_default_layout_derives_first_offsets_from_the_previous_file(tmp_path: Path) -> None:
    p = ld.plan(StoreFormat.JSON, "default")
    ld.write_with_sink_libs(p, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path, per_file=4)
    files = [f for f in list_files(p, StorageSettings(kind="local", root=str(tmp_path))) if f.partition == 0]
    assert [(f.first_offset, f.last_offset) for f in files] == [(None, 3), (4, 7), (8, 8)]
    assert files[0].min_timestamp == 1_700_000_000_000


def test_topic_narrows_the_listing(tmp_path: Path) -> None:
    p = dataclasses.replace(ld.plan(StoreFormat.JSON, "default"), source="*")
    put = ld.local_put(tmp_path / "bkt")
    ld.write_with_sink_libs(p, ld.records("orders"), put, tmp_path)
    ld.write_with_sink_libs(p, ld.records("refunds"), put, tmp_path)
    st = StorageSettings(kind="local", root=str(tmp_path))
    assert {f.topic for f in list_files(p, st)} == {"orders", "refunds"}
    assert {f.topic for f in list_files(p, st, topic="refunds")} == {"refunds"}
    assert {(f.topic, f.partition) for f in list_files(p, st, topic="orders", partition=1)} == {("orders", 1)}


def test_confluent_naming_is_listed(tmp_path: Path) -> None:
    p = dataclasses.replace(ld.plan(StoreFormat.JSON, "default", prefix=""), naming=FileNaming.CONFLUENT)
    keys = ld.write_with_sink_libs(p, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path)
    assert keys[0].startswith("topics/orders/")
    files = list_files(p, StorageSettings(kind="local", root=str(tmp_path)))
    assert sorted(f.key for f in files) == sorted(keys)
    assert {f.first_offset for f in files if f.partition == 0} == {0, 4, 8}


def test_missing_bucket_is_a_clear_error(tmp_path: Path) -> None:
    from spark_reader.storage import ReaderStorageError

    with pytest.raises(ReaderStorageError, match="bucket directory"):
        list_files(ld.plan(StoreFormat.JSON, "default"), StorageSettings(kind="local", root=str(tmp_path)))


def test_storage_settings_from_connect_keys() -> None:
    s3 = StorageSettings.from_config(
        {
            "connect.s3.kcql": "x",
            "connect.s3.custom.endpoint": "http://127.0.0.1:9000",
            "connect.s3.aws.auth.mode": "Credentials",
            "connect.s3.aws.access.key": "AK",
            "connect.s3.aws.secret.key": "SECRET",
            "connect.s3.vhost.bucket": "true",
        }
    )
    assert (s3.kind, s3.endpoint, s3.path_style, s3.access_key) == ("s3", "http://127.0.0.1:9000", True, "AK")
    assert "SECRET" not in repr(s3)
    assert not StorageSettings.from_config(
        {"connect.s3.path.style.access": "false", "connect.s3.vhost.bucket": "true"}
    ).path_style
    local = StorageSettings.from_config({"connect.storage": "local", "connect.local.root": "/data"})
    assert (local.kind, local.root) == ("local", "/data")
    with pytest.raises(ConfigError, match=r"connect\.local\.root"):
        StorageSettings.from_config({"connect.storage": "local"})
    with pytest.raises(ConfigError, match=r"connect\.storage"):
        StorageSettings.from_config({"connect.storage": "gcs"})
    with pytest.raises(ConfigError, match=r"secret\.key"):
        StorageSettings.from_config({"connect.s3.aws.auth.mode": "Credentials"})


def test_view_names_are_sanitized_unique_and_overridable(tmp_path: Path) -> None:
    cfg = {"connect.local.root": str(tmp_path)}
    plans = [
        ld.plan(StoreFormat.JSON, "default", prefix="backups/my-orders.v1"),
        ld.plan(StoreFormat.JSON, "default", prefix=""),
        ld.plan(StoreFormat.AVRO, "default", prefix="", bucket="other"),
        ld.plan(StoreFormat.AVRO, "default", prefix="2024"),
    ]
    names = [s.name for s in view_specs(cfg, plans=plans)]
    assert names == ["my_orders_v1", "orders", "orders_2", "_2024"]
    renamed = [s.name for s in view_specs(cfg, plans=plans, views={"my_orders_v1": "mine", "other:": "o2"})]
    assert renamed == ["mine", "orders", "o2", "_2024"]
    assert sanitize_identifier("a b/c") == "a_b_c"


def test_kcql_is_required(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"connect\.s3\.kcql"):
        view_specs({"connect.local.root": str(tmp_path)})


def test_files_that_do_not_match_the_layout_are_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    writer_plan = ld.plan(StoreFormat.JSON, "values")
    ld.write_with_sink_libs(writer_plan, ld.records(), ld.local_put(tmp_path / "bkt"), tmp_path)
    reader_plan = ld.plan(StoreFormat.JSON, "default")  # forgot the PARTITIONBY
    with caplog.at_level("WARNING", logger="spark_reader.catalog"):
        assert list_files(reader_plan, StorageSettings(kind="local", root=str(tmp_path))) == []
    assert "do not match the layout" in caplog.text
