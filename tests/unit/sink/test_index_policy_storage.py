"""Index state transitions, flush policy, storage error mapping and local conditional-write races."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from botocore.exceptions import ClientError, EndpointConnectionError

from kcql.errors import SinkError
from sink.commit.index import IndexState, PartitionIndex, PendingCommit, index_key, temp_prefix
from sink.config.buckets import bucket_name_problem
from sink.records.record import TopicPartition
from sink.storage.base import (
    ObjectNotFound,
    PreconditionFailed,
    StorageError,
    TransientStorageError,
    map_exceptions,
)
from sink.storage.local import LocalStorage
from sink.storage.s3 import _classify, _Denied
from sink.task.flush_policy import FlushPolicy

TP = TopicPartition("orders", 3)


def test_after_commit_tracks_paths_ahead_and_prunes() -> None:
    state = IndexState(owner="me", epoch=2, committed_offset=10)
    state = state.after_commit("a", last_offset=20, committed_after=10)  # another writer still open at 11
    assert state.committed_offset == 10
    assert state.paths == {"a": 20}
    assert state.skip_threshold("a") == 20
    assert state.skip_threshold("b") == 10
    state = state.after_commit("b", last_offset=25, committed_after=22)
    assert state.committed_offset == 22
    assert state.paths == {"b": 25}  # a (20) <= 22: pruned
    assert state.after_commit("b", 30, committed_after=5).committed_offset == 22  # never goes back


def test_index_roundtrip_and_corruption() -> None:
    pending = PendingCommit("t", "f", 9, "p", '"e"', 7)
    state = IndexState(owner="me", epoch=3, committed_offset=None, paths={"x": 4}, pending=pending)
    assert IndexState.from_bytes(state.to_bytes(), "here") == state
    with pytest.raises(SinkError, match="index s3://b/k is corrupt"):
        IndexState.from_bytes(b"{not json", "s3://b/k")


def test_index_versions_older_read_newer_refused() -> None:
    """A version-1 index (before the conditional protocol) still reads; a newer one is refused by
    name, since dropping fields it does not know (an ``owed`` list) would lose files."""
    v1 = b'{"version": 1, "owner": "me", "epoch": 2, "committedOffset": 5, "paths": {}, "pending": null}'
    assert IndexState.from_bytes(v1, "here").committed_offset == 5
    assert b'"version": 2' in IndexState.from_bytes(v1, "here").to_bytes()
    with pytest.raises(SinkError, match=r"index s3://b/k has version 3, written by a newer kcql-sink"):
        IndexState.from_bytes(v1.replace(b'"version": 1', b'"version": 3'), "s3://b/k")


def test_keys() -> None:
    assert index_key(".indexes", "my conn", TP) == ".indexes/my conn/orders/3.json"
    assert index_key(".indexes", "a/b", TP) == ".indexes/a%2Fb/orders/3.json"
    assert temp_prefix("c", TP) == ".temp-upload/c/orders/3/"


def test_acquire_bumps_epoch_and_fences_the_previous_owner(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    first = PartitionIndex(storage, "bkt", ".indexes/c/orders/3.json", TP, "task-a")
    assert first.acquire().epoch == 1
    second = PartitionIndex(storage, "bkt", ".indexes/c/orders/3.json", TP, "task-b")
    assert second.acquire().epoch == 2
    with pytest.raises(SinkError, match=r"now owned by task task-b \(epoch 2\)"):
        first.write(first.state)
    second.write(second.state)  # the owner still can


def test_flush_policy() -> None:
    policy = FlushPolicy(count=3, size=100, interval=5)
    assert policy.reason(0, 10**6, 0.0, 100.0) is None  # empty files never flush
    assert policy.reason(3, 0, 0.0, 0.0) == "count"
    assert policy.reason(1, 100, 0.0, 0.0) == "size"
    assert policy.reason(1, 99, 10.0, 14.9) is None
    assert policy.reason(1, 99, 10.0, 15.0) == "interval"
    assert policy.room(1) == 2
    assert policy.deadline(10.0) == 15.0


def _client_error(code: str, status: int) -> ClientError:
    response = {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}
    return ClientError(response, "PutObject")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (_client_error("PreconditionFailed", 412), PreconditionFailed),
        (_client_error("ConditionalRequestConflict", 409), PreconditionFailed),
        (_client_error("NoSuchKey", 404), ObjectNotFound),
        (_client_error("SlowDown", 503), TransientStorageError),
        (_client_error("InternalError", 500), TransientStorageError),
        (_client_error("AccessDenied", 403), _Denied),
        (EndpointConnectionError(endpoint_url="http://x"), TransientStorageError),
        (ValueError("a bug"), None),
    ],
)
def test_s3_error_mapping(exc: BaseException, expected: type[StorageError] | None) -> None:
    assert _classify(exc) is expected


def test_map_exceptions_keeps_programming_errors() -> None:
    with (
        pytest.raises(TransientStorageError, match="put s3://b/k failed") as err,
        map_exceptions("put s3://b/k", _classify),
    ):
        raise _client_error("SlowDown", 503)
    assert err.value.retriable
    with pytest.raises(KeyError), map_exceptions("x", _classify):
        raise KeyError("bug")


@pytest.mark.parametrize(
    ("name", "ok"),
    [("my-bucket", True), ("a.b.c", True), ("ab", False), ("Upper", False), ("a..b", False),
     ("192.168.1.1", False), ("-dash", False), ("under_score", False)],
)
def test_bucket_names(name: str, ok: bool) -> None:
    assert (bucket_name_problem(name) is None) is ok


def test_local_conditional_writes_have_one_winner_under_races(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    etag = storage.put_bytes("bkt", "k", b"original")  # no contender writes these bytes again
    wins: list[int] = []
    creates: list[int] = []
    barrier = threading.Barrier(8)

    def contend(i: int) -> None:
        barrier.wait()
        try:
            storage.put_bytes("bkt", "k", f"v{i}".encode(), if_match=etag)
            wins.append(i)
        except PreconditionFailed:
            pass
        try:
            storage.put_bytes("bkt", "new", b"x", if_none_match=True)
            creates.append(i)
        except PreconditionFailed:
            pass

    threads = [threading.Thread(target=contend, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(wins) == 1
    assert len(creates) == 1
    assert storage.get("bkt", "k").data == f"v{wins[0]}".encode()
    assert [i.key for i in storage.list("bkt")] == ["k", "new"]  # no temp files listed


def test_local_delete_prunes_empty_directories(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    storage.put_bytes("bkt", "a/b/c/k", b"x")
    storage.delete("bkt", "a/b/c/k")
    assert list((tmp_path / "bkt").iterdir()) == []


def test_a_lost_write_response_is_not_mistaken_for_fencing(tmp_path: Path) -> None:
    """The store applied our write but we never saw the new etag (timeout): still our partition."""
    storage = LocalStorage(tmp_path)
    index = PartitionIndex(storage, "bkt", ".indexes/c/orders/3.json", TP, "task-a")
    state = index.acquire()
    stale = index.etag
    index.write(state.after_commit("p", 5, 5))
    index.etag = stale  # as if the response of that write had been lost
    index.write(index.state.after_commit("p", 9, 9))
    assert IndexState.from_bytes(storage.get("bkt", index.key).data, "x").committed_offset == 9


def test_local_copy_repeated_after_a_crash_leaves_nothing_behind(tmp_path: Path) -> None:
    storage = LocalStorage(tmp_path)
    etag = storage.put_bytes("bkt", ".temp-upload/x", b"data")
    storage.copy("bkt", ".temp-upload/x", "final/x.json", if_match=etag)
    storage.copy("bkt", ".temp-upload/x", "final/x.json", if_match=etag)  # roll-forward repeats it
    assert sorted(p.name for p in (tmp_path / "bkt" / "final").iterdir()) == ["x.json"]
