"""The JSON-lines fast path changes how fast records are written, never what is written.

A mixed stream (mostly one-line JSON objects, plus a tombstone, a pretty-printed multi-line
object, a value that is not JSON, a key the StringConverter cannot decode and a JSON array, both
before and after a Parquet file fixes its schema) is produced to a topic with several partitions
on the real broker (Tansu), then sunk twice at the same time by the real runtime and SinkTask on
local storage: once with the fast path, once with it switched off (``SinkRuntime._blocks =
None``). Both runs must commit the same object keys (relative to the prefix) holding the same
records, read back with the json module and pyarrow, with every good record exactly once and in
offset order within its partition.
"""

from __future__ import annotations

import io
import json
import threading
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from sink.runtime.loop import RuntimeOptions, SinkRuntime
from tests.integration._run_support import fast_consumer_overrides, local_files, make_config, wait_for

PARTITIONS = 3
PREFIX = "lines"


class SinkRun:
    """One runtime with the real SinkTask in a thread; ``fast=False`` switches the fast path off."""

    def __init__(self, bootstrap: str, props: dict[str, str], fast: bool) -> None:
        self.runtime = SinkRuntime(make_config(props), RuntimeOptions(bootstrap, commit_interval=0.3))
        assert self.runtime._blocks is not None, "the fast path should apply to this connector"
        if not fast:
            self.runtime._blocks = None
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"sink-fast-{fast}")
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
        assert not self.thread.is_alive(), "the sink did not stop in time"
        if self.error is not None:
            raise self.error


KINDS = ("tombstone", "pretty", "not-json", "bad-key", "array")


def stream(
    partition: int, count: int, late: int
) -> tuple[list[tuple[bytes | None, bytes | None]], list[int]]:
    """(key, value) pairs for one partition and the offsets of the records that must be written.

    Each odd kind appears early (offsets 40-210: in a Parquet file before it fixes its schema) and
    late (from ``late`` on, 50 apart: after the schema is fixed); the late array comes last, as it
    rolls a Parquet file twice.
    """
    odd_at = {kind: (40 + 50 * n, late + 50 * n) for n, kind in enumerate(KINDS)}
    pairs: list[tuple[bytes | None, bytes | None]] = []
    good: list[int] = []
    for i in range(count):
        key: bytes | None = f"k{i}é".encode()
        value: bytes | None = json.dumps(
            {"id": i, "p": partition, "name": f'n{i} ✓ "q"', "amount": i / 8}, ensure_ascii=i % 2 == 0
        ).encode()
        kind = next((k for k, at in odd_at.items() if i in at), None)
        if kind == "tombstone":
            value = None
        elif kind == "pretty":
            value = json.dumps({"id": i, "p": partition, "name": "pretty", "amount": 1.5}, indent=2).encode()
        elif kind == "not-json":
            value = b"this is not JSON"
        elif kind == "bad-key":
            key = b"\xff\xfe not utf-8"
        elif kind == "array":
            value = b"[1, 2, 3]"
        if kind in (None, "pretty"):
            good.append(i)
        pairs.append((key, value))
    return pairs, good


def read_files(root: Path, fmt: str) -> dict[str, Any]:
    """Committed objects (key relative to the prefix) → records, read by independent readers."""
    out: dict[str, Any] = {}
    base = root / "bkt" / PREFIX
    for path in local_files(root, "bkt", PREFIX):
        data = path.read_bytes()
        if fmt == "JSON":
            records: Any = [json.loads(line) for line in data.splitlines()]
        else:
            table = pq.read_table(io.BytesIO(data))
            records = (table.schema.names, table.to_pylist())
        out[path.relative_to(base).as_posix()] = records
    return out


@pytest.mark.parametrize(
    ("fmt", "count", "flush_count", "phase"),
    # Parquet: 2,500-row files fix their schema after ~1,000 rows; only then do they take blocks
    [("JSON", 2100, 250, 1500), ("PARQUET", 3600, 2500, 3000)],
)
def test_the_fast_path_commits_the_same_objects_and_records(
    kafka_bootstrap, topic_factory, producer, tmp_path, fmt, count, flush_count, phase
):
    topic = topic_factory(f"json-lines-{fmt.lower()}", partitions=PARTITIONS)
    runs = {}
    for label, fast in (("fast", True), ("per-record", False)):
        root = tmp_path / label
        props = {
            "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
            "topics": topic,
            "connect.storage": "local",
            "connect.local.root": str(root),
            "connect.s3.kcql": f"INSERT INTO bkt:{PREFIX} SELECT * FROM {topic} STOREAS `{fmt}` "  # noqa: S608
            f"PROPERTIES('flush.count'={flush_count}, 'flush.interval'=600)",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            **fast_consumer_overrides(),
        }
        runs[label] = (SinkRun(kafka_bootstrap, props, fast), root)

    streams = {p: stream(p, count, late=phase + 100) for p in range(PARTITIONS)}
    good = {p: streams[p][1] for p in range(PARTITIONS)}
    # Two phases: a block is built from a whole consumed run of a partition and refused when any
    # message in it needs the per-record path, so the late odd records are produced only once
    # the early part was consumed; the fast path then has long plain runs to take.
    for start, end in ((0, phase), (phase, count)):
        for partition, (pairs, _) in streams.items():
            for key, value in pairs[start:end]:
                producer.produce(topic, key=key, value=value, partition=partition)
        producer.flush(20)
        ends = dict.fromkeys(range(PARTITIONS), end)
        for run, _root in runs.values():
            wait_for(
                lambda run=run, ends=ends: run.consumed_to(ends), timeout=60, what=f"offset {end} consumed"
            )
    for run, _root in runs.values():
        run.join()

    fast, slow = (runs[label][0].runtime for label in ("fast", "per-record"))
    fast_files, slow_files = (read_files(runs[label][1], fmt) for label in ("fast", "per-record"))
    assert list(fast_files) == list(slow_files), "different object keys were committed"
    for key, records in slow_files.items():
        assert fast_files[key] == records, f"{key} holds other records"
    assert len(slow_files) >= 3 * PARTITIONS  # several files per partition
    # the fast path was really used, and really off in the other run
    assert slow.records_in_blocks == 0
    # (Parquet takes blocks only once a file fixed its schema, after ~1,000 rows)
    assert fast.records_in_blocks > (count * PARTITIONS) // (2 if fmt == "JSON" else 5)
    assert (fast.records_in, fast.errors_tolerated) == (slow.records_in, slow.errors_tolerated)
    assert fast.records_in + fast.errors_tolerated == count * PARTITIONS

    # every good record exactly once, in offset order within its partition
    seen: dict[int, list[int]] = {p: [] for p in range(PARTITIONS)}
    for key in sorted(fast_files, key=lambda k: (int(k.split("/")[1]), k)):  # <topic>/<partition>/<file>
        records = fast_files[key] if fmt == "JSON" else fast_files[key][1]
        for record in records:
            if isinstance(record, dict) and record.get("p") is not None:
                assert int(key.split("/")[1]) == record["p"], f"{key}: a record of another partition"
                seen[record["p"]].append(record["id"])
    assert seen == good
