"""Avro blocks end to end: the fast path writes the very objects the per-record path writes.

One topic (several partitions) of Confluent Avro values, registered in the test Schema Registry:
runs of a flat schema, a run of an evolved schema (an optional field added), a tombstone, a value
with a bad magic byte, and a run of a non-flat (nested) schema between flat runs. The real
runtime and task sink it twice into local storage as PARQUET, with ``flush.count`` small enough
that many files are committed: once with blocks, once with ``SinkRuntime._blocks = None`` (the
per-record path). Both must commit the same object keys (names carry the last offset and the
min/max record timestamps) holding the same Parquet schema and rows; every good record must be
there exactly once, in offset order, and the blocks run must really have used blocks.
"""

from __future__ import annotations

import json
import threading
import uuid
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sink.runtime.loop import RuntimeOptions, SinkRuntime
from tests.integration._run_support import fast_consumer_overrides, local_files, make_config, wait_for

PARTITIONS = 3
FIRST_RUN = 420
"""Offsets of every partition produced before the first sink runs; the rest before the second."""
PER_PARTITION = 540
FLUSH_COUNT = 45
CONSUME_BATCH = 50
BASE_TS = 1_760_000_000_000

FLAT: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "namespace": "it.blocks",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "p", "type": "int"},
        {"name": "station", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "score", "type": ["float", "null"]},
    ],
}
EVOLVED: dict[str, Any] = {
    **FLAT,
    "fields": [*FLAT["fields"], {"name": "note", "type": ["null", "string"], "default": None}],
}
NESTED: dict[str, Any] = {
    "type": "record",
    "name": "Reading",
    "namespace": "it.nested",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "p", "type": "int"},
        {
            "name": "where",
            "type": {"type": "record", "name": "Where", "fields": [{"name": "city", "type": "string"}]},
        },
    ],
}


def kind_of(i: int) -> str:
    """What offset ``i`` of every partition holds."""
    if 120 <= i < 170:
        return "evolved"
    if i in (171, 500):
        return "tombstone"
    if i == 233:
        return "bad magic"
    if 290 <= i < 330 or FIRST_RUN <= i < FIRST_RUN + 40:
        return "nested"
    return "flat"


def value_of(i: int, p: int) -> dict[str, Any]:
    kind = kind_of(i)
    if kind == "nested":
        return {"id": i, "p": p, "where": {"city": f"city-{i % 7}"}}
    value: dict[str, Any] = {
        "id": i,
        "p": p,
        "station": None if i % 6 == 0 else f"stätion-{i % 13}\U0001f600",
        "amount": i / 8 - 20,
        "ok": i % 3 == 0,
        "raw": bytes([i % 256, 0]) * (i % 3),
        "score": None if i % 5 == 0 else i / 4,  # exact in float32
    }
    if kind == "evolved":
        value["note"] = None if i % 2 else f"note {i}"
    return value


class Run:
    """The real runtime + task in a thread; ``blocks=False`` switches the fast path off."""

    def __init__(self, bootstrap: str, props: dict[str, str], name: str, blocks: bool) -> None:
        # small consume batches: each partition arrives in many short runs, so most runs are of one
        # flat schema (blocks) and some hold an odd record or a schema change (per-record slices)
        options = RuntimeOptions(bootstrap, batch_size=CONSUME_BATCH, commit_interval=0.3)
        self.runtime = SinkRuntime(make_config(props, name), options)
        if not blocks:
            self.runtime._blocks = None
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=name)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def consumed_to(self, end: int) -> bool:
        if self.error is not None:
            raise self.error
        got = {tp.partition: pos for tp, pos in self.runtime.positions.items()}
        return all(got.get(p, 0) >= end for p in range(PARTITIONS))

    def join(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive(), "the sink did not stop in time"
        if self.error is not None:
            raise self.error


def committed(root: Path) -> dict[str, tuple[Any, list[dict[str, Any]]]]:
    """Committed files: key relative to the prefix → (Parquet schema, rows), read with pyarrow."""
    out = {}
    for path in local_files(root, "bkt", "p"):
        table = pq.read_table(path)
        out[path.relative_to(root / "bkt" / "p").as_posix()] = (table.schema, table.to_pylist())
    return out


def test_avro_blocks_commit_the_objects_the_per_record_path_commits(
    kafka_bootstrap, topic_factory, producer, tmp_path, schema_registry_url
):
    topic = topic_factory("avro-blocks", partitions=PARTITIONS)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializers = {
        kind: AvroSerializer(registry, json.dumps(schema), conf={"auto.register.schemas": True})
        for kind, schema in (("flat", FLAT), ("evolved", EVOLVED), ("nested", NESTED))
    }

    def produce(offsets: range) -> None:
        for p in range(PARTITIONS):
            for i in offsets:
                kind = kind_of(i)
                value: bytes | None
                if kind == "tombstone":
                    value = None
                elif kind == "bad magic":
                    value = b"\x01" + serializers["flat"](value_of(i, p), ctx)[1:]
                else:
                    value = serializers[kind](value_of(i, p), ctx)
                key = None if i % 10 == 9 else f"k{p}-{i}".encode()
                # timestamps out of order: each file's min/max (in its name) is a real computation
                stamp = BASE_TS + ((i * 37 + p * 11) % 101) * 1000
                producer.produce(topic, key=key, value=value, partition=p, timestamp=stamp)
        producer.flush(20)

    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `PARQUET` "  # noqa: S608
        f"PROPERTIES('flush.count'={FLUSH_COUNT}, 'flush.interval'=600)",
        "connect.storage": "local",
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": schema_registry_url,
        "errors.tolerance": "all",
        "errors.log.enable": "true",
        **fast_consumer_overrides(),
    }
    labels = {"blocks": True, "records": False}
    names = {label: f"it-avro-{label}-{uuid.uuid4().hex[:8]}" for label in labels}
    counters: dict[str, list[tuple[int, int, int]]] = {label: [] for label in labels}

    def sink_both(end: int) -> None:
        """Both runs side by side until each consumed every partition to ``end``, then stopped
        (exactly-once close commits the files still open)."""
        runs = {
            label: Run(
                kafka_bootstrap, {**props, "connect.local.root": str(tmp_path / label)}, names[label], on
            )
            for label, on in labels.items()
        }
        for run in runs.values():
            wait_for(lambda run=run: run.consumed_to(end), timeout=60, what=f"every record to offset {end}")
        for label, run in runs.items():
            run.join()
            rt = run.runtime
            counters[label].append((rt.records_in, rt.errors_tolerated, rt.records_in_blocks))

    # first sink run: flat, evolved, a tombstone, a bad magic byte, a nested run, flat again
    produce(range(FIRST_RUN))
    sink_both(FIRST_RUN)
    # second sink run, resuming where the first committed: a nested run first, then flat
    produce(range(FIRST_RUN, PER_PARTITION))
    sink_both(PER_PARTITION)

    blocks, records = committed(tmp_path / "blocks"), committed(tmp_path / "records")
    # the same objects, holding the same Parquet schemas and rows
    assert sorted(blocks) == sorted(records)
    for key in records:
        assert blocks[key][0].equals(records[key][0], check_metadata=True), key
        assert blocks[key][1] == records[key][1], key
    # the same records in, the same tolerated; only the blocks run used blocks, and used them a lot
    for (fast_in, fast_tolerated, fast_blocks), (slow_in, slow_tolerated, slow_blocks) in zip(
        counters["blocks"], counters["records"], strict=True
    ):
        assert (fast_in, fast_tolerated) == (slow_in, slow_tolerated)
        assert slow_blocks == 0
        assert fast_blocks > 0, "the fast path was not used"
    fast_total = sum(c[0] for c in counters["blocks"])
    assert sum(c[2] for c in counters["blocks"]) > fast_total // 2, "the fast path was hardly used"

    # every good record exactly once, in offset order, in files of at most flush.count rows
    good = [i for i in range(PER_PARTITION) if kind_of(i) not in ("tombstone", "bad magic")]
    for p in range(PARTITIONS):
        keys = sorted(k for k in records if k.startswith(f"{topic}/{p}/"))
        assert all(len(records[k][1]) <= FLUSH_COUNT for k in keys)
        rows = [row for k in keys for row in records[k][1]]
        assert rows == [value_of(i, p) for i in good]
        for k in keys:  # a schema change starts a new file: no file mixes flat, evolved and nested
            assert len({kind_of(row["id"]) for row in records[k][1]}) == 1, k
    assert len(records) >= PARTITIONS * (PER_PARTITION // FLUSH_COUNT)
