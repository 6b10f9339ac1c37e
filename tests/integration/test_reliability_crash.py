"""Fast subset of the crash chaos (``make chaos`` runs the full matrix): SIGKILL ``kcql-sink run``.

Each test produces a few thousand records, kills the real process group a few times at random
moments (on S3 also while an upload / an index write is parked in the fault proxy), restarts,
drains, and reads the storage back independently: every (topic, partition, offset) exactly once.
"""

from __future__ import annotations

import pytest

from chaos.crash import S3Target, Scenario, run_scenario
from chaos.proxy import FaultProxy


def _check(row: dict) -> None:
    assert row["lost"] == 0 and row["duplicated"] == 0 and row["unexpected"] == 0, row
    assert row["checked"] == row["scenario"]["records"], row
    assert row["drained"] and row["final_exit"] == 0 and row["logs_with_traceback"] == 0, row


def test_sigkill_local_count_flush_keeps_every_offset_once(kafka_bootstrap, tmp_path):
    scn = Scenario(flush="count", storage="local", records=5_000, kills=2, kill_window=(2.0, 6.0), seed=12)
    row = run_scenario(scn, kafka_bootstrap, tmp_path)
    _check(row)
    assert row["kills"].get("exited-before-kill", 0) == 0, row  # every kill hit a live process


@pytest.mark.chaos
def test_sigkill_s3_mid_upload_and_mid_commit_with_partitionby(
    kafka_bootstrap, s3_endpoint, s3_client, tmp_path
):
    with FaultProxy(s3_endpoint.url) as proxy:
        target = S3Target(s3_endpoint.connect_config(), s3_client, proxy)
        scn = Scenario(
            flush="interval",
            storage="s3",
            partition_by=True,
            records=4_000,
            kills=3,
            kill_window=(2.0, 6.0),
            seed=7,
        )
        row = run_scenario(scn, kafka_bootstrap, tmp_path, target)
    _check(row)
    # kills 2 and 3 park a file upload (dropped, or forwarded late) and an index write: the sink
    # died mid-request
    assert sum(row["kills"].get(k, 0) for k in ("upload", "late-upload", "index")) >= 1, row


@pytest.mark.chaos
def test_sigkill_avro_written_through_keeps_every_offset_once(
    kafka_bootstrap, s3_endpoint, s3_client, schema_registry_url, tmp_path
):
    """Confluent Avro in, STOREAS AVRO out: the bodies go into the files' blocks as they came (no
    envelope, so the read-back names records by their ``n``), with kills mid-upload and
    mid-commit as in the JSON cells."""
    with FaultProxy(s3_endpoint.url) as proxy:
        target = S3Target(s3_endpoint.connect_config(), s3_client, proxy)
        scn = Scenario(
            flush="count", storage="s3", values="avro", records=4_000, kills=3, kill_window=(2.0, 6.0), seed=9
        )
        row = run_scenario(scn, kafka_bootstrap, tmp_path, target, schema_registry_url)
    _check(row)
    assert sum(row["kills"].get(k, 0) for k in ("upload", "late-upload", "index")) >= 1, row
