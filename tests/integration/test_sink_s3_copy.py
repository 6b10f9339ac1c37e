"""S3 copies above CopyObject's 5 GiB limit go in parts, still conditional on the source etag.

The commit's copy (temp upload -> final key) must work for any flush.size. A 5 GiB file cannot be
used in a test, so the single-copy limit is lowered to make a 12 MiB object take the multipart
path (UploadPartCopy with CopySourceIfMatch) against the real SeaweedFS server.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sink.storage.base import PreconditionFailed
from tests.integration._sink_support import make_backend


def test_large_copy_goes_in_parts_and_keeps_the_etag_condition(
    tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    backend = make_backend("s3", tmp_path, request)
    storage = backend.storage
    storage.max_single_copy = 1024 * 1024  # type: ignore[attr-defined]
    storage._transfer.multipart_threshold = 5 * 1024 * 1024  # type: ignore[attr-defined]
    storage._transfer.multipart_chunksize = 5 * 1024 * 1024  # type: ignore[attr-defined]
    big = tmp_path / "big.bin"
    big.write_bytes(bytes(range(256)) * (12 * 4096))  # 12 MiB: three parts
    etag = storage.put_file(backend.bucket, ".temp-upload/c/t/0/big", big)

    with pytest.raises(PreconditionFailed):
        storage.copy(
            backend.bucket,
            ".temp-upload/c/t/0/big",
            "out/t/0/stale.bin",
            if_match='"0123456789abcdef0123456789abcdef"',
        )
    assert storage.head(backend.bucket, "out/t/0/stale.bin") is None

    storage.copy(backend.bucket, ".temp-upload/c/t/0/big", "out/t/0/big.bin", if_match=etag)
    assert backend.raw_read("out/t/0/big.bin") == big.read_bytes()
    parts = request.getfixturevalue("s3_client").head_object(Bucket=backend.bucket, Key="out/t/0/big.bin")[
        "ETag"
    ]
    assert "-" in parts, f"expected a multipart etag, got {parts}"
