"""Python transforms the chain tests load by ``module:callable``, as a user's would be."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from sink.records.record import SinkRecord


def upper_names(record: SinkRecord) -> SinkRecord:
    value = dict(record.value)
    value["name"] = value["name"].upper()
    return dataclasses.replace(record, value=value, raw_value=None)


def only_even(record: SinkRecord) -> SinkRecord | None:
    return record if record.value["id"] % 2 == 0 else None


def one_per_item(record: SinkRecord) -> Iterator[SinkRecord]:
    for item in record.value["items"]:
        yield dataclasses.replace(record, value={"id": record.value["id"], "item": item}, raw_value=None)


def broken(record: SinkRecord) -> SinkRecord:
    raise KeyError("no such field")


def wrong_type(record: SinkRecord) -> str:
    return "not a record"


NOT_CALLABLE = 42


def fail_on_three(record: SinkRecord) -> SinkRecord:
    if record.value["id"] == 3:
        raise ValueError("three is not allowed")
    return record


def upper_in_place(record: SinkRecord) -> SinkRecord:
    """Changes the value in place and returns the same record (the raw JSON text is then stale)."""
    record.value["name"] = record.value["name"].upper()
    return record


def twice(record: SinkRecord) -> list[SinkRecord]:
    """Two records per message, told apart by ``copy`` (a fan-out for the Spark and run tests)."""
    return [dataclasses.replace(record, value={**record.value, "copy": n}) for n in (0, 1)]


def batch_upper(records: list[SinkRecord]) -> list[SinkRecord]:
    """A batch callable: every name upper-cased, the records with odd ids dropped."""
    return [
        dataclasses.replace(r, value={**r.value, "name": r.value["name"].upper()})
        for r in records
        if r.value["id"] % 2 == 0
    ]


def batch_fails_on_three(records: list[SinkRecord]) -> list[SinkRecord]:
    if any(r.value["id"] == 3 for r in records):
        raise ValueError("three is not allowed")
    return records


def batch_wrong_offset(records: list[SinkRecord]) -> list[SinkRecord]:
    return [dataclasses.replace(r, offset=r.offset + 1000) for r in records]
