"""Types of the C module ``formats/_json_lines.c`` (see :mod:`formats.json_lines_arrow`)."""

from collections.abc import Sequence

def parse(
    data: bytes, fields: Sequence[tuple[str, str, bool]], /
) -> tuple[int, list[tuple[int, bytes | None, bytes, bytes | None]]] | None: ...
