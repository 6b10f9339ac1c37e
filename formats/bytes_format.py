"""STOREAS BYTES: the raw value bytes, exactly one record per file (as Lenses).

The file holds the value byte for byte, with nothing added, so binary payloads (images, protobuf,
already-compressed data) round-trip exactly. A null value (tombstone) gives an empty file. A
``str`` value (StringConverter) is written as UTF-8. Structured values (dicts, lists, numbers)
have no canonical byte form and are rejected: use a ByteArrayConverter for the value, or another
format. ``append`` takes one record per file and returns 0 for the next, so the sink core rolls
a new file; BYTES never rolls on schema changes.
"""

from __future__ import annotations

from pathlib import Path

from formats._file import StagingWriter
from formats._unicode import surrogate_error, text_surrogate
from formats.base import Batch, FileFormat, FormatWriter, PartSink, RecordFormatError

__all__ = ["BytesFormat", "BytesWriter"]


class BytesWriter(StagingWriter):
    """Writes the single record's value bytes."""

    def append(self, batch: Batch) -> int:
        if self._count:
            return 0
        record = batch.records()[0]
        value = record.value
        if isinstance(value, str):
            bad = text_surrogate(value)
            if bad is not None:
                raise surrogate_error(record, 0, "value", bad, "BYTES")
            value = value.encode("utf-8")
        elif value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise RecordFormatError(
                f"STOREAS BYTES needs a byte-array value (ByteArrayConverter), got a {type(value).__name__}",
                record,
                0,
            )
        if value:
            self._file.write(value)
        self._count = 1
        return 1


class BytesFormat(FileFormat):
    """Raw value bytes, one record per file."""

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return BytesWriter(path, spill)
