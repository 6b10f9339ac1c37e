"""Consumed messages for the batch tests: real ``confluent_kafka.Message`` objects (no broker), a
real AvroConverter whose Schema Registry client is a stub, Confluent wire values, and a wait for
a condition (never a sleep standing in for one)."""

from __future__ import annotations

import io
import json
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import fastavro
from confluent_kafka import Message
from confluent_kafka.schema_registry.error import SchemaRegistryError

from sink.records.converters import AvroConverter

__all__ = [
    "StubRegistry", "avro_converter", "blocked_in_wait", "body", "messages", "until", "wire",
]


def messages(
    values: Sequence[bytes | None],
    *,
    first: int = 0,
    offsets: Sequence[int] | None = None,
    keys: Sequence[bytes | None] | None = None,
    stamps: Sequence[tuple[int, int]] | None = None,
    topic: str = "t",
    partition: int = 0,
    headers: Sequence[list[tuple[str, bytes | None]] | None] | None = None,
) -> list[Message]:
    """One message per value; offsets ``first``, ``first+1``, ... unless ``offsets`` are given
    (a compacted topic has gaps); keys ``k<offset>`` and create-time stamps ``10_000+offset`` by default."""
    offsets = list(offsets) if offsets is not None else [first + i for i in range(len(values))]
    keys = keys if keys is not None else [b"k%d" % o for o in offsets]
    stamps = stamps if stamps is not None else [(1, 10_000 + o) for o in offsets]
    headers = headers if headers is not None else [None] * len(values)
    return [
        Message(topic=topic, partition=partition, offset=o, key=k, value=v, timestamp=ts, headers=h)
        for o, k, v, ts, h in zip(offsets, keys, values, stamps, headers, strict=True)
    ]


# ---------------------------------------------------------------------------------------- Avro


def body(schema: Any, record: Any) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(schema), record)
    return out.getvalue()


def wire(schema_id: int, schema: Any, record: Any) -> bytes:
    """Confluent wire format: magic byte 0, the schema id (4 bytes, big-endian), the Avro body."""
    return b"\x00" + schema_id.to_bytes(4, "big") + body(schema, record)


class _Registered:
    schema_type = "AVRO"

    def __init__(self, schema: Any) -> None:
        self.schema_str = json.dumps(schema)


class StubRegistry:
    """What ``AvroConverter`` asks its SchemaRegistryClient; counts the questions per id."""

    def __init__(self, schemas: dict[int, Any]) -> None:
        self.schemas = schemas
        self.asked: list[int] = []
        self.down = False

    def get_schema(self, schema_id: int) -> _Registered:
        self.asked.append(schema_id)
        if self.down:
            raise ConnectionError("Schema Registry unreachable")
        if schema_id not in self.schemas:
            raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")
        return _Registered(self.schemas[schema_id])


def avro_converter(schemas: dict[int, Any]) -> tuple[AvroConverter, StubRegistry]:
    """A real AvroConverter (so BatchBuilder gives Avro batches their columns) on a stub registry."""
    converter = AvroConverter("http://registry.invalid:8081")
    registry = StubRegistry(schemas)
    converter._client = registry  # type: ignore[assignment]
    return converter, registry


# ------------------------------------------------------------------------------------- threads


def until(condition: Callable[[], object], what: str, timeout: float = 10.0) -> None:
    """Wait for ``condition()`` to hold (polled), failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.002)


def blocked_in_wait(holding: object) -> bool:
    """Whether a thread holding ``holding`` in one of its frames' locals is blocked in a
    ``threading`` wait (an Event, a Condition, a Future's result) right now.

    This is how a test proves, without a sleep, that work that must wait is waiting: once this
    holds, the thread cannot move on before someone releases what it waits for.
    """
    frames = sys._current_frames()
    for thread_id, frame in frames.items():
        if thread_id == threading.get_ident():
            continue
        stack = []
        f = frame
        while f is not None:
            stack.append(f)
            f = f.f_back
        if not any(any(v is holding for v in list(f.f_locals.values())) for f in stack):
            continue
        top = stack[0]
        if top.f_code.co_name == "wait" and top.f_code.co_filename == threading.__file__:
            return True
    return False
