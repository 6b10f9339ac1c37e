"""Reversible escaping of partition values into single, visible path segments.

Since Lenses 7.x partition values are written unsanitized, so a value containing ``/`` creates
extra directories and ``..`` can climb out of the prefix. We escape instead, with the scheme Hive
and Spark use for partition directories (``ExternalCatalogUtils.escapePathName``): every character
of Spark's escape set becomes ``%XX`` (upper-case hex). Spark's partition discovery decodes
``name=value`` (KeysAndValues) directories with exactly that rule, so Spark reads our layout
natively, and common values (letters, digits, space, ``+``, ``-``, ``.`` inside a value, non-ASCII
text) stay byte-identical to what Lenses writes.

On top of Spark's set we escape:

* a leading ``.`` or ``_`` (``%2E``/``%5F``): Spark, Hive and Hadoop treat such names as hidden, and
  ``.``/``..`` would be path traversal;
* the C1 control characters U+0080..U+009F (``%XX`` too, which Spark decodes);
* lone surrogates (``%uXXXX``; they cannot be encoded in UTF-8, hence not in an object key);
* the empty string, written as the token :data:`EMPTY` (``""``), because an empty segment would
  collapse two ``/`` and Spark rejects an empty ``name=`` value.

Every ``%`` we emit is followed by two hex digits or ``u`` and four, and ``%`` itself is escaped, so
:func:`unescape` inverts :func:`escape` exactly.
"""

from __future__ import annotations

import re

__all__ = ["EMPTY", "MISSING", "escape", "is_hidden_segment", "unescape"]

EMPTY = '""'
"""Segment written for an empty value. ``"`` is always escaped in values, so no value collides."""

MISSING = "[missing]"
"""Lenses' marker for an absent (or null) field; written literally, never escaped, so layouts
match Lenses byte for byte. A real value ``[missing]`` is escaped to ``%5Bmissing%5D``."""

_SPARK_SET = "\"#%'*/:=?\\\x7f{[]^"
_ESCAPED = re.compile("[\x00-\x1f\x80-\x9f\ud800-\udfff" + re.escape(_SPARK_SET) + "]")
_ESCAPED_KEEP_EQUALS = re.compile(
    "[\x00-\x1f\x80-\x9f\ud800-\udfff" + re.escape(_SPARK_SET.replace("=", "")) + "]"
)
_ENCODED = re.compile(r"%(?:([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4}))")


def _encode_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"%{code:02X}" if code < 0x100 else f"%u{code:04X}"


def escape(value: str, *, keep_equals: bool = False) -> str:
    """Turn one partition value (or name) into a safe, visible path segment.

    The result never contains ``/`` or ``\\``, is never empty, ``.`` or ``..``, and never starts
    with ``.`` or ``_``; ``unescape(escape(v)) == v`` for every string ``v``.

    Args:
        value: the text to escape.
        keep_equals: leave ``=`` as is. Only for ``_date`` pieces, whose text comes from the
            pattern (``'year='uuuu`` → ``year=2010``, a Hive-style directory Spark discovers);
            reversibility is unaffected because ``unescape`` never produces or consumes ``=``.
    """
    if not value:
        return EMPTY
    text = (_ESCAPED_KEEP_EQUALS if keep_equals else _ESCAPED).sub(_encode_char, value)
    first = text[0]
    if first == ".":
        return "%2E" + text[1:]
    if first == "_":
        return "%5F" + text[1:]
    return text


def _decode(match: re.Match[str]) -> str:
    hex_digits = match.group(1) or match.group(2)
    return chr(int(hex_digits, 16))


def unescape(segment: str) -> str:
    """Inverse of :func:`escape`. A ``%`` not followed by a valid code is kept, as Spark does."""
    if segment == EMPTY:
        return ""
    if "%" not in segment:
        return segment
    return _ENCODED.sub(_decode, segment)


def is_hidden_segment(segment: str) -> bool:
    """Whether Spark/Hadoop (and our readers) skip a path segment: it starts with ``.`` or ``_``."""
    return segment.startswith((".", "_"))
