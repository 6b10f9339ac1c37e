"""STOREAS formats: one writer per format behind the small interface in :mod:`formats.base`.

The sink core asks :func:`get_format` for a :class:`FileFormat` per plan and opens one
:class:`FormatWriter` per staging file. :func:`supported_codecs` and :func:`extension_for` serve
config validation and object naming.
"""

from __future__ import annotations

from collections.abc import Callable

from formats.avro_format import AvroFormat
from formats.base import FileFormat, FormatError, FormatSettings, FormatWriter, RecordFormatError
from formats.codecs import check_codec, extension_for, supported_codecs
from formats.json_format import JsonFormat
from formats.parquet_format import ParquetFormat
from kcql.model import StoreFormat

__all__ = [
    "FileFormat",
    "FormatError",
    "FormatSettings",
    "FormatWriter",
    "RecordFormatError",
    "check_codec",
    "extension_for",
    "get_format",
    "supported_codecs",
]

_REGISTRY: dict[StoreFormat, Callable[[FormatSettings], FileFormat]] = {
    StoreFormat.JSON: JsonFormat,
    StoreFormat.AVRO: AvroFormat,
    StoreFormat.PARQUET: ParquetFormat,
}


def get_format(settings: FormatSettings) -> FileFormat:
    """The :class:`FileFormat` for ``settings.format``, with codec and level validated.

    Raises:
        FormatError: the codec or level is not valid for the format (the message lists the valid ones).
    """
    fmt = StoreFormat(settings.format)
    factory = _REGISTRY.get(fmt)
    if factory is None:
        raise FormatError(f"STOREAS {fmt.value} is not implemented yet")
    return factory(settings)
