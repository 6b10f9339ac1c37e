"""Which compression codecs (and levels) each STOREAS format accepts: part of the language.

``PROPERTIES('compression.codec'=..., 'compression.level'=...)`` is checked when a statement is
compiled, so ``kcql-sink kcql check`` catches SNAPPY on CSV before a worker starts. The tables live
here, in the package every other one depends on, so that the compiler imports nothing from
``formats`` (which loads pyarrow and fastavro) and ``formats`` reads the same tables: the two can
never disagree.

Codec names are the upper-case ``connect.s3.compression.codec`` values Lenses uses.
"""

from __future__ import annotations

from kcql.errors import SinkError
from kcql.model import StoreFormat

__all__ = [
    "CODEC_NAMES",
    "LEVEL_RANGES",
    "CodecError",
    "check_codec",
    "normalize_codec",
    "supported_codecs",
]

CODEC_NAMES = (
    "UNCOMPRESSED",
    "GZIP",
    "SNAPPY",
    "ZSTD",
    "LZ4",
    "BROTLI",
    "BZIP2",
    "XZ",
    "DEFLATE",
    "LZO",
)
"""Every codec name ``compression.codec`` may hold (Lenses' list), in the order shown to users."""

_CODECS: dict[StoreFormat, tuple[str, ...]] = {
    StoreFormat.JSON: ("UNCOMPRESSED", "GZIP"),
    StoreFormat.AVRO: ("UNCOMPRESSED", "DEFLATE", "SNAPPY", "ZSTD", "BZIP2", "XZ"),
    # no LZO for PARQUET: Arrow cannot write it
    StoreFormat.PARQUET: ("UNCOMPRESSED", "SNAPPY", "GZIP", "ZSTD", "LZ4", "BROTLI"),
    StoreFormat.CSV: ("UNCOMPRESSED",),
    StoreFormat.CSV_WITHHEADERS: ("UNCOMPRESSED",),
    StoreFormat.TEXT: ("UNCOMPRESSED",),
    StoreFormat.BYTES: ("UNCOMPRESSED",),
}
"""The codecs each format can write (how each is written is ``formats.codecs``' business)."""

_ALIASES = {"NONE": "UNCOMPRESSED", "NULL": "UNCOMPRESSED", "ZSTANDARD": "ZSTD", "GZ": "GZIP"}

LEVEL_RANGES: dict[str, tuple[int, int]] = {
    "GZIP": (0, 9),
    "DEFLATE": (0, 9),
    "XZ": (0, 9),
    "ZSTD": (1, 22),
    "BROTLI": (0, 11),
}
"""Inclusive level bounds of the codecs that have levels; a level for any other codec is ignored."""


class CodecError(SinkError, ValueError):
    """A codec or level the format cannot write; the message lists what would be accepted.

    ``formats`` maps it to its ``FormatError``; the KCQL compiler to a positioned KCQL error.
    """


def normalize_codec(codec: str | None) -> str:
    """Upper-case a codec name and map common spellings (``none``, ``zstandard``) to the Lenses name."""
    name = (codec or "UNCOMPRESSED").strip().upper()
    return _ALIASES.get(name, name)


def supported_codecs(fmt: StoreFormat) -> tuple[str, ...]:
    """The codecs ``fmt`` can write, in the order shown to users."""
    return _CODECS[StoreFormat(fmt)]


def check_codec(fmt: StoreFormat, codec: str | None, level: int | None = None) -> str:
    """Validate ``codec`` (and ``level``) for ``fmt`` and return the normalized codec name.

    Raises:
        CodecError: naming the format, the codec and what would have been accepted.
    """
    name = normalize_codec(codec)
    allowed = supported_codecs(fmt)
    if name not in allowed:
        raise CodecError(
            f"compression codec {codec!r} is not supported for STOREAS {StoreFormat(fmt).value}; "
            f"supported: {', '.join(allowed)}"
        )
    if level is not None:
        bounds = LEVEL_RANGES.get(name)
        # a level for a codec without levels (SNAPPY, LZ4, BZIP2) is ignored, as in Lenses, so one
        # connector-wide connect.s3.compression.level can serve statements with different codecs
        if bounds is not None and not bounds[0] <= level <= bounds[1]:
            raise CodecError(
                f"compression level {level} is out of range for {name}; expected {bounds[0]}..{bounds[1]}"
            )
    return name
