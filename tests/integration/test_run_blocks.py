"""Blocks (sink/records/blocks.py) change how fast records are written, never what is written.

The same topic, full of the records that force the per-record path (tombstones, multi-line JSON,
garbage, keys the StringConverter rejects, schema changes, bodies that do not decode), is sunk
twice at once by the real runtime and task against Tansu: once with blocks, once with them
switched off. Both runs must commit the same objects with the same records, read back with
independent readers, and every record must be in a file or tolerated exactly once.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from sink.runtime.loop import RuntimeOptions, SinkRuntime
from tests.integration._run_support import decode, fast_consumer_overrides, local_files, make_config, wait_for

PARTITIONS = 3


class Run:
    """One runtime + real task in a thread; ``blocks=False`` switches the fast path off."""

    def __init__(self, bootstrap: str, props: dict[str, str], blocks: bool) -> None:
        self.runtime = SinkRuntime(make_config(props), RuntimeOptions(bootstrap, commit_interval=0.3))
        if not blocks:
            self.runtime._blocks = None
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.runtime.run(self.stop)
        except BaseException as exc:
            self.error = exc

    def consumed_to(self, ends: dict[int, int]) -> bool:
        if self.error is not None:
            raise self.error
        got = {tp.partition: pos for tp, pos in self.runtime.positions.items()}
        return all(got.get(p, 0) >= end for p, end in ends.items())

    def join(self) -> None:
        self.stop.set()
        self.thread.join(60)
        assert not self.thread.is_alive()
        if self.error is not None:
            raise self.error


def sink_twice(
    bootstrap: str, topic: str, ends: dict[int, int], tmp_path: Path, **props: str
) -> dict[str, Any]:
    """Sink ``topic`` with and without blocks; return both runs' files (relative key → rows)."""
    results: dict[str, Any] = {}
    runs = {}
    for label, blocks in (("blocks", True), ("records", False)):
        root = tmp_path / label
        config = {
            "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
            "topics": topic,
            "connect.storage": "local",
            "connect.local.root": str(root),
            "errors.tolerance": "all",
            "errors.log.enable": "true",
            **fast_consumer_overrides(),
            **props,
        }
        runs[label] = (Run(bootstrap, config, blocks), root)
    for run, _root in runs.values():
        wait_for(lambda run=run: run.consumed_to(ends), timeout=90, what="all records consumed")
    for label, (run, root) in runs.items():
        run.join()
        fmt = props["connect.s3.kcql"].rsplit("`", 2)[-2]
        # JSON is compared line by line as bytes: a malformed {...} line passes through unparsed
        # in JSON -> JSON (documented), and must do so the same way on both paths
        results[label] = {
            path.relative_to(root / "bkt").as_posix(): (
                path.read_bytes().splitlines() if fmt == "JSON" else decode(path.read_bytes(), fmt)
            )
            for path in local_files(root, "bkt", "p")
        }
        results[label + "_in"] = run.runtime.records_in
        results[label + "_in_blocks"] = run.runtime.records_in_blocks
        results[label + "_tolerated"] = run.runtime.errors_tolerated
    return results


def json_values(partition: int, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) pairs: one-line objects, with every kind of record a block must not take."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):  # the odd records sit in the first 600: later runs are plain
        value: bytes | None = json.dumps({"id": i, "p": partition, "name": f"n{i}", "amount": i / 8}).encode()
        key: bytes | None = f"k{i}".encode()
        if i == 50:
            value = None  # tombstone
        elif i == 120:
            value = json.dumps({"id": i, "p": partition, "name": "pretty", "amount": 1.0}, indent=2).encode()
        elif i == 200:
            value = b"this is not json"
        elif i == 260:
            key = b"\xff\xfe not utf-8"
        elif i == 330:
            value = b"[1, 2, 3]"
        elif i == 400:
            value = json.dumps(
                {"id": i, "p": partition, "name": "new field", "amount": 2.0, "extra": True}
            ).encode()
        elif i == 480:
            value = b'{"id": 480, "p": 0, "name": "broken", "amount": }'
        elif i == 90:  # a type change: Parquet rolls to a new file here and at the next record
            value = json.dumps({"id": "text now", "p": partition, "name": "x", "amount": 3.0}).encode()
        out.append((key, value))
    return out


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_json_blocks_write_what_the_per_record_path_writes(
    kafka_bootstrap, topic_factory, producer, tmp_path, fmt
):
    topic = topic_factory(f"blocks-json-{fmt.lower()}", partitions=PARTITIONS)
    ends = {}
    for partition in range(PARTITIONS):
        pairs = json_values(partition, 1500 if fmt == "JSON" else 3000)
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=partition)
        ends[partition] = len(pairs)
    producer.flush(20)
    got = sink_twice(
        kafka_bootstrap,
        topic,
        ends,
        tmp_path,
        **{
            # Parquet blocks start once a schemaless file has fixed its schema (1,000 rows)
            "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `{fmt}` "  # noqa: S608
            f"PROPERTIES('flush.count'={150 if fmt == 'JSON' else 2000}, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        },
    )
    assert got["blocks"] == got["records"]
    assert (got["blocks_in"], got["blocks_tolerated"]) == (got["records_in"], got["records_tolerated"])
    assert got["records_in_blocks"] == 0
    assert got["blocks_in_blocks"] > (got["blocks_in"] // 3 if fmt == "JSON" else 3 * 50)
    rows = [row for key in sorted(got["blocks"]) for row in got["blocks"][key]]
    if fmt == "JSON":
        rows = [json.loads(line) for line in rows if line.startswith(b'{"id"') and b"broken" not in line]
    ids = [(r["p"], r["id"]) for r in rows if isinstance(r, dict) and "p" in r]
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert len(got["blocks"]) >= 3 * 2  # several files per partition: blocks crossed file boundaries
    assert got["blocks_in"] + got["blocks_tolerated"] == sum(ends.values())


FLAT = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "p", "type": "int"},
        {"name": "name", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": "double"},
        {"name": "ok", "type": "boolean"},
    ],
}
EVOLVED = {**FLAT, "fields": [*FLAT["fields"], {"name": "note", "type": ["null", "string"], "default": None}]}
NESTED = {
    "type": "record",
    "name": "Order",
    "namespace": "nested",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "p", "type": "int"},
        {
            "name": "where",
            "type": {"type": "record", "name": "Where", "fields": [{"name": "city", "type": "string"}]},
        },
    ],
}


def test_avro_blocks_write_what_the_per_record_path_writes(
    kafka_bootstrap, topic_factory, producer, tmp_path, schema_registry_url
):
    topic = topic_factory("blocks-avro", partitions=PARTITIONS)
    registry = SchemaRegistryClient({"url": schema_registry_url})
    ctx = SerializationContext(topic, MessageField.VALUE)
    serializers = {
        name: AvroSerializer(registry, json.dumps(schema), conf={"auto.register.schemas": True})
        for name, schema in (("flat", FLAT), ("evolved", EVOLVED), ("nested", NESTED))
    }
    ends = {}
    for partition in range(PARTITIONS):
        count = 0
        for i in range(2400):  # the odd records sit in the first 500: later runs are plain
            kind = "evolved" if 300 <= i < 400 else "nested" if 450 <= i < 500 else "flat"
            if kind == "nested":
                record: dict[str, Any] = {"id": i, "p": partition, "where": {"city": f"c{i}"}}
            else:
                record = {"id": i, "p": partition, "name": None if i % 5 == 0 else f"n{i}é", "amount": i / 3}
                record["ok"] = i % 2 == 0
                if kind == "evolved":
                    record["note"] = f"note {i}"
            value: bytes | None = serializers[kind](record, ctx)
            if i == 100:
                value = None  # tombstone
            elif i == 150:
                value = b"\x01" + value[1:]  # wrong magic byte
            elif i == 200:
                value = value[:-1]  # a truncated body: fastavro decides
            producer.produce(topic, key=f"k{i}".encode(), value=value, partition=partition)
            count += 1
        ends[partition] = count
    producer.flush(20)
    got = sink_twice(
        kafka_bootstrap,
        topic,
        ends,
        tmp_path,
        **{
            "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `PARQUET` "  # noqa: S608
            "PROPERTIES('flush.count'=120, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
        },
    )
    assert got["blocks"] == got["records"]
    assert (got["blocks_in"], got["blocks_tolerated"]) == (got["records_in"], got["records_tolerated"])
    assert got["records_in_blocks"] == 0 and got["blocks_in_blocks"] > got["blocks_in"] // 3
    rows = [row for key in sorted(got["blocks"]) for row in got["blocks"][key]]
    ids = [(r["p"], r["id"]) for r in rows]
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert {(p, 301) for p in range(PARTITIONS)} <= set(ids)  # evolved records are there
    assert {(p, 451) for p in range(PARTITIONS)} <= set(ids)  # nested ones too
    assert got["blocks_in"] + got["blocks_tolerated"] == sum(ends.values())
