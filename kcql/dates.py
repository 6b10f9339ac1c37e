"""``_date.<pattern>`` patterns: which Java ``DateTimeFormatter`` letters the language accepts.

The compiler rejects any pattern outside this set when a statement is compiled, and
``partitioners.dates`` formats exactly what :func:`tokenize` returns, so a pattern that compiles can
always be formatted. Living in ``kcql`` keeps the compiler free of imports from ``partitioners``.

Supported (exactly):

* ``u``/``y`` runs: year (``uuuu``/``yyyy`` zero-padded to 4, ``uu``/``yy`` two-digit, ``u``/``y``
  unpadded, other counts zero-padded to the count);
* ``M``/``L`` (month), ``d`` (day), ``H`` (hour 0-23), ``m`` (minute), ``s`` (second): one letter
  unpadded, two letters zero-padded;
* ``S`` runs: fraction of the second truncated to that many digits;
* text in single quotes is literal (``''`` is a quote); the separators ``- _ / . :`` and space.

An unquoted ``/`` separates directories, as it does in Lenses (``uuuu/MM/dd`` gives three
directories); :func:`split_directories` cuts a pattern there.

Lenses formats ``_date`` in the JVM default time zone; kcql-sink formats in UTC (see
``partitioners.dates``).
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = [
    "DATE_LETTERS",
    "DATE_SEPARATORS",
    "DateField",
    "DatePatternError",
    "DateToken",
    "split_directories",
    "tokenize",
    "validate_date_pattern",
]

DATE_SEPARATORS = frozenset("-_/.: ")
"""Characters written as they are, without quotes."""
DATE_LETTERS = frozenset("uyMLdHmsS")
"""Pattern letters the sink can format."""
_MAX_RUN = {"M": 2, "L": 2, "d": 2, "H": 2, "m": 2, "s": 2, "S": 9, "u": 9, "y": 9}


class DatePatternError(ValueError):
    """An unsupported ``_date`` pattern; the message says which character and where."""


class DateField(NamedTuple):
    """A run of one pattern letter (``uuuu`` is ``DateField("u", 4)``)."""

    letter: str
    """One of :data:`DATE_LETTERS`."""
    length: int
    """How many times the letter repeats (1 or more, at most the letter's maximum)."""


DateToken = DateField | str
"""A pattern element: a letter run, or literal text (a separator or quoted text, quotes removed)."""


def tokenize(pattern: str) -> list[DateToken]:
    """Split ``pattern`` into letter runs and literal text.

    Raises:
        DatePatternError: the pattern is empty, has an unterminated quote, a letter outside
            :data:`DATE_LETTERS`, or too long a run of one letter.
    """
    if not pattern:
        raise DatePatternError("empty _date pattern")
    tokens: list[DateToken] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "'":
            end = i + 1
            text = []
            while True:
                if end >= n:
                    raise DatePatternError(
                        f"unterminated quote at position {i + 1} in _date pattern {pattern!r}"
                    )
                if pattern[end] == "'":
                    if end + 1 < n and pattern[end + 1] == "'":
                        text.append("'")
                        end += 2
                        continue
                    break
                text.append(pattern[end])
                end += 1
            tokens.append("".join(text) if end > i + 1 else "'")
            i = end + 1
            continue
        if ch in DATE_SEPARATORS:
            tokens.append(ch)
            i += 1
            continue
        if ch not in DATE_LETTERS:
            raise DatePatternError(
                f"unsupported character {ch!r} at position {i + 1} in _date pattern {pattern!r}; "
                "supported: u y M L d H m s S, quoted 'text' and - _ / . : space"
            )
        run = i
        while run < n and pattern[run] == ch:
            run += 1
        count = run - i
        if count > _MAX_RUN[ch]:
            raise DatePatternError(
                f"too many {ch!r} ({count}) at position {i + 1} in _date pattern {pattern!r}"
            )
        tokens.append(DateField(ch, count))
        i = run
    return tokens


def split_directories(pattern: str) -> list[str]:
    """Split ``pattern`` at unquoted ``/`` (a ``/`` inside quotes is literal text of one piece)."""
    pieces: list[str] = []
    current: list[str] = []
    quoted = False
    for ch in pattern:
        if ch == "'":
            quoted = not quoted
        if ch == "/" and not quoted:
            pieces.append("".join(current))
            current = []
        else:
            current.append(ch)
    pieces.append("".join(current))
    return pieces


def validate_date_pattern(pattern: str) -> None:
    """Raise :class:`DatePatternError` when ``pattern`` uses anything outside the supported set."""
    tokenize(pattern)
    for piece in split_directories(pattern):
        if not piece:
            raise DatePatternError(f"empty directory between '/' in _date pattern {pattern!r}")
