"""Replay from S3 (SeaweedFS) through the command line: ``kcql-sink replay CONFIG`` as a user runs it."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

from tests.integration._replay_support import produce, read_topic, source_records
from tests.integration._run_support import RunningSink, fast_consumer_overrides, make_config, wait_for

REPO = Path(__file__).parent.parent.parent
N = 30


def test_cli_replays_an_s3_archive_record_for_record(
    kafka_bootstrap, topic_factory, s3_endpoint, s3_client, s3_bucket_factory, tmp_path
):
    bucket = s3_bucket_factory("replay")
    source = topic_factory("rs3-a", partitions=2)
    target = topic_factory("rs3-b", partitions=2)
    produce(kafka_bootstrap, source, source_records(N, 2))
    layout = (
        "PARTITIONBY name STOREAS PARQUET PROPERTIES('store.envelope'=true, 'partition.include.keys'=true"
    )
    props = {
        **s3_endpoint.connect_config(),
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": source,
        "connect.s3.kcql": f"INSERT INTO {bucket}:lake SELECT * FROM `{source}` {layout}, "  # noqa: S608
        "'flush.count'=4, 'flush.interval'=1)",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
    }
    sink = RunningSink(make_config(props), kafka_bootstrap)

    def archived() -> int:
        listing = s3_client.list_objects_v2(Bucket=bucket, Prefix="lake/")
        return sum(1 for o in listing.get("Contents", []) if o["Key"].endswith(".parquet"))

    try:
        # 30 records over 3 names x 2 partitions, files of at most 4: each (name, partition) has 5 records
        wait_for(lambda: archived() == 12, 60, "archived on S3")
    finally:
        sink.join()
    assert sink.error is None, sink.error
    replay_config = {
        "name": f"s3-replay-{uuid.uuid4().hex[:6]}",
        "config": {
            **s3_endpoint.connect_config(),
            "connect.s3.kcql": f"INSERT INTO {target} SELECT * FROM {bucket}:lake {layout})",  # noqa: S608
        },
    }
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(replay_config))
    done = subprocess.run(
        [sys.executable, "-m", "sink.cli", "replay", str(path), "--bootstrap-servers", kafka_bootstrap],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"files 12, records {N}" in done.stderr  # the progress line
    assert s3_endpoint.secret_key not in done.stderr + done.stdout
    source_recs = read_topic(kafka_bootstrap, source)
    got = read_topic(kafka_bootstrap, target)
    for p in range(2):
        assert [r for r in got if r[0] == p] == [r for r in source_recs if r[0] == p]
