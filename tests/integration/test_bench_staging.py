"""bench/staging.py on a few hundred records, so the staging measurement cannot rot silently.

The real pieces: a 50-partition topic produced with delivery-report end offsets, a ``kcql-sink
run`` subprocess on SeaweedFS with the staging directory and RSS sampled, and commit detection
from the S3 listing (every partition's last offset in a committed file).
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

from bench import harness as h
from bench import staging


def test_staging_run_end_to_end(
    kafka_bootstrap: str, s3_endpoint: Any, s3_client: Any, s3_bucket_factory: Any, tmp_path: Path
) -> None:
    data = h.produce(kafka_bootstrap, f"bstaging-{uuid.uuid4().hex[:6]}", 500, pad=staging.PAD,
                     partitions=staging.PARTITIONS)
    assert set(data.ends.values()) == {10}
    bucket = s3_bucket_factory("bench")
    result = staging.staging_run(
        "smoke", data, kafka_bootstrap, s3_endpoint.connect_config(), s3_client, bucket, tmp_path
    )
    assert result["records"] == 500 and result["partitions"] == 50 and result["streaming"]
    assert result["staging_samples"] > 0
    assert 20 < result["peak_rss_mb"] < 2000  # the sink's process tree, not this process
    lasts = h.committed_lasts(h.s3_keys(s3_client, bucket, "smoke/"))
    assert lasts == dict.fromkeys(range(50), 9)


def test_directory_bytes_counts_allocated_blocks(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "f").write_bytes(b"x" * 100_000)
    with (tmp_path / "sparse").open("wb") as sparse:
        sparse.truncate(50_000_000)  # a hole: no blocks
    assert 100_000 <= staging.directory_bytes(tmp_path) < 1_000_000
