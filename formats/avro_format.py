"""STOREAS AVRO: Avro object container files written with fastavro, block by block.

The writer schema is the record's value schema (or the envelope schema built around the key and
value schemas), logical types included. Schemaless values get a schema inferred per file (see
:mod:`formats.schema_inference`); field names that are not valid Avro names are sanitized
reversibly there. Rows are buffered only until the file's schema is fixed (the first
``FREEZE_ROWS`` records, see :mod:`formats._rows`); after that fastavro encodes each record into
its block buffer and writes a compressed block every ``sync_interval`` bytes, so memory stays
bounded by one block.
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
    PartSink,
    Record,
)
from formats.codecs import AVRO_CODECS, DEFAULT_LEVELS
from formats.schema_inference import rename_for_avro

__all__ = ["AvroFormat", "AvroWriter"]

_SYNC_INTERVAL = 256 * 1024
"""Uncompressed bytes per Avro block: large enough for good compression, small enough for memory."""


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

    def __init__(
        self, path: Path, settings: FormatSettings, codec: str, spill: PartSink | None = None
    ) -> None:
        super().__init__(path, settings, spill)
        self._rows = RowBuilder(settings, "AVRO")
        self._codec = AVRO_CODECS[codec]
        level = settings.level if settings.level is not None else DEFAULT_LEVELS.get(codec)
        self._level = level if codec in ("DEFLATE", "ZSTD", "XZ") else None
        self._reported = 0
        self._writer: Any = None
        self._rename: tuple[str, ...] = ()
        self._branches: tuple[tuple[str, str], ...] = ()
        self._block: list[Any] = []
        """Rows in fastavro's open block, to rebuild it if a row fails halfway through encoding."""

    def append(self, batch: Batch) -> int:
        return self._write_records(batch.records())

    def _fixed(self) -> bool:
        return self._writer is not None

    def _append(self, rows: list[Any], records: Sequence[Record]) -> None:
        if rows and not self._hold(rows, records):
            self._encode(rows, records)

    def _fix(self) -> None:
        schema, self._rename = self._rows.avro_schema(sanitize=True)
        try:
            parsed = fastavro.parse_schema(schema)
        except Exception as exc:  # SchemaParseException and friends: the schema itself is unusable
            message = f"the record's Avro schema cannot be used: {exc}"
            raise self._unusable_schema(message, exc, "AVRO") from exc
        self._branches = _record_branches(parsed) if self._rows.envelope is not None else ()
        self._writer = Writer(
            self._file,  # type: ignore[arg-type]  # a binary file-like object, all fastavro needs
            parsed,
            codec=self._codec,
            sync_interval=_SYNC_INTERVAL,
            compression_level=self._level,
        )
        pending, records = self._take_held()
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
                self._fix()
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

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return AvroWriter(path, self.settings, self._codec, spill)
