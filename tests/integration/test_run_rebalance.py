"""A rebalance during a run (a second task joins, then leaves): every record exactly once in the files.

Two runtimes with the real storage task share one consumer group (``tasks.max`` semantics) and one
local storage root. Records keep arriving while the group rebalances twice; afterwards every record
id must appear in exactly one committed file row: nothing lost (revoked data is replayed by the new
owner) and nothing duplicated (the storage index and committed offsets agree).
"""

from __future__ import annotations

import json
from collections import Counter

from tests.integration._run_support import (
    RunningSink,
    decode,
    fast_consumer_overrides,
    local_files,
    make_config,
    wait_for,
)

PARTITIONS = 4


def test_rebalance_join_and_leave_keeps_exactly_once(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("rebal", partitions=PARTITIONS)
    next_id = 0

    def produce(count: int) -> None:
        nonlocal next_id
        for _ in range(count):
            producer.produce(
                topic, value=json.dumps({"id": next_id}).encode(), partition=next_id % PARTITIONS
            )
            next_id += 1
        producer.flush(10)

    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "tasks.max": "2",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('flush.count'=7, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **fast_consumer_overrides(),
    }
    cfg = make_config(props)

    def ids() -> Counter[int]:
        return Counter(
            row["id"] for f in local_files(tmp_path, "bkt", "p") for row in decode(f.read_bytes(), "JSON")
        )

    first = RunningSink(cfg, kafka_bootstrap, task_id=0)
    second = None
    try:
        produce(100)
        wait_for(lambda: sum(ids().values()) >= 50, what="first files from task 0")
        second = RunningSink(cfg, kafka_bootstrap, task_id=1)  # joins: partitions are split
        produce(50)  # arrives while the group rebalances
        wait_for(lambda: bool(second.runtime.assigned) or second.error is not None, what="task 1 assigned")
        produce(100)
        wait_for(
            lambda: second.runtime.records_in > 0 or second.error is not None,
            what="task 1 consuming after the join",
        )
        assert second.error is None, second.error
        produce(50)
        second.join()  # leaves: task 0 gets every partition back
        produce(100)
        wait_for(lambda: sum(ids().values()) >= 400, timeout=90, what="all 400 records in files")
    finally:
        if second is not None and second.thread.is_alive():
            second.join()
        first.join()
    assert first.error is None and (second is None or second.error is None)
    counts = ids()
    assert sorted(counts) == list(range(400))  # nothing lost
    assert set(counts.values()) == {1}  # nothing duplicated
