"""A batch's cheap forms change how fast records are written, never what is written.

The same topic, full of the records that must not take a cheap form (tombstones, multi-line JSON,
scalars, text that is not JSON, malformed JSON inside braces, keys the StringConverter rejects,
schema changes, Avro bodies that do not decode, nested schemas), is sunk twice at once by the
real runtime and task against Tansu: once as it runs in production, once with every batch
reduced to its per-record view (``RuntimeOptions(cheap_forms=False)``). Both runs must commit the
same objects holding the same records, read back with independent readers (the json module,
fastavro, pyarrow, the csv module), tolerate the same records, and write every other record
exactly once; and the production run must really have served most records from a cheap form —
and, with the Avro converter and a format that cannot use Arrow columns, never decoded them.
"""

from __future__ import annotations

import csv
import io
import json
import threading
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

import sink.records.avro_values as avro_values
from formats.parquet_format import LineParser
from sink.records.batch import Source
from sink.runtime.loop import RuntimeOptions, SinkRuntime
from tests.integration._run_support import decode, fast_consumer_overrides, local_files, make_config, wait_for

PARTITIONS = 3


class Served:
    """Counts, in-process, the records the cheap forms served (JSON text written through, JSON
    lines parsed by Arrow, Avro columns) and the Avro runs decoded to Arrow."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.json = self.parsed = self.avro = self.decoded = 0
        self._lock = threading.Lock()
        json_lines, avro_columns = Source.json_lines, Source.avro_columns
        decode_values, checked_batch = avro_values.decode_values, LineParser.checked_batch

        def counted_json(src: Source, start: int, stop: int, checked: bool) -> bytes | None:
            got = json_lines(src, start, stop, checked)
            if got is not None and checked:
                with self._lock:
                    self.json += stop - start
            return got

        def counted_avro(src: Source, start: int, stop: int) -> Any:
            got = avro_columns(src, start, stop)
            if got is not None:
                with self._lock:
                    self.avro += stop - start
            return got

        def counted_parse(parser: LineParser, batch: Any) -> Any:
            got = checked_batch(parser, batch)
            if got is not None:
                with self._lock:
                    self.parsed += got.num_rows
            return got

        def counted_decode(*args: Any) -> Any:
            with self._lock:
                self.decoded += 1
            return decode_values(*args)

        monkeypatch.setattr(Source, "json_lines", counted_json)
        monkeypatch.setattr(Source, "avro_columns", counted_avro)
        monkeypatch.setattr(avro_values, "decode_values", counted_decode)
        monkeypatch.setattr(LineParser, "checked_batch", counted_parse)


class Run:
    """One runtime + real task in a thread."""

    def __init__(self, bootstrap: str, props: dict[str, str], cheap: bool) -> None:
        options = RuntimeOptions(bootstrap, commit_interval=0.3, cheap_forms=cheap)
        self.runtime = SinkRuntime(make_config(props), options)
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sink-cheap-{cheap}")
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


def read(path: Path, fmt: str) -> Any:
    data = path.read_bytes()
    if fmt == "JSON":
        return data.splitlines()  # byte for byte: both runs must write the same lines
    if fmt == "CSV_WITHHEADERS":
        return list(csv.reader(io.StringIO(data.decode("utf-8"))))
    return decode(data, fmt)


def sink_twice(
    bootstrap: str, topic: str, ends: dict[int, int], tmp_path: Path, fmt: str, **props: str
) -> dict[str, Any]:
    """Sink ``topic`` with and without cheap forms; both runs' files (relative key -> records)."""
    runs = {}
    for label, cheap in (("cheap", True), ("records", False)):
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
        runs[label] = (Run(bootstrap, config, cheap), root)
    for run, _root in runs.values():
        wait_for(lambda run=run: run.consumed_to(ends), timeout=90, what="all records consumed")
    results: dict[str, Any] = {}
    for label, (run, root) in runs.items():
        run.join()
        files = local_files(root, "bkt", "p")
        results[label] = {path.relative_to(root / "bkt").as_posix(): read(path, fmt) for path in files}
        results[label + "_in"] = run.runtime.records_in
        results[label + "_tolerated"] = run.runtime.errors_tolerated
    return results


def json_values(partition: int, count: int) -> list[tuple[bytes | None, bytes | None]]:
    """(key, value) pairs: one-line objects, and every kind of record that must go one by one."""
    out: list[tuple[bytes | None, bytes | None]] = []
    for i in range(count):  # the odd records sit in the first 600: later runs are plain
        value: bytes | None = json.dumps({"id": i, "p": partition, "name": f"n{i}", "amount": i / 8}).encode()
        key: bytes | None = f"k{i}".encode()
        if i == 50:
            value = None  # tombstone
        elif i == 90:  # a type change: Parquet rolls to a new file here and at the next record
            value = json.dumps({"id": "text now", "p": partition, "name": "x", "amount": 3.0}).encode()
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
            value = b'{"id": 480, "p": 0, "name": "broken", "amount": }'  # framed, not JSON
        elif i == 520:
            value = b'{"id": 520, "p": 0},{"id": 521, "p": 0}'  # two documents in one value
        out.append((key, value))
    return out


@pytest.mark.parametrize("fmt", ["JSON", "PARQUET"])
def test_json_cheap_forms_write_what_the_per_record_path_writes(
    kafka_bootstrap, topic_factory, producer, tmp_path, monkeypatch, fmt
):
    served = Served(monkeypatch)
    topic = topic_factory(f"cheap-json-{fmt.lower()}", partitions=PARTITIONS)
    count = 1500 if fmt == "JSON" else 3000
    ends = {}
    for partition in range(PARTITIONS):
        pairs = json_values(partition, count)
        for key, value in pairs:
            producer.produce(topic, key=key, value=value, partition=partition)
        ends[partition] = len(pairs)
    producer.flush(20)
    got = sink_twice(
        kafka_bootstrap,
        topic,
        ends,
        tmp_path,
        fmt,
        **{
            # Parquet takes the cheap form once a schemaless file has fixed its schema (1,000 rows)
            "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `{fmt}` "  # noqa: S608
            f"PROPERTIES('flush.count'={150 if fmt == 'JSON' else 2000}, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        },
    )
    assert got["cheap"] == got["records"]
    assert (got["cheap_in"], got["cheap_tolerated"]) == (got["records_in"], got["records_tolerated"])
    # not JSON, malformed, two documents: tolerated on both paths; and the tombstone where a value
    # is needed (JSON writes it as a null line). The key that is not UTF-8 is written (U+FFFD).
    assert got["cheap_tolerated"] == (3 if fmt == "JSON" else 4) * PARTITIONS
    if fmt == "JSON":  # written through as one text
        assert served.json > sum(ends.values()) // 2
    else:  # parsed by Arrow into the file's schema
        assert served.parsed > sum(ends.values()) // 4
    rows = [row for key in sorted(got["cheap"]) for row in got["cheap"][key]]
    if fmt == "JSON":
        rows = [json.loads(line) for line in rows if line.startswith(b'{"id"')]
    ids = [(r["p"], r["id"]) for r in rows if isinstance(r, dict) and "p" in r]
    assert len(ids) == len(set(ids)), "a record was written twice"
    assert len(got["cheap"]) >= 3 * 2  # several files per partition: batches crossed file boundaries
    assert got["cheap_in"] + got["cheap_tolerated"] == sum(ends.values())


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


@pytest.mark.parametrize("fmt", ["PARQUET", "JSON", "CSV_WITHHEADERS", "AVRO"])
def test_avro_cheap_forms_write_what_the_per_record_path_writes(
    kafka_bootstrap, topic_factory, producer, tmp_path, schema_registry_url, monkeypatch, fmt
):
    served = Served(monkeypatch)
    topic = topic_factory(f"cheap-avro-{fmt.lower().replace('_', '-')}", partitions=PARTITIONS)
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
        fmt,
        **{
            "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM {topic} STOREAS `{fmt}` "  # noqa: S608
            "PROPERTIES('flush.count'=400, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": schema_registry_url,
        },
    )
    assert got["cheap"] == got["records"]
    assert (got["cheap_in"], got["cheap_tolerated"]) == (got["records_in"], got["records_tolerated"])
    assert got["cheap_in"] + got["cheap_tolerated"] == sum(ends.values())
    if fmt == "PARQUET":
        assert served.avro > sum(ends.values()) // 3  # the decoded columns were written as they are
    else:  # nothing in these formats can use Arrow columns: never decode them
        assert served.decoded == 0 and served.avro == 0
