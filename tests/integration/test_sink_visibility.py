"""What a reader lists while the task commits: only complete data files under data keys.

A reader thread lists the bucket raw (``os.walk`` / boto3, not our storage code) over and over
while a task commits many small files, and reads every key ``partitioners.is_data_key`` accepts.
Every such file must already be complete (the same bytes as at the end), and every other key must
be one of the hidden kinds: the index, a temp upload, or the local backend's in-flight
``.kcql-tmp-*`` file. Temp-then-commit and the atomic rename/copy are what make this hold.
"""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from partitioners import is_data_key
from sink.records.record import TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_crash_driver import PARTITION, TOPIC, make_records
from tests.integration._sink_support import Backend, make_backend

TP = TopicPartition(TOPIC, PARTITION)
PREFIX = "out"
TOTAL = 120


@pytest.fixture(params=["local", "s3"])
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    return make_backend(request.param, tmp_path, request)


def _hidden(key: str) -> bool:
    return key.startswith((".indexes/", ".temp-upload/")) or any(
        part.startswith(".kcql-tmp-") for part in key.split("/")
    )


def test_a_concurrent_reader_sees_only_complete_data_files(backend: Backend, tmp_path: Path) -> None:
    seen: dict[str, bytes] = {}
    strays: list[str] = []
    stop = threading.Event()
    reader_errors: list[BaseException] = []

    def reader() -> None:
        try:
            while not stop.is_set():
                for key in backend.raw_list():
                    if is_data_key(key, PREFIX):
                        if key not in seen:
                            try:
                                seen[key] = backend.raw_read(key)
                            except (FileNotFoundError, KeyError):
                                continue  # listed, then replaced: read again next round
                    elif not _hidden(key):
                        strays.append(key)
        except BaseException as exc:  # reported below
            reader_errors.append(exc)

    kcql = (
        f"INSERT INTO {backend.bucket}:{PREFIX} SELECT * FROM {TOPIC} PARTITIONBY kind STOREAS JSON "  # noqa: S608
        "PROPERTIES('flush.count'=2, 'flush.interval'=3600)"
    )
    task = SinkTask()
    task.start(
        backend.config
        | {
            "name": "visibility",
            "connect.s3.kcql": kcql,
            "connect.s3.local.tmp.directory": str(tmp_path / "st"),
        }
    )
    thread = threading.Thread(target=reader, daemon=True)
    thread.start()
    try:
        task.open([TP])
        for start in range(0, TOTAL, 4):
            put_records(task, make_records(start, start + 4))
        task.close([TP])
    finally:
        stop.set()
        thread.join(timeout=30)
        task.stop()
    assert not reader_errors, reader_errors
    assert not strays, f"keys that are neither data nor hidden: {sorted(set(strays))[:5]}"
    final = {key: backend.raw_read(key) for key in backend.raw_list() if is_data_key(key, PREFIX)}
    assert len(final) == TOTAL // 2
    assert len(seen) >= 10, f"the reader caught only {len(seen)} files while the task ran"
    partial = [key for key, data in seen.items() if final.get(key) != data]
    assert not partial, f"a reader saw incomplete or replaced data files: {partial[:5]}"
