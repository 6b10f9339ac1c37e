"""Committed records back out, without Spark: what ``kcql-sink cat`` prints.

Lists the committed files of each view (through the layout contract), decodes them with
pyarrow/fastavro/json/csv and yields one JSON-ready dict per record, in offset order per
topic-partition. With ``follow`` it keeps polling for newly committed files, like the kafka-store
reader's ``--wait``; because files appear atomically under their final key, a poll never sees half
a file, and each file is emitted once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from spark_reader.catalog import DataFile, ViewSpec, list_files
from spark_reader.records import read_table, to_jsonable
from spark_reader.storage import open_store

__all__ = ["iter_records", "record_offsets"]

log = logging.getLogger(__name__)


def record_offsets(
    f: DataFile, count: int, rows: Sequence[dict[str, Any]], envelope: bool, contiguous: bool = True
) -> list[int | None]:
    """Each record's Kafka offset, as exactly as the file tells it.

    Envelope files carry ``metadata.offset``. Otherwise the key gives the last offset (Lenses) or
    the first (Confluent); when a file holds a topic-partition's consecutive records
    (``contiguous``: no PARTITIONBY) the others are inferred, which holds for uncompacted topics.
    When the known range contradicts the count, or PARTITIONBY spread the offsets over several
    directories, only the known end is given (the others are ``None``).
    """
    if envelope:
        out: list[int | None] = []
        for row in rows:
            meta = row.get("metadata") if isinstance(row, dict) else None
            off = meta.get("offset") if isinstance(meta, dict) else None
            out.append(int(off) if off is not None else None)
        return out
    first, last = f.first_offset, f.last_offset
    if not contiguous:
        if last is not None:
            return [None] * (count - 1) + [last] if count else []
        return [first] + [None] * (count - 1) if count and first is not None else [None] * count
    if first is not None and last is not None:
        if last - first + 1 == count:
            return list(range(first, last + 1))
        return [None] * (count - 1) + [last] if count else []
    if last is not None:
        return list(range(last - count + 1, last + 1))
    if first is not None:
        return list(range(first, first + count))
    return [None] * count


def _emit(spec: ViewSpec, f: DataFile, from_offset: int | None) -> Iterator[dict[str, Any]]:
    plan = spec.plan
    data = open_store(spec.storage).read(plan.bucket, f.key)
    rows = read_table(data, plan.format, name=f"{plan.bucket}/{f.key}").to_pylist()
    envelope = plan.envelope is not None
    offsets = record_offsets(f, len(rows), rows, envelope, contiguous=not plan.partition_by)
    for row, offset in zip(rows, offsets, strict=True):
        if from_offset is not None and offset is not None and offset < from_offset:
            continue
        out: dict[str, Any] = {"topic": f.topic, "partition": f.partition, "offset": offset}
        if envelope:
            out.update(to_jsonable(row))
            out.pop("metadata", None)
            meta = row.get("metadata") or {}
            if meta.get("timestamp") is not None:
                out["timestamp"] = to_jsonable(meta["timestamp"])
        else:
            out["value"] = to_jsonable(row)
        out["file"] = f.key
        yield out


def iter_records(
    specs: Sequence[ViewSpec],
    *,
    topic: str | None = None,
    from_offset: int | None = None,
    follow: bool = False,
    poll_interval: float = 1.0,
    idle_timeout: float | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[dict[str, Any]]:
    """Yield committed records of ``specs`` (optionally one topic) in offset order per partition.

    Args:
        specs: the views to read (one per KCQL statement).
        topic: only this topic.
        from_offset: skip records (and whole files) below this offset.
        follow: keep polling for new files after the current ones are printed.
        poll_interval: seconds between polls when following.
        idle_timeout: when following, stop after this many seconds without a new file.
        should_stop: checked between polls, to end a follow loop from outside.
    """
    seen: set[tuple[str, str, str]] = set()
    last_new = time.monotonic()
    while True:
        new_files = 0
        for spec in specs:
            if topic is not None and not spec.plan.matches_topic(topic):
                continue
            for f in list_files(spec.plan, spec.storage, topic=topic):
                ident = (spec.plan.bucket, spec.plan.prefix, f.key)
                if ident in seen:
                    continue
                seen.add(ident)
                new_files += 1
                if from_offset is not None and f.last_offset is not None and f.last_offset < from_offset:
                    continue
                yield from _emit(spec, f, from_offset)
        now = time.monotonic()
        if new_files:
            last_new = now
        if not follow or should_stop():
            return
        if idle_timeout is not None and now - last_new >= idle_timeout:
            return
        time.sleep(poll_interval)
