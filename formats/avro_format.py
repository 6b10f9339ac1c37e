"""STOREAS AVRO: Avro object container files written with fastavro, block by block.

The writer schema is the record's value schema (or the envelope schema built around the key and
value schemas), logical types included. Schemaless values get a schema inferred per file (see
:mod:`formats.schema_inference`); field names that are not valid Avro names are sanitized
reversibly there. Rows are buffered only until the file's schema is fixed (the first
``_FREEZE_ROWS`` records); after that fastavro encodes each record into its block buffer and
writes a compressed block every ``sync_interval`` bytes, so memory stays bounded by one block.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
from fastavro.write import Writer

from formats._rows import RowBuilder, RowFileWriter, row_error
from formats.base import (
    Batch,
    FileFormat,
    FormatError,
    FormatSettings,
    FormatWriter,
    Record,
    RecordFormatError,
)
from formats.codecs import AVRO_CODECS, DEFAULT_LEVELS
from formats.schema_inference import rename_for_avro

__all__ = ["AvroFormat", "AvroWriter"]

_SYNC_INTERVAL = 256 * 1024
"""Uncompressed bytes per Avro block: large enough for good compression, small enough for memory."""
_FREEZE_ROWS = 1000
"""Rows buffered at most before the schema is fixed and the header written. Files whose schemas
are all given open at once; inferred schemas (and parts only seen null so far) merge meanwhile."""
_ROW_ESTIMATE = 100
"""Bytes assumed per buffered row without raw JSON text, for bytes_written before the header."""


def _check_codec_available(codec: str) -> None:
    """Fail at configuration time, not at the first block, when a codec library is missing."""
    name = AVRO_CODECS[codec]
    try:
        probe = Writer(io.BytesIO(), fastavro.parse_schema("null"), codec=name)
        probe.write(None)
        probe.flush()
    except Exception as exc:  # fastavro raises ValueError / ImportError variants for missing libs
        raise FormatError(f"AVRO codec {codec} is not available here: {exc}") from exc


class AvroWriter(RowFileWriter):
    """Streams rows into one Avro container file."""

    def __init__(self, path: Path, settings: FormatSettings, codec: str) -> None:
        super().__init__(path)
        self._settings = settings
        self._rows = RowBuilder(settings, "AVRO")
        self._codec = AVRO_CODECS[codec]
        level = settings.level if settings.level is not None else DEFAULT_LEVELS.get(codec)
        self._level = level if codec in ("DEFLATE", "ZSTD", "XZ") else None
        self._pending: list[Any] = []
        self._pending_records: list[Record] = []
        self._pending_bytes = 0
        self._reported = 0
        self._writer: Any = None
        self._rename: tuple[str, ...] = ()
        self._branches: tuple[tuple[str, str], ...] = ()
        self._block: list[Any] = []
        """Rows in fastavro's open block, to rebuild it if a row fails halfway through encoding."""

    def append(self, batch: Batch) -> int:
        return self._write_records(batch.records())

    def _buffered(self) -> int:
        return len(self._pending)

    def _freeze_at(self) -> int:
        return _FREEZE_ROWS

    def _append(self, rows: list[Any], records: Sequence[Record]) -> None:
        if not rows:
            return
        if self._writer is None:
            self._count += len(rows)
            self._pending.extend(rows)
            self._pending_records.extend(records)
            self._pending_bytes += sum(
                _ROW_ESTIMATE if r.raw_value is None else len(r.raw_value) for r in records
            )
            if self._rows.settled or len(self._pending) >= _FREEZE_ROWS:
                self._open()
            return
        self._encode(rows, records)

    def _open(self) -> None:
        schema, self._rename = self._rows.avro_schema(sanitize=True)
        try:
            parsed = fastavro.parse_schema(schema)
        except Exception as exc:  # SchemaParseException and friends: the schema itself is unusable
            first = self._pending_records[0]
            message = f"the record's Avro schema cannot be used: {exc}"
            if self._call_start:
                # rows accepted by earlier calls cannot be stored: the whole file must go
                raise FormatError(f"{message} ({first.where}); the file must be discarded") from exc
            # only this call's rows are affected: forget them, so the writer is empty and usable
            self._count -= len(self._pending)
            self._pending, self._pending_records, self._pending_bytes = [], [], 0
            self._rows = RowBuilder(self._settings, "AVRO")
            raise RecordFormatError(message, first, 0) from exc
        self._branches = _record_branches(parsed) if self._rows.envelope is not None else ()
        self._writer = Writer(
            self._file,  # type: ignore[arg-type]  # a binary file-like object, all fastavro needs
            parsed,
            codec=self._codec,
            sync_interval=_SYNC_INTERVAL,
            compression_level=self._level,
        )
        pending, records = self._pending, self._pending_records
        self._pending, self._pending_records, self._pending_bytes = [], [], 0
        self._count -= len(pending)
        self._encode(pending, records, earlier=self._call_start)

    def _encode(self, rows: list[Any], records: Sequence[Record], earlier: int = 0) -> None:
        """Encode ``rows``; the first ``earlier`` of them came from earlier calls (see
        :meth:`formats.parquet_format.ParquetWriter._convert` for why that matters)."""
        writer = self._writer
        write = writer.write
        rename, branches, block = self._rename, self._branches, self._block
        for index, row in enumerate(rows):
            if rename:
                row = _renamed(row, rename)
            if branches:
                row = dict(row)
                for part, name in branches:
                    if row[part] is not None:
                        # name the union branch: fastavro otherwise tries each branch by validating
                        row[part] = (name, row[part])
            try:
                write(row)
            except (ValueError, TypeError, AttributeError, KeyError, OverflowError) as exc:
                # The row does not match the writer schema (a converter bug, a value outside its
                # type). Its partial bytes are in the open block: rebuild the block from the rows
                # that made it, so the file stays valid and the writer usable.
                writer.io.clear()
                writer.block_count = 0
                for good in block:
                    write(good)
                raise row_error(
                    f"the value does not match its Avro schema: {exc}", records, index, earlier
                ) from exc
            self._count += 1
            if writer.block_count == 0:  # fastavro just wrote the block out
                block.clear()
            else:
                block.append(row)

    @property
    def bytes_written(self) -> int:
        if self._writer is None:
            now = self._file.count + self._pending_bytes
        else:
            now = self._file.count + self._writer.io.tell()
        # the open block counts uncompressed until it is written compressed; never report a drop
        self._reported = max(self._reported, now)
        return self._reported

    def _finish(self) -> None:
        self._call_start = self._buffered()  # every row came from a write() that returned
        if self._writer is None:
            if not self._pending:
                # an empty file still gets a valid header so readers do not choke
                empty = fastavro.parse_schema("null")
                self._writer = Writer(self._file, empty, codec=self._codec)  # type: ignore[arg-type]
            else:
                self._open()
        if self._writer is not None:
            self._writer.flush()


def _record_branches(parsed: Any) -> tuple[tuple[str, str], ...]:
    """``(field, record full name)`` for envelope fields typed ``["null", <record>]``."""
    out = []
    for field in parsed.get("fields", ()):
        kind = field["type"]
        if field["name"] in ("key", "value") and isinstance(kind, list) and len(kind) == 2:
            branch = kind[1]
            if isinstance(branch, dict) and branch.get("type") == "record":
                out.append((field["name"], branch["name"]))
    return tuple(out)


def _renamed(row: Any, parts: tuple[str, ...]) -> Any:
    if parts == ("*",):
        return rename_for_avro(row, None)
    out = dict(row)
    for part in parts:
        if out.get(part) is not None:
            out[part] = rename_for_avro(out[part], None)
    return out


class AvroFormat(FileFormat):
    """Avro container files; codecs UNCOMPRESSED (null), DEFLATE, SNAPPY, ZSTD, BZIP2, XZ."""

    def __init__(self, settings: FormatSettings) -> None:
        super().__init__(settings)
        _check_codec_available(self._codec)

    def open(self, path: Path) -> FormatWriter:
        return AvroWriter(path, self.settings, self._codec)
