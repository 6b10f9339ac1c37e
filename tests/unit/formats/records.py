"""Records shared by the format tests: keys, headers, nulls, nested structs, decimals, timestamps, unicode."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

from sink.records.batch import RecordBatch
from sink.records.record import SinkRecord

ADDRESS_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Address",
    "fields": [
        {"name": "street", "type": "string"},
        {"name": "zip", "type": ["null", "string"], "default": None},
    ],
}

ORDER_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        {"name": "note", "type": ["null", "string"], "default": None},
        {"name": "address", "type": ADDRESS_SCHEMA},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
    ],
}

CREATED = datetime(2024, 3, 1, 12, 30, 45, 123000, tzinfo=UTC)
CREATED_MS = 1709296245123
DAY = date(2024, 3, 1)
DAY_DAYS = 19783


def order(i: int, **overrides: Any) -> dict[str, Any]:
    """An order value matching ORDER_SCHEMA; odd ids have null optional fields."""
    value: dict[str, Any] = {
        "id": i,
        "name": f'ördér-{i} ✓, "quoted"',
        "price": Decimal("12.34") + i,
        "created": CREATED,
        "day": DAY,
        "note": None if i % 2 else f"note {i}\nsecond line",
        "address": {"street": f"{i} Main St", "zip": None if i % 2 else "12345"},
        "tags": ["a", "b"][: i % 3],
        "attrs": {"k": i},
    }
    value.update(overrides)
    return value


def record(
    offset: int,
    value: Any,
    *,
    schema: Any = None,
    key: Any = None,
    headers: tuple[tuple[str, Any], ...] = (),
    timestamp: int | None = CREATED_MS,
    raw_value: bytes | None = None,
    topic: str = "orders",
    partition: int = 0,
    key_schema: Any = None,
) -> SinkRecord:
    return SinkRecord(
        topic=topic,
        partition=partition,
        offset=offset,
        timestamp=timestamp,
        key=key,
        value=value,
        headers=headers,
        key_schema=key_schema,
        value_schema=schema,
        raw_value=raw_value,
    )


def orders(n: int, start: int = 0) -> list[SinkRecord]:
    """``n`` schema'd order records with string keys (every third key null) and mixed headers."""
    return [
        record(
            start + i,
            order(start + i),
            schema=ORDER_SCHEMA,
            key=None if i % 3 == 2 else f"key-{start + i}",
            key_schema="string",
            headers=(("trace-id", f"t{i}"), ("bin", b"\x00\xff"), ("trace-id", "again"))[: i % 4],
        )
        for i in range(n)
    ]


def append(writer: Any, records: Sequence[SinkRecord]) -> int:
    """``writer.append`` of records given as a list (one topic partition, in offset order)."""
    return int(writer.append(RecordBatch.of(records))) if records else 0


def write_rolling(tmp_path: Any, settings: Any, records: list[SinkRecord], batch: int = 1000) -> list[Any]:
    """Write like the sink core: a short ``write`` closes the file and opens the next one.

    Returns the closed files' paths in order.
    """
    from formats import get_format

    fmt = get_format(settings)
    paths = []
    writer = None
    pending = list(records)
    while pending:
        if writer is None:
            path = tmp_path / f"part-{len(paths):03d}.{fmt.extension}"
            writer = fmt.open(path)
            paths.append(path)
        chunk = pending[:batch]
        n = append(writer, chunk)
        pending = pending[n:]
        if n < len(chunk):
            assert writer.record_count > 0, "a writer with no records must accept the first record"
            writer.close()
            writer = None
    if writer is not None:
        writer.close()
    return paths
