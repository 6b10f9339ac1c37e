"""The one small interface every STOREAS format implements, and what it reads of the records.

The sink core owns files and their life cycle (staging path, flush policy, commit); a format
only knows how to turn records into bytes of one file. A writer takes a :class:`Batch` (records
of one topic partition, in offset order) through its one method, :meth:`FormatWriter.append`,
and picks the cheapest form of the batch it can use: the joined one-line JSON text, the Arrow
columns of decoded Avro values, the Avro bodies as they came, or, always available, the records
one by one. Whichever form it uses, the file holds the same bytes; nothing is refused back to
the caller to be tried again.

This package imports nothing from ``sink``: :class:`Record` and :class:`Batch` below are the
small protocols it reads, which the sink's own types (``sink.records``) satisfy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, Self, TypeVar

from kcql.errors import RecordError, SinkError
from kcql.model import EnvelopeFields, StoreFormat

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "Batch", "FileFormat", "FormatError", "FormatSettings", "FormatWriter", "PartSink", "Record",
    "RecordFormatError",
]

T = TypeVar("T")


class Record(Protocol):
    """One converted Kafka record, as a format reads it."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def timestamp(self) -> int | None:
        """Epoch milliseconds, ``None`` when the record has none."""
    @property
    def key(self) -> Any: ...
    @property
    def value(self) -> Any:
        """``None`` is a tombstone."""
    @property
    def headers(self) -> tuple[tuple[str, Any], ...]: ...
    @property
    def key_schema(self) -> Any:
        """The key's Avro schema when the converter knows one."""
    @property
    def value_schema(self) -> Any:
        """The value's Avro schema when the converter knows one."""
    @property
    def raw_value(self) -> bytes | None:
        """The value's JSON text as it arrived (schemaless JSON), so it can be written through."""
    @property
    def where(self) -> str:
        """``topic/partition/offset`` words for error messages."""


class Batch(Protocol):
    """Consecutive records of one topic partition, in offset order, as a format reads them.

    Only :meth:`records` always works; the cheap forms return ``None`` when this batch does not
    have them. A cheap form, when present, holds exactly the records :meth:`records` would give.
    """

    def __len__(self) -> int: ...

    def records(self) -> Sequence[Record]:
        """The records, converted when first read; reading a record that cannot be converted
        raises its :class:`~kcql.errors.RecordError` (``index`` = its position in this sequence)."""

    def slice(self, start: int, stop: int | None = None) -> Self:
        """Records ``start`` to ``stop`` as a batch of their own (cheap forms included)."""

    def json_lines(self, *, checked: bool = True) -> bytes | None:
        """Every value as one-line JSON object text, joined by ``\\n`` (no trailing newline).

        ``checked``: every line is valid JSON (what the JSON converter would accept); without it,
        only the framing is guaranteed (``{`` ... ``}``, no line break), for a caller whose own
        parser rejects what is not valid.
        """

    def avro_columns(self) -> tuple[pa.RecordBatch, Any] | None:
        """The values decoded column by column into Arrow, and the Avro schema they were written
        with (values of one flat record schema only)."""

    def avro_schema(self) -> tuple[Any, pa.Schema] | None:
        """The Avro schema :meth:`avro_columns` would give and its Arrow schema, without decoding
        anything: whether the columns would fit is known before they are paid for."""

    def avro_bodies(self) -> tuple[Sequence[bytes], Any] | None:
        """The values as consumed, each a 5-byte Confluent wire header (magic byte 0 and one
        schema id, the same for all) then its Avro binary body, and that id's writer schema, so
        an Avro file of exactly that schema can take the bodies as they are. Present only when
        every body would decode cleanly, to the values :meth:`records` gives (checked; the flat
        record schemas of :meth:`avro_columns`); ``None`` otherwise, and for mixed ids, tombstones, other
        converters, transformed or projected records."""

    def whole(self) -> tuple[Self, int]:
        """The batch this one was sliced from (itself when not sliced) and where it starts in it,
        so work done once on the whole batch (see :meth:`memo`) serves every slice of it."""

    def memo(self, key: Hashable, compute: Callable[[Batch], T]) -> T:
        """``compute(self)``, computed once per batch and key (and waited for when :meth:`ahead`
        started it)."""

    def ahead(self, key: Hashable, compute: Callable[[Batch], Any]) -> None:
        """Start ``compute(self)`` on a helper thread, for a later :meth:`memo` with the same key
        (nothing happens when the batch has no helper thread). ``compute`` must be thread-safe."""


class PartSink(Protocol):
    """Where a staging file's bytes go while it is written, so local staging stays bounded.

    Once the local file holds at least :attr:`part_size` bytes, at the end of a write, the
    writer hands them over (:meth:`upload_part`) and empties the local file; the format keeps
    counting the whole file. Concatenated in order, the parts and what is left locally at close
    are exactly the file an unspilled writer would have produced (the encoders never seek or read
    back). The sink implements it with an S3 multipart upload; formats know nothing about that.
    """

    @property
    def part_size(self) -> int:
        """Local bytes that trigger a hand-over (every part but the last is at least this big)."""

    def upload_part(self, data: BinaryIO, size: int) -> None:
        """Take the next ``size`` bytes of the file from ``data`` (a readable file at the part's
        start). Raising leaves the bytes in the local file; the file must then be discarded."""


class FormatError(SinkError):
    """A format cannot be set up as configured (unknown codec, bad level, ...), or a file failed."""


class RecordFormatError(RecordError, FormatError):
    """One record cannot be written in this format (a dict for TEXT, no schema for AVRO, ...).

    Records before ``index`` in the batch given to :meth:`FormatWriter.append` were written;
    the record at ``index`` and after were not. The message names the record's topic,
    partition and offset so the task's error policy can report it.
    """

    def __init__(self, message: str, record: Record, index: int) -> None:
        self.record = record
        super().__init__(f"{message} ({record.where})", offset=record.offset, index=index, stage="TASK_PUT")


@dataclass(frozen=True, slots=True)
class FormatSettings:
    """What a format needs beyond the records: codec and envelope, resolved from plan + connector."""

    format: StoreFormat
    codec: str = "UNCOMPRESSED"
    """Upper-case codec name as in ``connect.s3.compression.codec`` (UNCOMPRESSED, GZIP, SNAPPY, ...)."""
    level: int | None = None
    envelope: EnvelopeFields | None = None
    schema_compatibility: str = "NONE"


class FormatWriter(ABC):
    """Streams records into one staging file. Created by :meth:`FileFormat.open`."""

    @abstractmethod
    def append(self, batch: Batch) -> int:
        """Append a prefix of ``batch`` and return how many records it holds.

        Stops early (returning fewer than ``len(batch)``) only before a record that must start a
        new file: a schema change under ``schema.compatibility=NONE``, the second record of a
        BYTES file. A writer with no records yet accepts any first record. A record that cannot
        be written raises :class:`RecordFormatError` (or the record's own
        :class:`~kcql.errors.RecordError` from :meth:`Batch.records`) with its index, after the
        records before it were appended.
        """

    def prefetch(self, batch: Batch) -> bool:
        """Start, on the batch's helper thread, what :meth:`append` of ``batch`` can compute
        ahead (PARQUET: parsing JSON lines into this file's schema); whether anything was. A hint;
        the default: nothing. Results are memoised on the batch by what they depend on (PARQUET:
        the schema), so another file of the same schema may take them."""
        return False

    def successor_hint(self) -> Any:
        """What this file can tell the partition's next file about its shape (see
        :meth:`start_from`), or None (the default). Opaque to the caller: only the format reads it."""
        return None

    def start_from(self, hint: Any) -> None:
        """Take the partition's previous file's :meth:`successor_hint`, before the first append.
        A format may use it to fix its schema sooner when that provably gives the very same file
        (PARQUET: schemaless JSON of the previous file's shape); the default ignores it."""
        del hint

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

    def prefetch_first(self, batch: Batch) -> bool:
        """:meth:`FormatWriter.prefetch` for a batch whose file is not open yet (a partition's
        first file, or the next one after a commit): start on the batch's helper thread what
        that file's first append will most likely compute; whether anything was. A hint; the
        default: nothing."""
        del batch
        return False

    @abstractmethod
    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        """Create ``path`` and return a writer streaming into it (handing full parts of it to
        ``spill`` as it grows, when given: see :class:`PartSink`)."""
