"""The REST worker driven like Kafka Connect, against the real Tansu broker and local storage.

One connector goes through its whole life: create, consume, pause, resume, stop, offsets
read/alter/reset, two restarts of the worker process (STOPPED and RUNNING states resumed from the
state dir), and delete. Files are read back with ``json`` only; exactly-once means every id
appears once even after the Kafka offsets were reset.
"""

from __future__ import annotations

import json
import time
import uuid

from sink.rest.offsets import ALTERED_MESSAGE, RESET_MESSAGE
from tests.integration._run_support import decode, fast_consumer_overrides, local_files, wait_for
from tests.integration._worker_support import Worker

SECRET = "do-not-show-" + uuid.uuid4().hex


def connector_config(topic: str, root: str) -> dict[str, str]:
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "tasks.max": "1",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:data SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('flush.count'=5, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": root,
        "connect.s3.aws.secret.key": SECRET,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
    }


def ids_in(root) -> list[int]:
    return sorted(
        row["id"] for f in local_files(root, "bkt", "data") for row in decode(f.read_bytes(), "JSON")
    )


def produce(producer, topic: str, ids: range) -> None:
    for i in ids:
        producer.produce(topic, key=str(i).encode(), value=json.dumps({"id": i}).encode())
    producer.flush(10)


def test_connector_life_cycle_with_worker_restarts(kafka_bootstrap, topic_factory, producer, tmp_path):
    state, root = tmp_path / "state", tmp_path / "store"
    name = f"life-{uuid.uuid4().hex[:6]}"
    topic = topic_factory("life", partitions=2)
    produce(producer, topic, range(20))
    worker = Worker(state, kafka_bootstrap, tmp_path / "worker.log")
    try:
        assert worker.startup_seconds < 2, worker.startup_seconds  # ~0.3 s unloaded
        created = worker.post(
            "/connectors", json={"name": name, "config": connector_config(topic, str(root))}
        )
        assert created.status_code == 201, created.text
        assert created.headers["Location"] == f"/connectors/{name}"
        body = created.json()
        assert body["type"] == "sink" and body["tasks"] == [{"connector": name, "task": 0}]
        assert body["config"]["connect.s3.aws.secret.key"] == "[hidden]"

        wait_for(lambda: ids_in(root) == list(range(20)), timeout=60, what="20 records in files")
        status = worker.wait_status(name, "RUNNING", "RUNNING")
        assert "trace" not in status["connector"] and "trace" not in status["tasks"][0]
        assert worker.get("/health").status_code == 200
        assert worker.get(f"/connectors/{name}/tasks/0/status").json()["state"] == "RUNNING"
        assert worker.get(f"/connectors/{name}/topics").json() == {name: {"topics": [topic]}}
        assert worker.put(f"/connectors/{name}/topics/reset").status_code == 202
        assert worker.get(f"/connectors/{name}/topics").json() == {name: {"topics": []}}
        expanded = worker.get("/connectors?expand=status&expand=info").json()
        assert expanded[name]["status"]["connector"]["state"] == "RUNNING"
        assert expanded[name]["info"]["config"]["topics"] == topic

        metrics = worker.get("/metrics").text
        in_lines = [
            line
            for line in metrics.splitlines()
            if line.startswith("kcql_sink_records_in_total{") and f'topic="{topic}"' in line
        ]
        assert sum(float(line.rsplit(" ", 1)[1]) for line in in_lines) == 20
        files_line = next(x for x in metrics.splitlines() if x.startswith("kcql_sink_files_committed_total{"))
        assert float(files_line.rsplit(" ", 1)[1]) >= 4
        assert "kcql_sink_commit_latency_seconds_bucket" in metrics
        assert "kcql_sink_consumer_lag{" in metrics
        page = worker.get("/ui")
        assert page.status_code == 200 and 'http-equiv="refresh"' in page.text
        assert name in page.text and topic in page.text and "RUNNING" in page.text

        # pause: nothing is consumed; resume: it catches up
        assert worker.put(f"/connectors/{name}/pause").status_code == 202
        paused = worker.wait_status(name, "PAUSED", "PAUSED")
        assert paused["tasks"][0]["state"] == "PAUSED"
        assert worker.get("/health").status_code == 200
        produce(producer, topic, range(20, 30))
        time.sleep(2)
        assert ids_in(root) == list(range(20))
        assert worker.put(f"/connectors/{name}/resume").status_code == 202
        wait_for(lambda: ids_in(root) == list(range(30)), timeout=60, what="30 records after resume")
        assert worker.get(f"/connectors/{name}/topics").json() == {name: {"topics": [topic]}}

        # offsets can only change when STOPPED
        not_stopped = worker.delete(f"/connectors/{name}/offsets")
        assert not_stopped.status_code == 400
        assert not_stopped.json()["message"].startswith("Connectors must be in the STOPPED state")
        assert worker.put(f"/connectors/{name}/stop").status_code == 204
        stopped = worker.wait_status(name, "STOPPED")
        assert stopped["tasks"] == []
        assert worker.get(f"/connectors/{name}").json()["tasks"] == []
        offsets = worker.get(f"/connectors/{name}/offsets").json()["offsets"]
        assert sorted(o["partition"]["kafka_partition"] for o in offsets) == [0, 1]
        assert all(o["partition"]["kafka_topic"] == topic for o in offsets)
        assert sum(o["offset"]["kafka_offset"] for o in offsets) == 30
    finally:
        assert worker.stop() == 0

    # a restarted worker keeps the connector STOPPED
    worker = Worker(state, kafka_bootstrap, tmp_path / "worker.log")
    try:
        assert worker.get(f"/connectors/{name}/status").json()["connector"]["state"] == "STOPPED"
        altered = worker.patch(
            f"/connectors/{name}/offsets",
            json={
                "offsets": [
                    {
                        "partition": {"kafka_topic": topic, "kafka_partition": 0},
                        "offset": {"kafka_offset": "0"},
                    }
                ]
            },
        )
        assert altered.status_code == 200, altered.text
        assert altered.json() == {"message": ALTERED_MESSAGE}
        after = {
            o["partition"]["kafka_partition"]: o["offset"]["kafka_offset"]
            for o in worker.get(f"/connectors/{name}/offsets").json()["offsets"]
        }
        assert after[0] == 0
        reset = worker.delete(f"/connectors/{name}/offsets")
        assert reset.status_code == 200 and reset.json() == {"message": RESET_MESSAGE}
        # Kafka offsets went back to the start; the storage index still wins: no duplicates
        assert worker.put(f"/connectors/{name}/resume").status_code == 202
        worker.wait_status(name, "RUNNING", "RUNNING")
        produce(producer, topic, range(30, 40))
        wait_for(lambda: len(ids_in(root)) >= 40, timeout=60, what="40 records after resume")
        time.sleep(1.5)
        assert ids_in(root) == list(range(40))
    finally:
        assert worker.stop() == 0

    # a restarted worker resumes a RUNNING connector
    worker = Worker(state, kafka_bootstrap, tmp_path / "worker.log")
    try:
        worker.wait_status(name, "RUNNING", "RUNNING")
        produce(producer, topic, range(40, 45))
        wait_for(lambda: len(ids_in(root)) >= 45, timeout=60, what="45 records after a worker restart")
        assert ids_in(root) == list(range(45))
        assert worker.delete(f"/connectors/{name}").status_code == 204
        gone = worker.get(f"/connectors/{name}")
        assert gone.status_code == 404
        assert gone.json() == {"error_code": 404, "message": f"Connector {name} not found"}
        assert worker.get("/connectors").json() == []
        assert list((state / "connectors").iterdir()) == []
    finally:
        assert worker.stop() == 0
    log = worker.log()
    assert SECRET not in log
    assert "Traceback" not in log, log


def test_two_tasks_share_the_partitions_and_write_each_record_once(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    root = tmp_path / "store"
    name = f"two-{uuid.uuid4().hex[:6]}"
    topic = topic_factory("two", partitions=4)
    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    try:
        config = connector_config(topic, str(root)) | {"tasks.max": "2"}
        assert worker.post("/connectors", json={"name": name, "config": config}).status_code == 201
        status = worker.wait_status(name, "RUNNING", "RUNNING")
        assert [t["id"] for t in status["tasks"]] == [0, 1]
        produce(producer, topic, range(100))
        wait_for(lambda: len(ids_in(root)) >= 100, timeout=90, what="100 records from two tasks")
        time.sleep(1.5)
        assert ids_in(root) == list(range(100))
        metrics = worker.get("/metrics").text
        tasks_with_records = {
            line.split('task="')[1].split('"')[0]
            for line in metrics.splitlines()
            if line.startswith(f'kcql_sink_records_in_total{{connector="{name}"')
            and float(line.rsplit(" ", 1)[1]) > 0
        }
        assert tasks_with_records == {"0", "1"}  # the group split the partitions between the threads
    finally:
        assert worker.stop() == 0


def test_tolerated_errors_and_dead_letters_show_in_metrics_and_ui(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    root = tmp_path / "store"
    name = f"dlq-{uuid.uuid4().hex[:6]}"
    topic = topic_factory("dlqw")
    dlq = f"dead-{uuid.uuid4().hex[:6]}"
    producer.produce(topic, value=b'{"id": 0}')
    producer.produce(topic, value=b"not json at all")
    producer.produce(topic, value=b'{"id": 2}')
    producer.flush(10)
    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    try:
        config = connector_config(topic, str(root)) | {
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
        }
        assert worker.post("/connectors", json={"name": name, "config": config}).status_code == 201
        wait_for(lambda: ids_in(root) == [0, 2], timeout=60, what="the two good records")
        metrics = worker.get("/metrics").text
        assert f'kcql_sink_records_errored_total{{connector="{name}",task="0"}} 1.0' in metrics
        assert f'kcql_sink_dlq_records_total{{connector="{name}",task="0"}} 1.0' in metrics
        assert worker.get("/health").status_code == 200  # a tolerated error is not a failure
        page = worker.get("/ui").text
        assert "last error" in page and "offset 1" in page
    finally:
        assert worker.stop() == 0
