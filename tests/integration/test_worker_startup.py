"""Start-up latency a person notices: POST a connector to a worker on Tansu, see its first file.

Tansu holds a new consumer group's first join for about half of ``session.timeout.ms``: 23 s at
librdkafka's default, during which a freshly POSTed connector consumes nothing. With the
product's ``TANSU_CONSUMER_OVERRIDES`` (what the demo runs with) the first committed file must
appear within ``flush.interval`` + 10 s of the POST, and the worker must say, once, when the
partitions were assigned and how long the join took.
"""

from __future__ import annotations

import time

from sink.quickstart.embedded import TANSU_CONSUMER_OVERRIDES
from tests.integration._run_support import local_files
from tests.integration._worker_support import Worker

FLUSH_INTERVAL = 2


def test_a_posted_connector_commits_its_first_file_within_flush_interval_plus_10_s(
    kafka_bootstrap, topic_factory, producer, tmp_path
):
    topic = topic_factory("startup", partitions=2)
    for i in range(10):
        producer.produce(topic, value=b'{"id": %d}' % i, partition=i % 2)
    assert producer.flush(10) == 0
    root = tmp_path / "out"
    config = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:data SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            f"PROPERTIES('flush.interval'={FLUSH_INTERVAL}, 'flush.count'=100000)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(root),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **TANSU_CONSUMER_OVERRIDES,
    }
    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    try:
        posted = time.monotonic()
        resp = worker.post("/connectors", json={"name": "startup", "config": config})
        assert resp.status_code == 201, resp.text
        budget = FLUSH_INTERVAL + 10
        files: list = []
        while not files and time.monotonic() - posted < budget:
            files = local_files(root, "bkt", "data")
            time.sleep(0.05)
        elapsed = time.monotonic() - posted
        assert files, f"no committed file {elapsed:.1f} s after the POST:\n{worker.log()[-4000:]}"
        print(f"POST -> first committed file: {elapsed:.1f} s (budget {budget} s)")
        assigned = [line for line in worker.log().splitlines() if "group connect-startup: assigned" in line]
        assert len(assigned) == 1, assigned
        assert " INFO sink.runtime.consumer: " in assigned[0]
        assert f"{topic}-0@" in assigned[0] and f"{topic}-1@" in assigned[0]
        assert "s after subscribing)" in assigned[0] and "session.timeout.ms" not in assigned[0]
    finally:
        assert worker.stop() == 0
