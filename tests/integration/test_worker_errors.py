"""Every error status of the worker's Connect API, with Connect's exact texts, and a FAILED task.

One worker process (real Tansu for the tasks); each request checks status, the
``{"error_code", "message"}`` body and, where Connect defines it, the exact message.
"""

from __future__ import annotations

import base64
import uuid

import pytest

from tests.integration._run_support import fast_consumer_overrides
from tests.integration._worker_support import Worker

CLASS = "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector"


@pytest.fixture
def worker(kafka_bootstrap, tmp_path):
    w = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    yield w
    assert w.stop() == 0


def good_config(topic: str, root: str) -> dict[str, str]:
    return {
        "connector.class": "S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON`",  # noqa: S608
        "connect.storage": "local",
        "connect.local.root": root,
        **fast_consumer_overrides(),
    }


def error(resp, status: int) -> str:
    assert resp.status_code == status, resp.text
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == status
    return body["message"]


def test_every_error_status(worker, topic_factory, tmp_path):
    topic = topic_factory("err")
    root = str(tmp_path / "store")
    name = f"err-{uuid.uuid4().hex[:6]}"

    assert error(worker.get("/no/such/route"), 404) == "HTTP 404 Not Found"
    assert error(worker.delete("/connectors"), 405) == "HTTP 405 Method Not Allowed"
    info = worker.get("/").json()
    assert set(info) == {"version", "commit", "kafka_cluster_id"} and info["kafka_cluster_id"]
    assert worker.get("/connector-plugins").json() == [
        {"class": CLASS, "type": "sink", "version": "0.1.0"},
        {
            "class": "io.lenses.streamreactor.connect.aws.s3.source.S3SourceConnector",
            "type": "source",
            "version": "0.1.0",
        },
    ]
    assert any(p["type"] == "converter" for p in worker.get("/connector-plugins?connectorsOnly=false").json())
    assert error(worker.get("/connector-plugins/Nope/config"), 404) == "Unknown plugin Nope."
    assert any(k["name"] == "connect.s3.kcql" for k in worker.get("/connector-plugins/S3Sink/config").json())

    # 400: invalid config lists every problem, KCQL with its position
    bad = good_config(topic, root) | {
        "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSONX`",  # noqa: S608
        "connect.storage": "ftp",
        "tasks.max": "zero",
    }
    message = error(worker.post("/connectors", json={"name": name, "config": bad}), 400)
    lines = message.splitlines()
    assert lines[0] == "Connector configuration is invalid and contains the following 3 error(s):"
    assert lines[-1] == (
        "You can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )
    assert "connect.s3.kcql" in message and "line 1, column" in message
    assert "connect.storage" in message and "tasks.max" in message
    # 400: no connector type (secrets masked in the echoed config)
    no_class = {"topics": topic, "connect.s3.aws.secret.key": "hush-hush"}
    message = error(worker.post("/connectors", json={"name": name, "config": no_class}), 400)
    assert message.startswith("Connector config {") and message.endswith("} contains no connector type")
    assert "hush-hush" not in message
    # 400: unknown class (Connect answers 500 with this text; a bad request is the caller's, so 400)
    unknown = good_config(topic, root) | {"connector.class": "com.example.Nope"}
    message = error(worker.post("/connectors", json={"name": name, "config": unknown}), 400)
    assert message.startswith(
        "Failed to find any class that implements Connector and which name matches com.example.Nope"
    )
    # 400: name mismatch; bad names never reach the disk
    mismatch = good_config(topic, root) | {"name": "other"}
    assert error(worker.put(f"/connectors/{name}/config", json=mismatch), 400) == (
        f"Connector name configuration (other) doesn't match connector name in the URL ({name})"
    )
    assert error(
        worker.post("/connectors", json={"name": "../evil", "config": good_config(topic, root)}), 400
    )
    assert error(worker.post("/connectors", json={"name": " ", "config": good_config(topic, root)}), 400)
    assert error(
        worker.post("/connectors", data=b"{not json", headers={"Content-Type": "application/json"}), 400
    )
    assert not (tmp_path / "evil.json").exists() and not (tmp_path / "state" / "evil.json").exists()

    # 201, then 409 on a duplicate
    created = worker.post("/connectors", json={"name": name, "config": good_config(topic, root)})
    assert created.status_code == 201 and created.headers["Location"] == f"/connectors/{name}"
    assert error(
        worker.post("/connectors", json={"name": name, "config": good_config(topic, root)}), 409
    ) == (f"Connector {name} already exists")
    # PUT updates (200) or creates (201 + Location); PATCH merges, null deletes
    assert (
        worker.put(f"/connectors/{name}/config", json=good_config(topic, root) | {"tasks.max": 2}).status_code
        == 200
    )
    assert [t["task"] for t in worker.get(f"/connectors/{name}").json()["tasks"]] == [0, 1]
    other = f"{name}-put"
    put_created = worker.put(f"/connectors/{other}/config", json=good_config(topic, root) | {"initial": "x"})
    assert put_created.status_code == 201 and put_created.headers["Location"] == f"/connectors/{other}"
    patched = worker.patch(f"/connectors/{other}/config", json={"initial": None, "tasks.max": "1"})
    assert patched.status_code == 200 and "initial" not in patched.json()["config"]
    assert worker.get(f"/connectors/{other}/config").json()["tasks.max"] == "1"
    assert error(worker.patch("/connectors/nope/config", json={"a": "b"}), 404) == "Connector nope not found"
    # initial_state STOPPED (KIP-980)
    stopped = f"{name}-stopped"
    assert (
        worker.post(
            "/connectors",
            json={"name": stopped, "config": good_config(topic, root), "initial_state": "STOPPED"},
        ).status_code
        == 201
    )
    assert worker.get(f"/connectors/{stopped}/status").json()["connector"]["state"] == "STOPPED"
    assert worker.get(f"/connectors/{stopped}/status").json()["tasks"] == []

    # 404 texts per resource
    assert error(worker.get("/connectors/nope"), 404) == "Connector nope not found"
    assert error(worker.get("/connectors/nope/config"), 404) == "Connector nope not found"
    assert error(worker.get("/connectors/nope/tasks"), 404) == "Connector nope not found"
    assert error(worker.delete("/connectors/nope"), 404) == "Connector nope not found"
    assert error(worker.get("/connectors/nope/status"), 404) == "No status found for connector nope"
    assert error(worker.get("/connectors/nope/tasks/0/status"), 404) == "No status found for task nope-0"
    assert (
        error(worker.get(f"/connectors/{name}/tasks/7/status"), 404) == f"No status found for task {name}-7"
    )
    for verb in ("pause", "resume", "stop"):
        assert error(worker.put(f"/connectors/nope/{verb}"), 404) == "Unknown connector nope"
    assert error(worker.post("/connectors/nope/restart"), 404) == "Unknown connector: nope"
    assert error(worker.post("/connectors/nope/tasks/0/restart"), 404) == "Unknown connector: nope"
    assert error(worker.post(f"/connectors/{name}/tasks/9/restart"), 404) == f"Unknown task: {name}-9"
    assert error(worker.get("/connectors/nope/offsets"), 404) == "Connector nope not found"
    assert worker.get("/connectors/nope/topics").json() == {"nope": {"topics": []}}

    # restarts: legacy 204, KIP-745 202 with RESTARTING marks, task restart 204
    assert worker.post(f"/connectors/{name}/restart").status_code == 204
    restarted = worker.post(f"/connectors/{name}/restart?includeTasks=true")
    assert restarted.status_code == 202
    assert restarted.json()["connector"]["state"] == "RESTARTING"
    assert {t["state"] for t in restarted.json()["tasks"]} == {"RESTARTING"}
    only_failed = worker.post(f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
    assert only_failed.status_code == 202 and {t["state"] for t in only_failed.json()["tasks"]} == {"RUNNING"}
    assert worker.post(f"/connectors/{name}/tasks/0/restart").status_code == 204
    worker.wait_status(name, "RUNNING", "RUNNING")

    # offsets: only when STOPPED
    stop_text = (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
        f"the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' endpoint"
    )
    body = {
        "offsets": [
            {"partition": {"kafka_topic": topic, "kafka_partition": 0}, "offset": {"kafka_offset": 1}}
        ]
    }
    assert error(worker.patch(f"/connectors/{name}/offsets", json=body), 400) == stop_text
    assert error(worker.delete(f"/connectors/{name}/offsets"), 400) == stop_text
    assert worker.get(f"/connectors/{name}/offsets").json() == {"offsets": []}
    assert worker.put(f"/connectors/{name}/stop").status_code == 204
    assert error(worker.patch(f"/connectors/{name}/offsets", json={"offsets": []}), 400) == (
        "Partitions / offsets need to be provided for an alter offsets request"
    )
    assert "kafka_partition" in error(
        worker.patch(
            f"/connectors/{name}/offsets", json={"offsets": [{"partition": {"kafka_topic": topic}}]}
        ),
        400,
    )

    # validate: 200 even when invalid, per-key errors, KCQL position, secrets hidden, Connect's "order"
    validated = worker.put(
        "/connector-plugins/S3SinkConnector/config/validate",
        json=bad | {"name": "v", "connect.s3.aws.secret.key": "hush-hush"},
    )
    assert validated.status_code == 200
    infos = validated.json()
    assert infos["name"] == "S3SinkConnector" and infos["error_count"] == 3
    by_key = {c["value"]["name"]: c for c in infos["configs"]}
    assert "line 1, column" in by_key["connect.s3.kcql"]["value"]["errors"][0]
    assert by_key["connect.storage"]["value"]["errors"]
    assert by_key["connect.s3.aws.secret.key"]["value"]["value"] == "[hidden]"
    assert by_key["connect.s3.aws.secret.key"]["definition"]["type"] == "PASSWORD"
    assert "order" in by_key["connect.s3.kcql"]["definition"]
    assert "hush-hush" not in validated.text
    ok = worker.put(
        f"/connector-plugins/{CLASS}/config/validate", json=good_config(topic, root) | {"name": "v"}
    )
    assert ok.status_code == 200 and ok.json()["error_count"] == 0
    assert error(
        worker.put("/connector-plugins/Other/config/validate", json=good_config(topic, root)), 400
    ) == ("Included connector type S3SinkConnector does not match request type Other")
    message = error(worker.put("/connector-plugins/S3Sink/config/validate", json={"topics": topic}), 400)
    assert message.endswith("contains no connector type")

    # secrets never shown
    secret = worker.put(
        f"/connectors/{other}/config",
        json=good_config(topic, root) | {"connect.s3.aws.secret.key": "hush-hush"},
    )
    assert secret.status_code == 200 and secret.json()["config"]["connect.s3.aws.secret.key"] == "[hidden]"
    for path in (
        f"/connectors/{other}",
        f"/connectors/{other}/config",
        f"/connectors/{other}/tasks",
        "/connectors?expand=info",
        "/ui",
        "/metrics",
    ):
        assert "hush-hush" not in worker.get(path).text, path
    # PUTting the masked value back keeps the stored secret
    shown = worker.get(f"/connectors/{other}/config").json()
    assert worker.put(f"/connectors/{other}/config", json=shown).status_code == 200
    stored = (tmp_path / "state" / "connectors" / f"{other}.json").read_text()
    assert "hush-hush" in stored
    assert "hush-hush" not in worker.log()


def test_failed_task_shows_trace_health_503_and_restarts(worker, topic_factory, tmp_path):
    topic = topic_factory("fail")
    name = f"fail-{uuid.uuid4().hex[:6]}"
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the storage root should be")
    config = good_config(topic, str(blocker / "root"))
    assert worker.post("/connectors", json={"name": name, "config": config}).status_code == 201
    status = worker.wait_status(name, "RUNNING", "FAILED")
    trace = status["tasks"][0]["trace"]
    assert "Traceback" in trace and "not-a-dir" in trace
    assert worker.get(f"/connectors/{name}/tasks/0/status").json()["state"] == "FAILED"
    health = worker.get("/health")
    assert health.status_code == 503
    assert health.json()["status"] == "unhealthy" and f"task {name}-0 is FAILED" in health.json()["message"]
    metrics = worker.get("/metrics").text
    assert f'kcql_sink_task_state{{connector="{name}",state="FAILED",task="0"}} 1.0' in metrics
    assert "last error" in worker.get("/ui").text

    restarting = worker.post(f"/connectors/{name}/restart?includeTasks=true&onlyFailed=true")
    assert restarting.status_code == 202
    assert restarting.json()["tasks"][0]["state"] == "RESTARTING"
    assert "trace" not in restarting.json()["tasks"][0]
    worker.wait_status(name, "RUNNING", "FAILED")  # same config, same failure
    # fixing the config restarts the tasks
    fixed = worker.patch(f"/connectors/{name}/config", json={"connect.local.root": str(tmp_path / "store")})
    assert fixed.status_code == 200
    worker.wait_status(name, "RUNNING", "RUNNING")
    assert worker.get("/health").status_code == 200


def test_basic_auth_guards_writes_only(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory("auth")
    worker = Worker(
        tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log", "--basic-auth", "admin:s3cret"
    )
    try:
        body = {"name": "guarded", "config": good_config(topic, str(tmp_path / "store"))}
        denied = worker.post("/connectors", json=body)
        assert error(denied, 401).startswith("Authentication required")
        assert denied.headers["WWW-Authenticate"].startswith("Basic")
        assert error(worker.post("/connectors", json=body, auth=("admin", "wrong")), 401)
        assert worker.post("/connectors", json=body, auth=("admin", "s3cret")).status_code == 201
        assert worker.get("/connectors").json() == ["guarded"]  # reads stay open
        assert error(worker.delete("/connectors/guarded"), 401)
        token = base64.b64encode(b"admin:s3cret").decode()
        assert (
            worker.delete("/connectors/guarded", headers={"Authorization": f"Basic {token}"}).status_code
            == 204
        )
    finally:
        assert worker.stop() == 0
    assert "s3cret" not in worker.log()


def test_admin_loggers_and_tasks_config(worker, topic_factory, tmp_path):
    topic = topic_factory("adm")
    assert worker.get("/admin/loggers").json()["root"]["level"] in ("INFO", "WARN", "DEBUG")
    changed = worker.put("/admin/loggers/sink.runtime.loop", json={"level": "DEBUG"})
    assert changed.status_code == 200 and changed.json()[0] == "sink.runtime.loop"
    one = worker.get("/admin/loggers/sink.runtime.loop").json()
    assert one["level"] == "DEBUG" and isinstance(one["last_modified"], int)
    assert (
        error(worker.put("/admin/loggers/sink", json={"level": "LOUD"}), 404) == "invalid log level 'LOUD'."
    )
    assert error(worker.put("/admin/loggers/sink", json={}), 400)
    assert error(worker.get("/admin/loggers/no.such.logger"), 404) == "Logger no.such.logger not found."
    name = f"tc-{uuid.uuid4().hex[:6]}"
    config = good_config(topic, str(tmp_path / "store")) | {"connect.s3.aws.secret.key": "hush-hush"}
    assert worker.post("/connectors", json={"name": name, "config": config}).status_code == 201
    tasks_config = worker.get(f"/connectors/{name}/tasks-config").json()
    assert list(tasks_config) == [f"{name}-0"]
    assert tasks_config[f"{name}-0"]["connect.s3.aws.secret.key"] == "[hidden]"
