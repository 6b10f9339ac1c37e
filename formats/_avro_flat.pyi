"""Types of the C module ``formats/_avro_flat.c`` (see :mod:`formats.avro_columns`)."""

from typing_extensions import Buffer

def check(data: Buffer, starts: Buffer, ends: Buffer, header: int, kinds: bytes, nulls: bytes, /) -> bool: ...
def decode(
    data: Buffer, starts: Buffer, ends: Buffer, header: int, kinds: bytes, nulls: bytes, /
) -> list[tuple[bytes, bytes | None, bytes | None]] | None: ...
