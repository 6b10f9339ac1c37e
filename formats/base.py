"""The one small interface every STOREAS format implements.

The sink core owns files and their life cycle (staging path, flush policy, commit); a format
only knows how to turn records into bytes of one file. Writers take records in batches so
that encoders can work per batch (pyarrow tables, fastavro blocks) instead of per field.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kcql.errors import SinkError
from kcql.model import EnvelopeFields, StoreFormat

if TYPE_CHECKING:
    import pyarrow as pa

    from sink.records.record import SinkRecord

__all__ = [
    "FileFormat", "FormatError", "FormatSettings", "FormatWriter", "PreparedLines", "RecordFormatError",
]


class FormatError(SinkError):
    """A format cannot be set up as configured (unknown codec, bad level, ...)."""


class RecordFormatError(FormatError):
    """One record cannot be written in this format (a dict for TEXT, no schema for AVRO, ...).

    Records before ``index`` in the batch given to :meth:`FormatWriter.write` were written;
    the record at ``index`` and after were not. The message names the record's topic,
    partition and offset so the task's error policy can report it.
    """

    def __init__(self, message: str, record: SinkRecord, index: int) -> None:
        self.record = record
        self.index = index
        super().__init__(f"{message} ({record.where})")


@dataclass(frozen=True, slots=True)
class FormatSettings:
    """What a format needs beyond the records: codec and envelope, resolved from plan + connector."""

    format: StoreFormat
    codec: str = "UNCOMPRESSED"
    """Upper-case codec name as in ``connect.s3.compression.codec`` (UNCOMPRESSED, GZIP, SNAPPY, ...)."""
    level: int | None = None
    envelope: EnvelopeFields | None = None
    schema_compatibility: str = "NONE"


@dataclass(frozen=True, slots=True)
class PreparedLines:
    """A block of JSON lines being parsed ahead: ``parser(data)`` running as ``result``."""

    parser: Callable[[bytes], Any]
    result: Future[Any]


class FormatWriter(ABC):
    """Streams records into one staging file. Created by :meth:`FileFormat.open`."""

    @abstractmethod
    def write(self, records: Sequence[SinkRecord]) -> int:
        """Append a prefix of ``records`` and return how many were written.

        Stops early (returning fewer than ``len(records)``) only before a record that must start
        a new file, e.g. a schema change under ``schema.compatibility=NONE``; a writer with no
        records yet accepts any first record. A record that can never be written in this format
        raises :class:`RecordFormatError` with its index.
        """

    def write_lines(self, data: bytes, count: int, prepared: PreparedLines | None = None) -> bool:
        """Append ``count`` records given as one-line JSON objects joined by ``\\n``, or refuse.

        The batch fast path for schemaless JSON (:mod:`sink.records.json_lines`): a writer that can take
        the block whole, exactly as :meth:`write` would have taken the parsed records, appends it
        and returns True. Otherwise it writes nothing and returns False, and the caller hands the
        same records to :meth:`write` one by one. ``prepared`` is ``data`` already being parsed by
        this writer's :meth:`line_parser` on another thread. The default refuses.
        """
        return False

    def line_parser(self) -> Callable[[bytes], Any] | None:
        """A thread-safe function that parses blocks of lines for this file, or None.

        The caller may run it on ``data`` on another thread before :meth:`write_lines` (while it
        consumes more messages) and hand the result over as :class:`PreparedLines`; the writer
        uses it only if its parser is still that one. The default: no parser.
        """
        return None

    def records_before_blocks(self) -> int:
        """How many of the next records must go through :meth:`write` before a block can be taken.

        A hint for the caller, so that it does not build blocks only to have them refused (a
        Parquet file fixes its schema from its first rows); 0 means "try a block". The default: 0.
        """
        return 0

    def write_batch(self, batch: pa.RecordBatch, schema: Any) -> bool:
        """Append an Arrow batch of records whose values were written with Avro ``schema``, or refuse.

        The batch fast path for Confluent Avro (:mod:`sink.records.avro_block`); same contract as
        :meth:`write_lines`: take it whole exactly as :meth:`write` would have taken the records,
        or write nothing and return False. The default refuses.
        """
        return False

    @property
    @abstractmethod
    def bytes_written(self) -> int:
        """Bytes the file holds so far (approximate for buffered encoders); feeds flush.size."""

    @property
    @abstractmethod
    def record_count(self) -> int:
        """Records written so far."""

    @abstractmethod
    def close(self) -> None:
        """Finish the file (footers, final blocks) and fsync it; the file is then complete."""

    @abstractmethod
    def abort(self) -> None:
        """Release resources without finishing; the caller deletes the file."""


class FileFormat(ABC):
    """A STOREAS format: names its files and opens writers."""

    def __init__(self, settings: FormatSettings) -> None:
        # formats.codecs imports this module, hence the import here (once per format, not per record)
        from formats.codecs import check_codec

        self.settings = settings
        self._codec = check_codec(settings.format, settings.codec, settings.level)
        """The codec's canonical name; a codec the format cannot write is a FormatError here."""

    @property
    def extension(self) -> str:
        """File extension without the dot, as Lenses names it (``json``, ``gz`` for gzipped JSON,
        ``avro``, ``parquet``, ``csv``, ``text``, ``bytes``)."""
        from formats.codecs import extension_for

        return extension_for(self.settings.format, self._codec)

    def records_before_blocks(self) -> int:
        """:meth:`FormatWriter.records_before_blocks` of a file not opened yet. The default: 0."""
        return 0

    @abstractmethod
    def open(self, path: Path) -> FormatWriter:
        """Create ``path`` and return a writer streaming into it."""
