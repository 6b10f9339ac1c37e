"""Which compression codecs each STOREAS format accepts, and the file extension that results.

Codec names are the upper-case ``connect.s3.compression.codec`` values Lenses uses. The table is
the single source of truth for config validation (:func:`supported_codecs`, :func:`check_codec`)
and for naming (:func:`extension_for`), so the two can never disagree.
"""

from __future__ import annotations

from formats.base import FormatError
from kcql.model import StoreFormat

__all__ = [
    "AVRO_CODECS",
    "DEFAULT_LEVELS",
    "check_codec",
    "extension_for",
    "normalize_codec",
    "supported_codecs",
]

AVRO_CODECS: dict[str, str] = {
    "UNCOMPRESSED": "null",
    "DEFLATE": "deflate",
    "SNAPPY": "snappy",
    "ZSTD": "zstandard",
    "BZIP2": "bzip2",
    "XZ": "xz",
}
"""Lenses codec name -> fastavro codec name (the Avro container ``avro.codec`` header value)."""

PARQUET_CODECS: dict[str, str] = {
    "UNCOMPRESSED": "none",
    "SNAPPY": "snappy",
    "GZIP": "gzip",
    "ZSTD": "zstd",
    "LZ4": "lz4",
    "BROTLI": "brotli",
}
"""Lenses codec name -> pyarrow codec name. LZO is not offered: Arrow cannot write it."""

_CODECS: dict[StoreFormat, tuple[str, ...]] = {
    StoreFormat.JSON: ("UNCOMPRESSED", "GZIP"),
    StoreFormat.AVRO: tuple(AVRO_CODECS),
    StoreFormat.PARQUET: tuple(PARQUET_CODECS),
    StoreFormat.CSV: ("UNCOMPRESSED",),
    StoreFormat.CSV_WITHHEADERS: ("UNCOMPRESSED",),
    StoreFormat.TEXT: ("UNCOMPRESSED",),
    StoreFormat.BYTES: ("UNCOMPRESSED",),
}

_ALIASES = {"NONE": "UNCOMPRESSED", "NULL": "UNCOMPRESSED", "ZSTANDARD": "ZSTD", "GZ": "GZIP"}

DEFAULT_LEVELS: dict[str, int] = {"GZIP": 6, "DEFLATE": 6, "ZSTD": 3, "XZ": 6, "BROTLI": 4}
"""Compression level used when none is configured (gzip/deflate 6 as zlib, zstd 3 as libzstd)."""

_LEVEL_RANGES: dict[str, tuple[int, int]] = {
    "GZIP": (0, 9),
    "DEFLATE": (0, 9),
    "XZ": (0, 9),
    "ZSTD": (1, 22),
    "BROTLI": (0, 11),
}

_EXTENSIONS: dict[StoreFormat, str] = {
    StoreFormat.JSON: "json",
    StoreFormat.AVRO: "avro",
    StoreFormat.PARQUET: "parquet",
    StoreFormat.CSV: "csv",
    StoreFormat.CSV_WITHHEADERS: "csv",
    StoreFormat.TEXT: "text",
    StoreFormat.BYTES: "bytes",
}


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
        FormatError: naming the format, the codec and what would have been accepted.
    """
    name = normalize_codec(codec)
    allowed = supported_codecs(fmt)
    if name not in allowed:
        raise FormatError(
            f"compression codec {codec!r} is not supported for STOREAS {StoreFormat(fmt).value}; "
            f"supported: {', '.join(allowed)}"
        )
    if level is not None:
        bounds = _LEVEL_RANGES.get(name)
        # a level for a codec without levels (SNAPPY, LZ4, BZIP2) is ignored, as in Lenses, so one
        # connector-wide connect.s3.compression.level can serve statements with different codecs
        if bounds is not None and not bounds[0] <= level <= bounds[1]:
            raise FormatError(
                f"compression level {level} is out of range for {name}; expected {bounds[0]}..{bounds[1]}"
            )
    return name


def extension_for(fmt: StoreFormat, codec: str = "UNCOMPRESSED") -> str:
    """File extension (no dot) as Lenses names it: gzipped JSON is ``gz``, not ``json.gz``."""
    fmt = StoreFormat(fmt)
    if fmt is StoreFormat.JSON and normalize_codec(codec) == "GZIP":
        return "gz"
    return _EXTENSIONS[fmt]
