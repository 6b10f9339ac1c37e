"""What a whole-number config value is, once for every key (``tasks.max``, retries, sizes, ...).

Kafka Connect parses ``INT``/``LONG`` keys with Java's ``parseInt``/``parseLong`` after trimming:
an optional sign and digits, within the Java type's range. Python's ``int()`` is looser (it
accepts ``1_000`` and non-ASCII digits such as ``٣``) and fails on numbers of more than 4,300
digits with an error about the interpreter, not the config, so a value must match the Java form
before it is converted. ASCII digits only: stricter than Java, never looser.
"""

from __future__ import annotations

import re

__all__ = ["JAVA_INT_MAX", "JAVA_LONG_MAX", "JAVA_LONG_MIN", "parse_whole_number"]

JAVA_INT_MAX = 2**31 - 1
"""Largest value of a Connect ``INT`` key (Lenses declares ``connect.s3.max.retries`` and
``connect.s3.retry.interval`` as ``INT``)."""

JAVA_LONG_MAX = 2**63 - 1
"""Largest value of a Connect ``LONG`` key (sizes in bytes)."""

JAVA_LONG_MIN = -(2**63)

_WHOLE = re.compile(r"[+-]?[0-9]+")


def parse_whole_number(text: str, *, minimum: int = JAVA_LONG_MIN, maximum: int = JAVA_LONG_MAX) -> int:
    """``text`` (surrounding whitespace ignored) as an int in ``[minimum, maximum]``.

    Raises:
        ValueError: with the reason as its message, e.g. ``"must be a whole number from 0 to 10"``.
    """
    value = text.strip()
    if minimum == JAVA_LONG_MIN and maximum == JAVA_LONG_MAX:
        reason = "must be a whole number"
    else:
        reason = f"must be a whole number from {minimum} to {maximum}"
    if not _WHOLE.fullmatch(value):
        raise ValueError(reason)
    if len(value.lstrip("+-").lstrip("0")) > 19:  # beyond any Java long: never handed to int()
        raise ValueError(reason)
    number = int(value)
    if not minimum <= number <= maximum:
        raise ValueError(reason)
    return number
