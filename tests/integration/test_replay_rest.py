"""The replay as a connector of the REST worker (class S3SourceConnector), on real Tansu + local storage."""

from __future__ import annotations

import uuid

from tests.integration._replay_support import produce, read_topic, sink_props, source_records
from tests.integration._run_support import RunningSink, make_config, wait_for
from tests.integration._worker_support import Worker

N = 12
SOURCE_CLASS = "io.lenses.streamreactor.connect.aws.s3.source.S3SourceConnector"


def test_replay_connector_replays_into_its_topic_and_validates(kafka_bootstrap, topic_factory, tmp_path):
    source = topic_factory("rr-a", partitions=2)
    target = topic_factory("rr-b", partitions=2)
    produce(kafka_bootstrap, source, source_records(N, 2))
    root = str(tmp_path / "store")
    kcql = (
        f"INSERT INTO arch:rest SELECT * FROM `{source}` STOREAS PARQUET "  # noqa: S608
        "PROPERTIES('store.envelope'=true, 'flush.count'=5, 'flush.interval'=1)"
    )
    sink = RunningSink(make_config(sink_props(root, [source], kcql)), kafka_bootstrap)
    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    name = f"replay-{uuid.uuid4().hex[:6]}"
    config = {
        "connector.class": "S3SourceConnector",
        "tasks.max": "1",
        "connect.s3.kcql": f"INSERT INTO {target} SELECT * FROM arch:rest STOREAS PARQUET "  # noqa: S608
        "PROPERTIES('store.envelope'=true)",
        "connect.storage": "local",
        "connect.local.root": root,
    }
    try:
        bad = worker.put(
            f"/connectors/{name}/config",
            json=config | {"tasks.max": "2", "connect.s3.kcql": "INSERT INTO bkt:p SELECT * FROM t"},
        )
        assert bad.status_code == 400
        assert "looks like bucket:prefix" in bad.json()["message"] and "tasks.max" in bad.json()["message"]
        assert worker.put(f"/connectors/{name}/config", json=config).status_code == 201
        # the sink keeps committing while the connector follows the archive
        wait_for(lambda: len(read_topic(kafka_bootstrap, target)) == N, 60, "replayed through the worker")
        status = worker.get(f"/connectors/{name}/status").json()
        assert status["tasks"][0]["state"] == "RUNNING", status
        assert sorted(read_topic(kafka_bootstrap, target)) == sorted(read_topic(kafka_bootstrap, source))
        assert worker.delete(f"/connectors/{name}").status_code == 204
    finally:
        worker.stop()
        sink.join()
    assert sink.error is None, sink.error
