"""Sinking Kafka messages into rolling files the way the runtime and the task do, for the
cheap-form tests (``test_cheap_*.py``).

A run turns real ``confluent_kafka.Message`` objects into batches with
:class:`~sink.records.intake.BatchBuilder` (one ``build`` per poll), appends every batch to the
open file in slices (``flush.count`` room), starts a new file where ``append`` returns fewer
records than it was given, and applies ``errors.tolerance=all`` to a record error: the record
named by the error's offset is skipped and the rest of its batch goes on. A ``FormatError`` that
is no record error stops the run (the runtime would discard the file and replay). The files are
read back with independent readers: gzip + the json module, fastavro, pyarrow, the csv module,
plain bytes.

The reference run is the same messages through ``BatchBuilder(..., cheap_forms=False)``: batches
with the per-record view only. Whatever cheap forms the other run's batches carry, both runs must
leave the same files and the same record errors.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Executor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fastavro
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Message
from confluent_kafka.schema_registry import Schema
from confluent_kafka.schema_registry.error import SchemaRegistryError

from formats import FormatError, FormatSettings, get_format
from formats.base import FormatWriter
from kcql.errors import RecordError
from kcql.model import StoreFormat
from sink.records.batch import RecordBatch, Source
from sink.records.converters import (
    AvroConverter,
    ByteArrayConverter,
    Converter,
    JsonConverter,
    RecordConverter,
    StringConverter,
)
from sink.records.intake import BatchBuilder

TOPIC = "t"

# ------------------------------------------------------------------------------- messages


def messages(
    values: Sequence[bytes | None],
    keys: Sequence[bytes | None] | None = None,
    headers: Callable[[int], list[tuple[str, str | bytes | None]] | None] | None = None,
    first_offset: int = 0,
) -> list[Message]:
    """Consumed messages of partition 0 of topic ``t``: offsets from ``first_offset``, create-time
    timestamps, the given keys (none by default) and headers (``headers(i)``)."""
    out = []
    for i, value in enumerate(values):
        out.append(
            Message(
                topic=TOPIC,
                partition=0,
                offset=first_offset + i,
                key=None if keys is None else keys[i],
                value=value,
                headers=None if headers is None else headers(i),
                timestamp=(1, 1_700_000_000_000 + i),
            )
        )
    return out


def polls(items: Sequence[Message], sizes: Sequence[int]) -> list[list[Message]]:
    """``items`` cut into consumer polls of ``sizes`` (cycled)."""
    out, start, turn = [], 0, 0
    while start < len(items):
        size = sizes[turn % len(sizes)] if sizes else len(items)
        out.append(list(items[start : start + size]))
        start, turn = start + size, turn + 1
    return out


# ------------------------------------------------------------------------ a fake registry


class FakeRegistry:
    """What :class:`AvroConverter` asks its ``SchemaRegistryClient``: ``get_schema(id)``.

    Unknown ids answer as the registry does (HTTP 404, error 40403), which the converter turns
    into a record error of the value. Every question is recorded in ``asked``.
    """

    def __init__(self, schemas: dict[int, Any]) -> None:
        self.schemas = schemas
        self.asked: list[int] = []

    def get_schema(self, schema_id: int) -> Schema:
        self.asked.append(schema_id)
        if schema_id not in self.schemas:
            raise SchemaRegistryError(404, 40403, f"Schema {schema_id} not found")
        return Schema(json.dumps(self.schemas[schema_id]), "AVRO")


def avro_converter(schemas: dict[int, Any]) -> AvroConverter:
    """A real AvroConverter whose registry client is a :class:`FakeRegistry` (no server, no network)."""
    converter = AvroConverter("http://registry.invalid:1")
    converter._client = FakeRegistry(schemas)  # type: ignore[assignment]
    return converter


def wire(schema_id: int, schema: Any, value: Any) -> bytes:
    """Confluent wire format: magic byte 0, the schema id (4 bytes, big-endian), the Avro body."""
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), value)
    return b"\x00" + schema_id.to_bytes(4, "big") + body.getvalue()


def value_converter(kind: str, registry: dict[int, Any] | None = None) -> Converter:
    """``json`` (schemaless), ``json-schemas`` (``schemas.enable=true``), ``avro``, ``string``, ``bytes``."""
    if kind == "json":
        return JsonConverter(False)
    if kind == "json-schemas":
        return JsonConverter(True)
    if kind == "avro":
        return avro_converter(registry or {})
    if kind == "string":
        return StringConverter()
    if kind == "bytes":
        return ByteArrayConverter()
    raise ValueError(kind)


def key_converter(kind: str) -> Converter:
    return StringConverter() if kind == "string" else ByteArrayConverter()


# ------------------------------------------------------------------------------- the run


@dataclass
class Outcome:
    """What one run left behind."""

    files: list[Any] = field(default_factory=list)
    """Each closed file as independent readers see it (see :func:`read_back`)."""
    errors: list[tuple[int, str, str]] = field(default_factory=list)
    """``(offset, stage, error class)`` of every record error, in order."""
    failed: str | None = None
    """A FormatError that is no record error: the run stopped there (the file is discarded)."""
    appends: int = 0


class PartitionSink:
    """One partition's rolling files, written as the task writes them."""

    def __init__(
        self,
        directory: Path,
        settings: FormatSettings,
        builder: BatchBuilder,
        rooms: Sequence[int] = (),
        prefetch: bool = False,
    ) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.settings = settings
        self.format = get_format(settings)
        self.builder = builder
        self.rooms = list(rooms)
        self.prefetch = prefetch
        self.turn = 0
        self.outcome = Outcome()
        self.paths: list[Path] = []
        self.writer: FormatWriter | None = None

    def _open(self) -> FormatWriter:
        if self.writer is None:
            self.paths.append(self.directory / f"{len(self.paths):03d}.{self.format.extension}")
            self.writer = self.format.open(self.paths[-1])
        return self.writer

    def roll(self) -> None:
        """Close the open file (if any) and read it back."""
        if self.writer is None:
            return
        writer, self.writer = self.writer, None
        writer.close()
        self.outcome.files.append(read_back(self.paths[-1], self.settings))

    def poll(self, polled: Sequence[Message]) -> None:
        """One consumer poll: its batches (prefetched first when asked), each put in order."""
        batches = self.builder.build(TOPIC, 0, polled)
        if self.prefetch and self.writer is not None:
            for batch in batches:
                self.writer.prefetch(batch)
        for batch in batches:
            self.put(batch)

    def put(self, batch: RecordBatch) -> None:
        """The runtime's error policy around the task (``errors.tolerance=all``)."""
        while True:
            try:
                self._write(batch)
                return
            except RecordError as exc:
                index = batch.index_of(exc.offset)
                self.outcome.errors.append((exc.offset, exc.stage, type(exc).__name__))
                if index + 1 == len(batch):
                    return
                batch = batch.slice(index + 1)

    def _write(self, part: RecordBatch) -> None:
        """The task's ``_write``: slices of the room left, a new file after a short append."""
        while True:
            writer = self._open()
            room = self.rooms[self.turn % len(self.rooms)] if self.rooms else len(part)
            self.turn += 1
            chunk = part if len(part) <= room else part.slice(0, room)
            self.outcome.appends += 1
            try:
                taken = writer.append(chunk)
            except RecordError as exc:
                # the error's index and offset name the same record of the batch it was given
                assert chunk.offset_at(exc.index) == exc.offset, (exc.index, exc.offset, chunk)
                raise
            assert 0 <= taken <= len(chunk)
            if taken < len(chunk):  # the next record must start a new file
                assert taken or writer.record_count, "an empty writer refused a record"
                self.roll()
            if taken == len(part):
                return
            part = part.slice(taken)

    def finish(self) -> Outcome:
        self.roll()
        return self.outcome


def sink(
    directory: Path,
    settings: FormatSettings,
    builder: BatchBuilder,
    items: Sequence[Message],
    poll_sizes: Sequence[int] = (),
    rooms: Sequence[int] = (),
    prefetch: bool = False,
) -> Outcome:
    """Sink ``items`` in polls of ``poll_sizes`` (cycled; one poll when empty)."""
    run = PartitionSink(directory, settings, builder, rooms, prefetch)
    try:
        for polled in polls(items, poll_sizes):
            run.poll(polled)
        return run.finish()
    except RecordError:
        raise
    except FormatError as exc:
        run.outcome.failed = f"{type(exc).__name__}: {exc}"
        if run.writer is not None:
            run.writer.abort()
        return run.outcome


# --------------------------------------------------------------------------- reading back


def _plain(value: Any) -> Any:
    """Values made comparable: floats by repr (NaN equals NaN, -0.0 is not 0.0), recursively."""
    if isinstance(value, float):
        return ("float", repr(value))
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _json_line(line: bytes) -> Any:
    try:
        return _plain(json.loads(line))
    except ValueError:
        return ("not JSON", line)


def read_back(path: Path, settings: FormatSettings) -> dict[str, Any]:
    """What independent readers see of one closed file."""
    data = path.read_bytes()
    fmt = settings.format
    if fmt is StoreFormat.JSON:
        text = gzip.decompress(data) if settings.codec == "GZIP" else data
        assert not text or text.endswith(b"\n")
        return {"bytes": data, "lines": [_json_line(line) for line in text.split(b"\n")[:-1]]}
    if fmt is StoreFormat.AVRO:
        with path.open("rb") as handle:
            reader = fastavro.reader(handle)
            rows = [_plain(row) for row in reader]
            sync = reader._header["sync"]
            return {
                "schema": reader.writer_schema,
                "codec": reader.codec,
                "rows": rows,
                # fastavro draws a random sync marker per file: everything else is the same bytes
                "bytes": data.replace(sync, b"\x00" * len(sync)),
            }
    if fmt is StoreFormat.PARQUET:
        table = pq.read_table(path)
        return {
            "schema": table.schema,
            "metadata": table.schema.metadata,
            "rows": [_plain(row) for row in table.to_pylist()],
        }
    if fmt in (StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS):
        return {"bytes": data, "rows": list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))}
    return {"bytes": data}


def assert_same(reference: Outcome, cheap: Outcome) -> None:
    """The cheap run left exactly what the per-record run left."""
    assert cheap.failed == reference.failed, "one run failed where the other did not"
    assert cheap.errors == reference.errors, "different record errors"
    assert len(cheap.files) == len(reference.files), "the files were split differently"
    for index, (want, got) in enumerate(zip(reference.files, cheap.files, strict=True)):
        if "schema" in want and hasattr(want["schema"], "equals"):
            assert got["schema"].equals(want["schema"], check_metadata=True), f"file {index}: schema"
        assert got == want, f"file {index} differs"


# ----------------------------------------------------------------------------- the spies


@dataclass
class FormsSeen:
    """Which cheap forms the batches handed out during a run, counted in records."""

    json_asked: int = 0
    json_served: int = 0
    """Records covered by a non-None ``json_lines`` (a format may still not use them)."""
    avro_asked: int = 0
    avro_served: int = 0
    decoded: int = 0
    """Values decoded column by column (``decode_values``)."""
    converted: int = 0
    """Messages converted one by one (the per-record view)."""

    def reset(self) -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, 0)


@contextmanager
def forms_seen(monkeypatch: pytest.MonkeyPatch) -> Iterator[FormsSeen]:
    """Count the cheap forms served and the per-record conversions while the block runs."""
    import sink.records.avro_values as avro_values

    seen = FormsSeen()
    json_lines, avro_columns, record = Source.json_lines, Source.avro_columns, Source.record
    decode_values = avro_values.decode_values

    def spy_json(self: Source, start: int, stop: int, checked: bool) -> bytes | None:
        seen.json_asked += stop - start
        out = json_lines(self, start, stop, checked)
        if out is not None:
            seen.json_served += stop - start
        return out

    def spy_avro(self: Source, start: int, stop: int) -> Any:
        seen.avro_asked += stop - start
        out = avro_columns(self, start, stop)
        if out is not None:
            seen.avro_served += stop - start
        return out

    def spy_record(self: Source, i: int, index: int) -> Any:
        if self.records[i] is None:
            seen.converted += 1
        return record(self, i, index)

    def spy_decode(values: Sequence[bytes], *args: Any) -> Any:
        seen.decoded += len(values)
        return decode_values(values, *args)

    with monkeypatch.context() as patch:
        patch.setattr(Source, "json_lines", spy_json)
        patch.setattr(Source, "avro_columns", spy_avro)
        patch.setattr(Source, "record", spy_record)
        patch.setattr(avro_values, "decode_values", spy_decode)
        yield seen


def builders(
    value: Callable[[], Converter],
    key: Callable[[], Converter] = ByteArrayConverter,
    *,
    check_json: bool = True,
    parse_value: bool = True,
    executor: Executor | None = None,
) -> tuple[BatchBuilder, BatchBuilder]:
    """``(per-record, cheap)`` builders over converters of their own (converters cache)."""

    def make(cheap: bool) -> BatchBuilder:
        converter = RecordConverter(key(), value(), parse_value=lambda _topic: parse_value)
        return BatchBuilder(converter, check_json=check_json, executor=executor, cheap_forms=cheap)

    return make(False), make(True)
