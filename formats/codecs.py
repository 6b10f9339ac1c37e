"""How each compression codec is written, and the file extension that results.

Which codecs each STOREAS format accepts is part of the language (:mod:`kcql.codecs`, checked
when a statement compiles); this module maps those names to the encoders' own (fastavro,
pyarrow), gives the default levels, and names files (:func:`extension_for`).
"""

from __future__ import annotations

from formats.base import FormatError
from kcql import codecs as kcql_codecs
from kcql.codecs import normalize_codec, supported_codecs
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

DEFAULT_LEVELS: dict[str, int] = {"GZIP": 6, "DEFLATE": 6, "ZSTD": 3, "XZ": 6, "BROTLI": 4}
"""Compression level used when none is configured (gzip/deflate 6 as zlib, zstd 3 as libzstd)."""

_EXTENSIONS: dict[StoreFormat, str] = {
    StoreFormat.JSON: "json",
    StoreFormat.AVRO: "avro",
    StoreFormat.PARQUET: "parquet",
    StoreFormat.CSV: "csv",
    StoreFormat.CSV_WITHHEADERS: "csv",
    StoreFormat.TEXT: "text",
    StoreFormat.BYTES: "bytes",
}


def check_codec(fmt: StoreFormat, codec: str | None, level: int | None = None) -> str:
    """Validate ``codec`` (and ``level``) for ``fmt`` (the language's rule, :mod:`kcql.codecs`) and
    return the normalized codec name.

    Raises:
        FormatError: naming the format, the codec and what would have been accepted.
    """
    try:
        return kcql_codecs.check_codec(fmt, codec, level)
    except kcql_codecs.CodecError as exc:
        raise FormatError(str(exc)) from None


def extension_for(fmt: StoreFormat, codec: str = "UNCOMPRESSED") -> str:
    """File extension (no dot) as Lenses names it: gzipped JSON is ``gz``, not ``json.gz``."""
    fmt = StoreFormat(fmt)
    if fmt is StoreFormat.JSON and normalize_codec(codec) == "GZIP":
        return "gz"
    return _EXTENSIONS[fmt]
