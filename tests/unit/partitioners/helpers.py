"""Builders shared by the partitioner tests (plans without the KCQL parser, records, file metas)."""

from __future__ import annotations

from typing import Any

from kcql.model import FileNaming, Padding, PartitionField, SinkPlan
from partitioners import FileMeta
from sink.records.record import SinkRecord

__all__ = ["field", "meta", "plan", "record"]


def field(spec: str) -> PartitionField:
    """A PartitionField as the KCQL compiler documents it (kcql/model.py), backticks pre-removed.

    ``spec`` uses ``|`` to separate path segments when a segment itself contains dots
    (``_key.|cost.centre.id`` → key, ("cost.centre.id",)).
    """
    parts = spec.split("|") if "|" in spec else spec.split(".")
    parts = [p.strip(".") for p in parts if p.strip(".")]
    head, rest = parts[0], tuple(parts[1:])
    spec_text = ".".join(parts)
    if head == "_key":
        return PartitionField(spec_text, "key", rest)
    if head == "_value":
        return PartitionField(spec_text, "value", rest)
    if head == "_header":
        return PartitionField(spec_text, "header", rest)
    if head == "_topic":
        return PartitionField(spec_text, "topic")
    if head == "_partition":
        return PartitionField(spec_text, "partition")
    if head == "_date":
        return PartitionField(spec_text, "date", (".".join(rest),))
    return PartitionField(spec_text, "value", (head, *rest))


def plan(
    *specs: str,
    prefix: str = "streamReactorBackups",
    source: str = "myTopic",
    nopartition: bool = False,
    include_keys: bool | None = None,
    padding: Padding | None = None,
    naming: FileNaming = FileNaming.LENSES,
    key_suffix: str = "",
) -> SinkPlan:
    partition_by = None if nopartition else tuple(field(s) for s in specs)
    if include_keys is None:
        include_keys = bool(partition_by)  # the Lenses default
    return SinkPlan(
        bucket="bucket",
        prefix=prefix,
        source=source,
        partition_by=partition_by,
        include_keys=include_keys,
        padding=padding or Padding(),
        naming=naming,
        key_suffix=key_suffix,
    )


def record(
    value: Any = None,
    key: Any = None,
    *,
    topic: str = "myTopic",
    partition: int = 1,
    offset: int = 0,
    timestamp: int | None = 0,
    headers: tuple[tuple[str, Any], ...] = (),
) -> SinkRecord:
    return SinkRecord(topic, partition, offset, timestamp, key, value, headers)


def meta(
    path: str,
    *,
    topic: str = "myTopic",
    partition: int = 1,
    first: int = 0,
    last: int = 0,
    min_ts: int = 0,
    max_ts: int = 0,
    ext: str = "json",
) -> FileMeta:
    return FileMeta(topic, partition, path, first, last, min_ts, max_ts, last - first + 1, ext)
