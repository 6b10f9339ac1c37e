"""STOREAS JSON: JSON lines, optionally gzipped (extension ``gz``, as Lenses names it).

Without the envelope only the value is written, one document per line. A batch of schemaless
JSON values that has the joined one-line form (``Batch.json_lines``, checked to be valid JSON)
is written as it is, with no work per record; otherwise each value that arrived as JSON text
(``record.raw_value``) is written through byte for byte (minus a trailing newline), and a raw
text with an embedded line break is re-encoded from the parsed value so that every record stays
on exactly one line. Tombstones are written as
``null`` lines, so line ``n`` of a file is always the file's ``n``-th record. JSON never rolls a
file on schema changes.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from pathlib import Path

from formats._file import StagingWriter
from formats.base import (
    Batch,
    FileFormat,
    FormatSettings,
    FormatWriter,
    PartSink,
    Record,
    RecordFormatError,
)
from formats.codecs import DEFAULT_LEVELS
from formats.envelope import json_envelope
from formats.json_values import dumps

__all__ = ["JsonFormat", "JsonWriter"]

_GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
"""A gzip member header: deflate, no name, mtime 0 (reproducible files), OS unknown."""


def _raw_line(raw: bytes) -> bytes | None:
    """``raw`` without its trailing newline, or ``None`` when it spans several lines."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    if b"\n" in raw or b"\r" in raw:
        return None
    return raw


class JsonWriter(StagingWriter):
    """Writes JSON lines, through a streaming gzip encoder when the codec is GZIP.

    With GZIP, ``bytes_written`` counts compressed bytes already in the file; deflate holds back
    at most a few tens of KiB, so flush.size is met slightly late rather than early.
    """

    def __init__(
        self, path: Path, settings: FormatSettings, codec: str, spill: PartSink | None = None
    ) -> None:
        super().__init__(path, spill)
        self._envelope = settings.envelope
        self._crc = 0
        self._size = 0
        self._deflate = None
        if codec == "GZIP":
            level = DEFAULT_LEVELS["GZIP"] if settings.level is None else settings.level
            # raw deflate + our own header/trailer: streaming, and bytes_written stays exact
            self._deflate = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS, 9)
            self._file.write(_GZIP_HEADER)

    def _line(self, record: Record, index: int) -> bytes:
        raw = record.raw_value
        if self._envelope is not None:
            line = _raw_line(raw) if raw is not None and record.value is not None else None
            try:
                return json_envelope(record, self._envelope, line).encode("utf-8") + b"\n"
            except (TypeError, ValueError) as exc:
                raise RecordFormatError(f"cannot write the record as JSON: {exc}", record, index) from exc
        if raw is not None:
            line = _raw_line(raw)
            if line is not None:
                return line + b"\n"
        value = record.value
        if isinstance(value, bytes | bytearray | memoryview):
            raise RecordFormatError(
                "Cannot currently write byte array as json (use STOREAS BYTES, a JSON/String value "
                "converter, or store.envelope=true, which writes bytes base64)",
                record,
                index,
            )
        try:
            return dumps(value).encode("utf-8") + b"\n"
        except (TypeError, ValueError) as exc:
            raise RecordFormatError(f"cannot write the value as JSON: {exc}", record, index) from exc

    def append(self, batch: Batch) -> int:
        if self._envelope is None:
            # schemaless JSON values are written as their one-line text anyway: all at once
            data = batch.json_lines()
            if data is not None:
                if self._deflate is None:  # one write, queued to the write-behind thread
                    self._file.write_pieces([data, b"\n"])
                else:
                    self._emit(data)
                    self._emit(b"\n")
                self._count += len(batch)
                return len(batch)
        return self._write_records(batch.records())

    def _write_records(self, records: Sequence[Record]) -> int:
        lines = []
        try:
            for index, record in enumerate(records):
                lines.append(self._line(record, index))
        finally:
            # records before a bad one are written, as RecordFormatError promises
            if lines:
                self._emit(b"".join(lines))
                self._count += len(lines)
        return len(lines)

    def _emit(self, data: bytes) -> None:
        if self._deflate is None:
            self._file.write(data)
            return
        self._crc = zlib.crc32(data, self._crc)
        self._size += len(data)
        out = self._deflate.compress(data)
        if out:
            self._file.write(out)

    def _finish(self) -> None:
        if self._deflate is not None:
            self._file.write(self._deflate.flush())
            trailer = self._crc.to_bytes(4, "little") + (self._size & 0xFFFFFFFF).to_bytes(4, "little")
            self._file.write(trailer)


class JsonFormat(FileFormat):
    """JSON lines; GZIP (``gz`` extension) or UNCOMPRESSED."""

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return JsonWriter(path, self.settings, self._codec, spill)
