"""STOREAS TEXT: string values, one per line (UTF-8, ``\\n`` line ends).

As in Lenses, only string values can be written ("Text format is only for output of kafka string
values"). A value containing a line break is rejected with :class:`RecordFormatError` rather than
written: it would silently turn one record into several lines, and escaping would change every
value that contains a backslash. Use JSON (which escapes) or BYTES for such values. Tombstones
are rejected for the same reason (an empty line would read back as an empty string). TEXT never
rolls a file on schema changes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from formats._file import StagingWriter
from formats._unicode import surrogate_error, text_surrogate
from formats.base import Batch, FileFormat, FormatWriter, PartSink, Record, RecordFormatError

__all__ = ["TextFormat", "TextWriter"]


class TextWriter(StagingWriter):
    """Writes each string value followed by a newline."""

    def append(self, batch: Batch) -> int:
        return self._write_records(batch.records())

    def _write_records(self, records: Sequence[Record]) -> int:
        lines: list[str] = []
        try:
            for index, record in enumerate(records):
                value = record.value
                if not isinstance(value, str):
                    kind = "a null value (tombstone)" if value is None else f"a {type(value).__name__} value"
                    raise RecordFormatError(
                        f"Text format is only for output of kafka string values, got {kind}", record, index
                    )
                bad = text_surrogate(value)
                if bad is not None:
                    raise surrogate_error(record, index, "value", bad, "TEXT")
                if "\n" in value or "\r" in value:
                    raise RecordFormatError(
                        "the string value contains a line break, which STOREAS TEXT cannot represent "
                        "(one value per line); use STOREAS JSON or BYTES",
                        record,
                        index,
                    )
                lines.append(value)
        finally:
            if lines:
                lines.append("")
                self._file.write("\n".join(lines).encode("utf-8"))
                self._count += len(lines) - 1
        return len(records)


class TextFormat(FileFormat):
    """Plain text, one string value per line."""

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return TextWriter(path, spill)
