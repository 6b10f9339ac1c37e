"""STOREAS formats: one writer per format behind the small interface in :mod:`formats.base`.

The sink core asks :func:`get_format` for a :class:`FileFormat` per plan and opens one
:class:`FormatWriter` per staging file. :func:`supported_codecs` and :func:`extension_for` serve
config validation and object naming.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from formats.avro_format import AvroFormat
from formats.base import FileFormat, FormatError, FormatSettings, FormatWriter, RecordFormatError
from formats.bytes_format import BytesFormat
from formats.codecs import check_codec, extension_for, supported_codecs
from formats.csv_format import CsvFormat
from formats.json_format import JsonFormat
from formats.parquet_format import ParquetFormat
from formats.text_format import TextFormat
from kcql.model import StoreFormat

if TYPE_CHECKING:
    from kcql.model import SinkPlan

__all__ = [
    "FileFormat",
    "FormatError",
    "FormatSettings",
    "FormatWriter",
    "RecordFormatError",
    "check_codec",
    "extension_for",
    "get_format",
    "settings_for_plan",
    "supported_codecs",
]

_REGISTRY: dict[StoreFormat, Callable[[FormatSettings], FileFormat]] = {
    StoreFormat.JSON: JsonFormat,
    StoreFormat.AVRO: AvroFormat,
    StoreFormat.PARQUET: ParquetFormat,
    StoreFormat.CSV: CsvFormat,
    StoreFormat.CSV_WITHHEADERS: CsvFormat,
    StoreFormat.TEXT: TextFormat,
    StoreFormat.BYTES: BytesFormat,
}


def get_format(settings: FormatSettings) -> FileFormat:
    """The :class:`FileFormat` for ``settings.format``, with codec and level validated.

    Raises:
        FormatError: the codec or level is not valid for the format (the message lists the valid
            ones), or the envelope is asked for a format that cannot carry it.
    """
    fmt = StoreFormat(settings.format)
    if settings.envelope is not None and not fmt.supports_envelope:
        raise FormatError(
            f"store.envelope is supported for STOREAS JSON, AVRO and PARQUET only, not {fmt.value}"
        )
    factory = _REGISTRY.get(fmt)
    if factory is None:  # pragma: no cover - every StoreFormat is registered (tested)
        raise FormatError(f"STOREAS {fmt.value} has no writer")
    return factory(settings)


def settings_for_plan(
    plan: SinkPlan, default_codec: str | None = None, default_level: int | None = None
) -> FormatSettings:
    """The :class:`FormatSettings` of one KCQL statement.

    The statement's ``compression.codec``/``compression.level`` properties win over the connector
    defaults (``connect.s3.compression.codec``/``.level``); a codec the format cannot write is
    reported by :func:`get_format`. A connector-wide codec that only some formats support (GZIP
    set for JSON statements) is not forced on formats without codecs (CSV, TEXT, BYTES).
    """
    codec = plan.compression_codec or default_codec or "UNCOMPRESSED"
    level = plan.compression_level if plan.compression_level is not None else default_level
    if plan.compression_codec is None and supported_codecs(plan.format) == ("UNCOMPRESSED",):
        codec, level = "UNCOMPRESSED", None
    return FormatSettings(
        format=plan.format,
        codec=codec,
        level=level,
        envelope=plan.envelope,
        schema_compatibility=plan.schema_compatibility,
    )
