"""The worker's state store: atomic JSON files, names that can never escape the directory."""

from __future__ import annotations

import json
import os

import pytest

from sink.rest.errors import RestError
from sink.rest.store import ConnectorRecord, StateStore, check_name


def test_round_trip_and_delete(tmp_path):
    store = StateStore(tmp_path)
    store.save(ConnectorRecord("a", {"name": "a", "k": "v"}, "PAUSED"))
    store.save(ConnectorRecord("b", {"name": "b"}, "STOPPED"))
    loaded = {r.name: r for r in StateStore(tmp_path).load_all()}
    assert loaded["a"].config == {"name": "a", "k": "v"} and loaded["a"].state == "PAUSED"
    assert loaded["b"].state == "STOPPED"
    store.delete("a")
    store.delete("never-there")
    assert [r.name for r in store.load_all()] == ["b"]


def test_files_are_private_and_no_temp_files_remain(tmp_path):
    store = StateStore(tmp_path)
    store.save(ConnectorRecord("a", {"connect.s3.aws.secret.key": "x"}))
    store.save(ConnectorRecord("a", {"connect.s3.aws.secret.key": "y"}))
    files = list((tmp_path / "connectors").iterdir())
    assert [f.name for f in files] == ["a.json"]
    assert oct(files[0].stat().st_mode & 0o777) == "0o600"
    assert json.loads(files[0].read_text())["config"] == {"connect.s3.aws.secret.key": "y"}


@pytest.mark.parametrize(
    "name", ["../evil", "..", ".", "a/b", "a\\b", "", "   ", "bad\x00name", "x" * 201, "🚀" * 21, "é" * 42]
)
def test_unusable_names_are_rejected(name):
    with pytest.raises(RestError) as info:
        check_name(name)
    assert info.value.status == 400


@pytest.mark.parametrize(
    "name", ["..evil", "a b", "ünïcode", "a%2Fb", ".hidden", "x" * 200, "🚀" * 20, "é" * 41]
)
def test_odd_but_valid_names_stay_inside_the_directory(tmp_path, name):
    store = StateStore(tmp_path)
    store.save(ConnectorRecord(check_name(name), {"name": name}))
    inside = {os.path.realpath(p) for p in (tmp_path / "connectors").iterdir()}
    assert all(p.startswith(str((tmp_path / "connectors").resolve())) for p in inside)
    assert [r.name for r in store.load_all()] == [name.strip()]


def test_a_corrupt_file_is_skipped_not_deleted(tmp_path):
    store = StateStore(tmp_path)
    store.save(ConnectorRecord("good", {"name": "good"}))
    bad = tmp_path / "connectors" / "bad.json"
    bad.write_text("{not json")
    assert [r.name for r in store.load_all()] == ["good"]
    assert bad.exists()
