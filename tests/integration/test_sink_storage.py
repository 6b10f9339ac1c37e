"""Both storage backends against the real thing: a local directory and a SeaweedFS server.

The exactly-once protocol leans on conditional writes, so they are checked here on each backend
with the installed botocore: If-None-Match and If-Match on PutObject, CopySourceIfMatch on
CopyObject.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sink.storage.base import ObjectNotFound, PreconditionFailed, StorageError
from tests.integration._sink_support import Backend, make_backend


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def test_put_get_head_list_delete(backend: Backend, tmp_path: Path) -> None:
    st, b = backend.storage, backend.bucket
    etag = st.put_bytes(b, "a/b/one.json", b'{"x":1}\n')
    got = st.get(b, "a/b/one.json")
    assert got.data == b'{"x":1}\n'
    assert got.etag == etag
    info = st.head(b, "a/b/one.json")
    assert info is not None
    assert info.size == 8
    assert info.etag == etag
    assert st.head(b, "a/b/missing") is None
    with pytest.raises(ObjectNotFound):
        st.get(b, "a/b/missing")
    src = tmp_path / "file.bin"
    src.write_bytes(b"z" * 1000)
    st.put_file(b, "a/c/two.bin", src)
    assert [i.key for i in st.list(b, "a/")] == ["a/b/one.json", "a/c/two.bin"]
    assert [i.key for i in st.list(b, "a/c")] == ["a/c/two.bin"]
    st.delete(b, "a/b/one.json")
    st.delete(b, "a/b/one.json")  # idempotent
    assert backend.raw_list() == ["a/c/two.bin"]


def test_adopted_file_etag_only_when_asked(backend: Backend, tmp_path: Path) -> None:
    """A handed-over file's etag is the object's etag when asked for; ``etag=False`` may skip it
    (the local backend then does not read the file back to hash it), and the object is the same."""
    st, b = backend.storage, backend.bucket
    for name, want in (("asked", True), ("skipped", False)):
        src = tmp_path / f"{name}.bin"
        src.write_bytes(name.encode() * 1000)
        etag = st.put_file(b, f"d/{name}.bin", src, if_none_match=True, adopt=True, etag=want)
        info = st.head(b, f"d/{name}.bin")
        assert info is not None and info.size == len(name) * 1000
        assert st.get(b, f"d/{name}.bin").data == name.encode() * 1000
        if want or backend.kind == "s3":
            assert etag == info.etag
        else:
            assert etag == ""
    with pytest.raises(PreconditionFailed):  # the skipped etag changes nothing of the condition
        st.put_file(b, "d/skipped.bin", tmp_path / "asked.bin", if_none_match=True, adopt=True, etag=False)


def test_conditional_put(backend: Backend) -> None:
    st, b = backend.storage, backend.bucket
    first = st.put_bytes(b, ".idx/p.json", b"1", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        st.put_bytes(b, ".idx/p.json", b"2", if_none_match=True)
    with pytest.raises(PreconditionFailed):
        st.put_bytes(b, ".idx/p.json", b"2", if_match='"0123456789abcdef0123456789abcdef"')
    second = st.put_bytes(b, ".idx/p.json", b"2", if_match=first)
    assert second != first
    with pytest.raises(PreconditionFailed):  # the old etag is stale now: this is what fences zombies
        st.put_bytes(b, ".idx/p.json", b"3", if_match=first)
    assert st.get(b, ".idx/p.json").data == b"2"


def test_conditional_copy(backend: Backend) -> None:
    st, b = backend.storage, backend.bucket
    etag = st.put_bytes(b, ".temp-upload/x", b"payload")
    with pytest.raises(PreconditionFailed):
        st.copy(b, ".temp-upload/x", "final/x.json", if_match='"0123456789abcdef0123456789abcdef"')
    assert st.head(b, "final/x.json") is None
    st.copy(b, ".temp-upload/x", "final/x.json", if_match=etag)
    assert st.get(b, "final/x.json").data == b"payload"
    st.delete(b, ".temp-upload/x")
    with pytest.raises(ObjectNotFound):
        st.copy(b, ".temp-upload/x", "final/y.json")


def test_invalid_keys_and_buckets_are_clear_errors(backend: Backend) -> None:
    st = backend.storage
    with pytest.raises(StorageError) as err:
        st.check_bucket("No_Such.Bucket!" if backend.kind == "s3" else "../escape")
    assert "bucket" in str(err.value)
    if backend.kind == "s3":
        with pytest.raises(StorageError, match="does not exist"):
            st.check_bucket("definitely-not-created-bucket")
    else:
        with pytest.raises(StorageError, match="invalid object key"):
            st.put_bytes(backend.bucket, "a/../../etc", b"x")


def test_multipart_upload_of_a_large_file(backend: Backend, tmp_path: Path) -> None:
    if backend.kind == "s3":
        assert backend.storage.settings.multipart_threshold <= 16 << 20  # type: ignore[attr-defined]
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * (20 * 4096))  # 20 MiB > the 16 MiB threshold
    backend.storage.put_file(backend.bucket, "big/big.bin", big)
    assert backend.raw_read("big/big.bin") == big.read_bytes()
