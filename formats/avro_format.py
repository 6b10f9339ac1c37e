"""STOREAS AVRO: Avro object container files written with fastavro, block by block.

The writer schema is the record's value schema (or the envelope schema built around the key and
value schemas), logical types included. Schemaless values get a schema inferred per file (see
:mod:`formats.schema_inference`); field names that are not valid Avro names are sanitized
reversibly there. Rows are buffered only until the file's schema is fixed (the first
``FREEZE_ROWS`` records, see :mod:`formats._rows`); after that fastavro encodes each record into
its block buffer and writes a compressed block every ``sync_interval`` bytes, so memory stays
bounded by one block. Schemaless JSON of a flat inferred schema skips the dict per record once the
schema is fixed: a batch's JSON lines are parsed by Arrow and encoded column by column
(:meth:`AvroWriter._append_arrow`), into the same bytes and the same blocks.

Pass-through: a batch whose values are Confluent Avro bodies of one record schema
(:meth:`formats.base.Batch.avro_bodies`) goes into a file of exactly that schema (no envelope; the
file's schema is then the registry's writer schema, as the decoding path writes it) as the bodies
are: they are appended to the open block and blocks are cut where fastavro would cut them, so
the file is the one the decoding path writes, without decoding or encoding a value.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import fastavro
import numpy as np
import pyarrow as pa
from fastavro.write import Writer

from formats._rows import RowBuilder, RowFileWriter, first_record_parser, row_error
from formats.arrow_schema import avro_to_arrow
from formats.avro_columns import FlatField, flat_fields
from formats.avro_encode import encode_rows
from formats.avro_wire import block_cuts, bodies_of
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
from formats.json_lines_arrow import LineParser, line_parse_options
from formats.schema_inference import avro_names, rename_for_avro
from kcql.errors import RecordError

__all__ = ["AvroFormat", "AvroWriter"]

_SYNC_INTERVAL = 256 * 1024
"""Uncompressed bytes per Avro block: large enough for good compression, small enough for memory."""


class _RawBlock:
    """What ``fastavro.write.Writer.write_block`` reads of a block: its record count and its
    uncompressed bytes (it compresses them with the file's codec)."""

    __slots__ = ("bytes_", "num_records")

    def __init__(self, num_records: int, data: bytes) -> None:
        self.num_records = num_records
        self.bytes_ = io.BytesIO(data)


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
        self._open: list[bytes] = []
        """Encoded records of the open block taken as bodies (pass-through), in chunks, not yet written:
        fastavro's own open block cannot take bytes, so the pass-through keeps its own."""
        self._open_count = 0
        self._open_size = 0
        self._first: Record | None = None
        """The file's first record when the pass-through fixed the schema (for the sync marker)."""
        self.passed_through = 0
        """Records written as they came (pass-through), for tests and diagnostics."""
        self._init_arrow()

    def prefetch(self, batch: Batch) -> bool:
        """On the helper thread, while the consumer fetches the next messages: parse a schemaless
        batch's JSON lines (column-wise path; Arrow parses without the GIL).

        A Confluent Avro batch's bodies are not checked ahead. With numpy, the check held the GIL
        for most of its time, so on the helper thread it ran no faster, and the hand-off cost more
        than the check. The C walk needs no GIL, but checking ahead with it made no measurable
        difference either (docs/benchmarks.md, "Where AVRO→PARQUET's time goes"): the helper
        thread has no idle core to use."""
        lines = self._lines
        if lines is None and not self._count and not self._own_schema_tried:
            lines = first_record_parser(self._settings, batch, "AVRO")  # an empty file
        if lines is not None:
            lines.prefetch(batch)
            return True
        return False

    def append(self, batch: Batch) -> int:
        if self._rows.envelope is None and not self._pending:
            bodies = batch.avro_bodies()
            if bodies is not None:
                first = None if self._writer is not None else batch.records()[0]  # for the sync marker
                taken = self._append_bodies(*bodies, first)
                if taken is not None:
                    return taken
        taken = self._append_arrow(batch)
        if taken is not None:
            return taken
        return self._write_records(batch.records())

    # -- pass-through ----------------------------------------------------------------------------

    def _append_bodies(self, values: Sequence[bytes], schema: Any, first: Record | None = None) -> int | None:
        """Append Confluent Avro ``values`` of writer schema ``schema`` as they are; how many
        were taken (``0``: they start a new file), or ``None`` when they must be decoded (the
        file's schema differs and could take them only projected)."""
        taken = self._rows.take_given(schema, len(values))
        if not taken:
            return taken
        if self._writer is None:
            self._first = first  # nothing is held: the writer starts with the schema just taken
            self._fix()
        writer = self._writer
        if writer.block_count:
            # rows fastavro holds in its open block come first: move them into ours
            self._open.append(writer.io.getvalue())
            self._open_count += writer.block_count
            self._open_size = writer.io.tell()
            writer.io.clear()
            writer.block_count = 0
            self._block.clear()
        count = len(values)
        # fastavro writes a block out after the record that takes it to sync_interval bytes
        cuts, left = block_cuts(values, self._open_size, _SYNC_INTERVAL)
        start = 0
        for cut in cuts:
            self._open.append(bodies_of(values, start, cut))
            self._open_count += cut - start
            self._dump_open()
            start = cut
        if start < count:
            self._open.append(bodies_of(values, start, count))
            self._open_count += count - start
        self._open_size = left
        self._count += taken
        self.passed_through += taken
        return taken

    def _rows_from_open(self) -> None:
        """Hand the pass-through's open block to fastavro as rows (decoded, at most one block's
        worth), so rows after bodies continue the same block as on the decoding path and the
        file's blocks do not depend on which path wrote which records."""
        writer = self._writer
        data = io.BytesIO(b"".join(self._open))
        count, self._open, self._open_count, self._open_size = self._open_count, [], 0, 0
        for _ in range(count):
            try:
                row = fastavro.schemaless_reader(data, writer.schema, None)
            except Exception as exc:  # a body that does not match its schema id's schema
                raise FormatError(
                    f"an Avro body written through does not decode with its schema: {exc}; "
                    "the file is incomplete and must be discarded"
                ) from exc
            writer.write(row)
            if writer.block_count == 0:
                self._block.clear()
            else:
                self._block.append(row)

    def _dump_open(self) -> None:
        """Write the pass-through's open block (see :meth:`_block_out`)."""
        if self._open_count:
            self._block_out(self._open, self._open_count)
        self._open, self._open_count, self._open_size = [], 0, 0

    def _block_out(self, pieces: list[bytes], count: int) -> None:
        """Write a block of ``count`` encoded rows, uncompressed ``pieces`` one after the other.

        Without a codec the block is its count, its size, the pieces and the file's sync marker:
        written here in one call (:meth:`formats._file.CountingFile.write_pieces`), where
        fastavro's ``write_block`` needs the pieces joined and writes those four parts with a
        call each. With a codec fastavro compresses the joined pieces as always."""
        writer = self._writer
        if self._codec != "null":
            writer.write_block(_RawBlock(count, b"".join(pieces)))
            return
        size = sum(map(len, pieces))
        self._file.write_pieces([_avro_long(count) + _avro_long(size), *pieces, writer.sync_marker])

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
        first = self._pending_records[0] if self._pending_records else self._first
        self._writer = Writer(
            self._file,  # type: ignore[arg-type]  # a binary file-like object, all fastavro needs
            parsed,
            codec=self._codec,
            sync_interval=_SYNC_INTERVAL,
            compression_level=self._level,
            sync_marker=_sync_marker(first, self._codec, schema),
        )
        self._fix_arrow(schema)
        pending, records = self._take_held()
        self._encode(pending, records, earlier=self._call_start)

    def _encode(self, rows: list[Any], records: Sequence[Record], earlier: int = 0) -> None:
        """Encode ``rows``; the first ``earlier`` of them came from earlier calls (see
        :meth:`formats.parquet_format.ParquetWriter._convert` for why that matters)."""
        self._flush_datums()  # rows appended column-wise come first
        if self._open_count:
            self._rows_from_open()  # bodies taken before these rows: they share the open block
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
            now = self._file.count + self._writer.io.tell() + self._datum_bytes + self._open_size
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
            self._write_datums()  # the last block, as fastavro's flush writes its open one
            self._dump_open()
            self._writer.flush()

    # --- schemaless JSON lines, column-wise (see formats.json_lines_arrow, formats.avro_encode) --

    def _init_arrow(self) -> None:
        self._lines: LineParser | None = None
        """Set once the schema is fixed, flat, inferred and needs no renaming: a batch's JSON
        lines parse into Arrow in one call and encode column by column."""
        self._flat: tuple[FlatField, ...] = ()
        self._datums: list[bytes] = []
        """The open block while rows are appended column-wise (fastavro's own is empty then)."""
        self._datum_rows: list[list[Any] | pa.RecordBatch] = []
        """The rows of ``_datums``, to hand them back to fastavro's open block (:meth:`_flush_datums`)."""
        self._datum_count = 0
        self._datum_bytes = 0

    def _fix_arrow(self, schema: Any) -> None:
        """Set up the column-wise path if the fixed ``schema`` allows it (see :meth:`_append_arrow`)."""
        if self._rows.envelope is not None or self._rows.value.mode != "inferred" or self._rename:
            return
        options = line_parse_options(schema)
        fields = flat_fields(schema)
        if options is None or fields is None:
            return
        self._lines = LineParser(options, avro_to_arrow(schema))
        self._flat = fields

    def _append_arrow(self, batch: Batch) -> int | None:
        """Append ``batch`` with as much of it column-wise as the file allows; None: not tried.

        Until the schema is fixed, records go one by one and only as many as fixing it needs
        (as :meth:`formats.parquet_format.ParquetWriter.append` does, which keeps where the
        schema freezes independent of batching), so the rest of that batch can go column-wise;
        usually that is the first record alone (:meth:`_fixed_from_own_rows`).
        """
        if self._rows.envelope is not None:
            return None
        done, total = 0, len(batch)
        while done < total and not self._fixed():
            part = batch.slice(done) if done else batch
            own = self._held_rows_parser(len(part))
            if own is not None and self._fixed_from_own_rows(part, *own):
                break
            want = max(1, self._freeze_at() - len(self._pending)) if self._pending else 1
            chunk = part.slice(0, want) if want < len(part) else part
            try:
                taken = self._write_records(chunk.records())
            except RecordError as exc:
                exc.index += done
                raise
            done += taken
            if taken < len(chunk):
                return done  # the next record starts a new file
        if done == total:
            return done
        rest = batch.slice(done) if done else batch
        if self._append_lines(rest):
            return total
        try:
            return done + self._write_records(rest.records())
        except RecordError as exc:
            exc.index += done
            raise

    def _fixed_from_own_rows(self, part: Batch, schema: Any, parser: LineParser) -> bool:
        """Fix ``schema``, the one the rows held so far infer
        (:meth:`~formats._rows.RowFileWriter._held_rows_parser`), now, when ``part`` parses into
        it column-wise; whether it was fixed. Only schemas the column-wise path takes (flat, no
        renamed field); the parse is memoised by schema, so appending ``part`` reuses it."""
        if avro_names(schema)[1] or flat_fields(schema) is None or parser.rows(part) is None:
            return False
        self._fix()
        return self._fixed()

    def _append_lines(self, batch: Batch) -> bool:
        """Append all of ``batch`` column-wise, or nothing (False).

        Only schemaless JSON values whose file schema is frozen, flat, and written without
        renamed fields: the batch's joined JSON lines are parsed by Arrow into the file's schema
        (None whenever the per-record path might store a row differently or refuse it, see
        :class:`~formats.json_lines_arrow.LineParser`) and encoded by
        :func:`~formats.avro_encode.encode_rows` into exactly the bytes fastavro writes for
        those rows. Blocks end where fastavro would end them (after the row that brings the open
        block to ``sync_interval`` bytes), so the file is the per-record path's, byte for byte
        but for the random sync marker. Anything else goes through the per-record path.
        """
        lines = self._lines
        if lines is None:
            return False
        table = lines.rows(batch)
        if table is None:
            return False
        encoded = []
        for part in table.to_batches():
            rows = encode_rows(part, self._flat)
            if rows is None:
                return False
            encoded.append((part, *rows))
        writer = self._writer
        if writer.block_count:  # rows written one by one are in fastavro's open block: continue it
            self._datums.append(writer.io.getvalue())
            self._datum_rows.append(list(self._block))
            self._datum_count += writer.block_count
            self._datum_bytes += writer.io.tell()
            writer.io.clear()
            writer.block_count = 0
            self._block.clear()
        for part, data, ends in encoded:
            self._add_datums(part, data, ends)
        self._count += table.num_rows
        return True

    def _add_datums(self, part: pa.RecordBatch, data: bytes, ends: np.ndarray) -> None:
        """Add encoded rows to the open block, writing out every block fastavro would have."""
        first = 0
        while first < len(ends):
            base = int(ends[first - 1]) if first else 0
            # the first row from which the open block holds sync_interval bytes
            need = self._writer.sync_interval - self._datum_bytes + base
            last = int(np.searchsorted(ends, need, side="left", sorter=None))
            if last < first:
                last = first
            if last >= len(ends):
                last = len(ends) - 1
                full = False
            else:
                full = True
            stop = int(ends[last])
            self._datums.append(data[base:stop])
            self._datum_rows.append(part.slice(first, last + 1 - first))
            self._datum_count += last + 1 - first
            self._datum_bytes += stop - base
            if full:
                self._write_datums()
            first = last + 1

    def _flush_datums(self) -> None:
        """Hand the open column-wise block to fastavro before rows are written one by one.

        Its rows go through ``writer.write`` (the same bytes: :func:`encode_rows` is fastavro's
        encoding), so the block grows and ends exactly as on the per-record path.
        """
        if not self._datum_count:
            return
        held = self._datum_rows
        self._datums, self._datum_rows, self._datum_count, self._datum_bytes = [], [], 0, 0
        write, block = self._writer.write, self._block
        for item in held:
            for row in item if isinstance(item, list) else item.to_pylist():
                write(row)
                if self._writer.block_count:
                    block.append(row)
                else:  # pragma: no cover - less than a block is held: fastavro dumps none of it
                    block.clear()

    def _write_datums(self) -> None:
        """Write the open column-wise block out, as fastavro's ``flush`` writes its open block."""
        if self._datum_count:
            self._block_out(self._datums, self._datum_count)
            self._datums, self._datum_rows, self._datum_count, self._datum_bytes = [], [], 0, 0


def _avro_long(n: int) -> bytes:
    """``n`` as Avro encodes a long: zig-zag, then a base-128 varint (low groups first)."""
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while z > 0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def _sync_marker(first: Record | None, codec: str, schema: Any) -> bytes:
    """The file's 16-byte sync marker, derived from what makes the file: its first record's
    topic, partition and offset, its codec and its schema. A file written again from the same
    records (a replay after a crash, a second sink over the same topic) is then the same bytes,
    whichever path wrote which record; two files of one partition never share a first offset.
    (The Avro spec asks for a marker unlikely to occur in the data: a hash is as unlikely as a
    random draw.) Without a first record (an empty file) fastavro draws one."""
    if first is None:
        return b""
    made_of = [first.topic, first.partition, first.offset, codec, schema]
    identity = json.dumps(made_of, sort_keys=True, default=str)
    return hashlib.blake2b(identity.encode(), digest_size=16, person=b"kcql-avro-sync").digest()


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

    def prefetch_first(self, batch: Batch) -> bool:
        """Parse schemaless JSON lines ahead into the schema the first record infers, which a
        new file most likely fixes (see :func:`~formats._rows.first_record_parser`)."""
        parser = first_record_parser(self.settings, batch, "AVRO")
        if parser is None:
            return False
        parser.prefetch(batch)
        return True
