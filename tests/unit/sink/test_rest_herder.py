"""The herder's state machine, persistence and metering, with fake tasks (no broker needed).

Tasks run the real ``SinkRuntime`` loop against an unreachable bootstrap address: the consumer
just never gets an assignment, which is all pause/resume/stop need. A task whose ``start`` raises
shows FAILED with its trace.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sink.records.record import TopicPartition
from sink.rest.errors import RestError
from sink.rest.herder import Herder
from sink.rest.metering import TaskMetrics
from sink.rest.metrics import make_registry, render_metrics
from sink.rest.store import StateStore
from sink.rest.ui import render_ui

BOOTSTRAP = "127.0.0.1:9"  # discard port: nothing answers, nothing is sent


class IdleTask:
    background_commits = False

    def __init__(self, observer=None):
        self.observer = observer

    def start(self, config):
        pass

    def prefetch(self, batch):
        return False

    def open(self, partitions):
        return {}

    def put(self, records):
        pass

    def pre_commit(self, offsets):
        return offsets

    def close(self, partitions):
        pass

    def stop(self):
        pass


class BrokenTask(IdleTask):
    def start(self, config):
        raise OSError("storage root /nope is not writable")


def config(name: str, **extra: str) -> dict[str, str]:
    return {
        "name": name,
        "connector.class": "S3Sink",
        "topics": "t",
        "connect.s3.kcql": "INSERT INTO b:p SELECT * FROM t",
        "connect.storage": "local",
        "connect.local.root": "/tmp/unused",
        **extra,
    }


def wait(predicate, timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.02)


@pytest.fixture
def make_herder(tmp_path: Path):
    herders: list[Herder] = []

    def make(task=IdleTask, state: Path | None = None) -> Herder:
        herder = Herder(StateStore(state or tmp_path / "state"), "w:1", BOOTSTRAP, task_factory=lambda: task)
        herder.start()
        herders.append(herder)
        return herder

    yield make
    for herder in herders:
        herder.shutdown()


def test_states_persist_across_a_restart(make_herder, tmp_path):
    herder = make_herder()
    assert herder.put("a", config("a"), "RUNNING", create_only=True) is True
    assert herder.put("b", config("b", **{"tasks.max": "2"}), "RUNNING") is True
    assert herder.put("c", config("c"), "STOPPED") is True
    assert [t["state"] for t in herder.status("b")["tasks"]] == ["RUNNING", "RUNNING"]
    herder.pause("a")
    assert herder.status("a")["connector"]["state"] == "PAUSED"
    assert herder.status("a")["tasks"][0]["state"] == "PAUSED"
    with pytest.raises(RestError) as dup:
        herder.put("a", config("a"), create_only=True)
    assert dup.value.status == 409
    herder.shutdown()

    again = make_herder(state=tmp_path / "state")
    assert again.names() == ["a", "b", "c"]
    assert again.status("a")["connector"]["state"] == "PAUSED"
    assert again.status("b")["connector"]["state"] == "RUNNING" and len(again.status("b")["tasks"]) == 2
    assert again.status("c") == {
        "name": "c",
        "connector": {"state": "STOPPED", "worker_id": "w:1"},
        "tasks": [],
        "type": "sink",
    }
    again.resume("c")
    assert again.status("c")["tasks"][0]["state"] == "RUNNING"
    again.stop("b")
    assert again.info("b")["tasks"] == []
    again.delete("a")
    assert again.names() == ["b", "c"]
    with pytest.raises(RestError) as gone:
        again.status("a")
    assert gone.value.message == "No status found for connector a"


def test_an_update_only_put_of_a_deleted_connector_is_a_404_not_a_new_connector(make_herder):
    """PATCH reads the config, then puts the merged copy: a DELETE in between must win."""
    herder = make_herder()
    herder.put("a", config("a"), "STOPPED")
    merged = herder.get("a").config | {"topics": "u"}
    herder.delete("a")
    with pytest.raises(RestError) as gone:
        herder.put("a", merged, update_only=True)
    assert gone.value.status == 404
    assert herder.names() == []
    assert herder.store.load_all() == []


def test_failed_task_has_trace_and_makes_health_fail(make_herder):
    herder = make_herder(task=BrokenTask)
    herder.put("x", config("x"))
    wait(lambda: herder.status("x")["tasks"][0]["state"] == "FAILED")
    task = herder.status("x")["tasks"][0]
    assert "storage root /nope is not writable" in task["trace"] and "Traceback" in task["trace"]
    reasons = herder.health()
    assert reasons == ["task x-0 is FAILED: OSError: storage root /nope is not writable"]
    body = herder.restart("x", include_tasks=True, only_failed=True)
    assert body is not None and body["tasks"][0]["state"] == "RESTARTING" and "trace" not in body["tasks"][0]
    assert body["connector"]["state"] == "RUNNING"  # onlyFailed: a RUNNING connector is not restarted
    assert herder.restart("x", include_tasks=False, only_failed=False) is None
    with pytest.raises(RestError) as unknown:
        herder.restart_task("x", 3)
    assert unknown.value.message == "Unknown task: x-3"


def test_a_connector_without_bootstrap_fails_with_a_clear_reason(tmp_path):
    herder = Herder(StateStore(tmp_path), "w:1", None, task_factory=lambda: IdleTask)
    herder.put("x", config("x"))
    status = herder.status("x")
    assert status["connector"]["state"] == "FAILED" and status["tasks"] == []
    assert "bootstrap" in status["connector"]["trace"]
    assert herder.health() and "connector x is FAILED" in herder.health()[0]
    herder.put("x", config("x", **{"bootstrap.servers": BOOTSTRAP}))  # the connector's own key wins
    assert herder.status("x")["connector"]["state"] == "RUNNING"
    herder.shutdown()


def test_metering_is_an_observer_of_files_offsets_and_record_errors():
    metrics = TaskMetrics()
    tp = TopicPartition("t", 0)
    metrics.records_consumed(tp, 30, 3000)
    metrics.file_committed(tp, "p/t/0/000.json", 10, 123, 0.01)
    metrics.offsets_committed({tp: 10})
    metrics.offsets_committed({tp: 25})
    metrics.record_failed(tp, 26, "VALUE_CONVERTER", "cannot convert (offset 26)", "dead_lettered")
    metrics.record_failed(tp, 27, "TASK_PUT", "not text (offset 27)", "skipped")
    assert metrics.records_in == {tp: 30} and metrics.bytes_in == {tp: 3000}
    assert metrics.files_committed == 1 and metrics.bytes_out == 123
    assert list(metrics.recent_files) == ["p/t/0/000.json"]
    assert metrics.commit_count == 1 and metrics.commit_sum == 0.01
    assert metrics.commit_buckets[1] == 1  # 0.01 s falls in the <= 0.01 bucket
    assert metrics.records_committed == {tp: 15} and metrics.committed_offset == {tp: 25}
    assert (metrics.errors_tolerated, metrics.dead_lettered) == (2, 1)
    assert metrics.last_error is not None and metrics.last_error[1] == "not text (offset 27)"


def test_metrics_text_and_ui_page(make_herder):
    herder = make_herder()
    herder.put("<b>x</b>", config("<b>x</b>"))
    task = herder.connectors["<b>x</b>"].tasks[0]
    tp = TopicPartition("t", 0)
    task.metrics.records_in[tp] = 7
    task.metrics.bytes_in[tp] = 70
    task.metrics.committed_offset[tp] = 5
    task.metrics.observe_commit(0.02, "p/t/0/1.json", 9)
    families = {
        f.name: f for f in text_string_to_metric_families(render_metrics(make_registry(herder)).decode())
    }
    sample = next(s for s in families["kcql_sink_records_in"].samples if s.name.endswith("_total"))
    assert sample.labels == {"connector": "<b>x</b>", "task": "0", "topic": "t", "partition": "0"}
    assert sample.value == 7
    assert any(s.value == 1 for s in families["kcql_sink_files_committed"].samples)
    buckets = [s for s in families["kcql_sink_commit_latency_seconds"].samples if s.name.endswith("_bucket")]
    assert buckets[-1].labels["le"] == "+Inf" and buckets[-1].value == 1
    page = render_ui(herder)
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert "p/t/0/1.json" in page and 'http-equiv="refresh"' in page
    assert "connect.local.root" not in page  # configs (and secrets) are never on the page


class NoisyTask(IdleTask):
    def start(self, config):
        import logging

        logging.getLogger("sink.fake").error("skipping a record at topic 't' partition 0 offset 3: bad")


def test_last_logged_error_of_a_task_is_on_the_page(make_herder):
    herder = make_herder(task=NoisyTask)
    herder.put("n", config("n"))
    task = herder.connectors["n"].tasks[0]
    wait(lambda: task.metrics.last_error is not None)
    # the last WARNING/ERROR of the task's thread: the skipped record, or (logged after it) the
    # runtime's one line saying the broker is unreachable (BOOTSTRAP refuses connections)
    last = task.metrics.last_error[1]
    skipped = last == "skipping a record at topic 't' partition 0 offset 3: bad"
    assert skipped or last.startswith(f"Kafka at {BOOTSTRAP} is unreachable"), last
    assert task.state == "RUNNING"
    page = render_ui(herder)
    assert "last error" in page and ("offset 3: bad" in page or "is unreachable" in page)
