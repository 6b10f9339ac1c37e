"""``CountingFile.write_pieces``: a block's pieces written as one, in order, counted once.

The Avro pass-through writes each block as its header, the bodies of the batches it took and the
sync marker in one ``writev`` (formats/_file.py) instead of joining them and writing four parts,
queued by default to the write-behind thread (formats/_write_behind.py), which writes them at
their offset with ``pwritev``. Pinned here, with and without the thread (``behind``): the bytes
on disk are exactly ``b"".join`` of everything written, whatever mix of ``write`` and
``write_pieces``; the count, the write-out hint and the parts handed to a
:class:`~formats.base.PartSink` see the pieces as one write; in-memory files fall back to a join.
In place, more pieces than one ``writev`` takes are joined and a short ``writev`` is completed.
The thread's own promises are in tests/unit/formats/test_write_behind.py.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import BinaryIO

import pytest

from formats import _file, _write_behind
from formats._file import WRITEBACK_EVERY, CountingFile


@pytest.fixture(params=[True, False], ids=["behind", "in-place"])
def behind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    """Files made in the test queue their writes to the write-behind thread, or write in place."""
    if request.param and not _write_behind.available():
        pytest.skip("formats._write_thread was not built")
    monkeypatch.setattr(_file, "WRITE_BEHIND", request.param)
    return bool(request.param)


@pytest.mark.usefixtures("behind")
def test_pieces_land_in_order_between_buffered_writes(tmp_path: Path) -> None:
    path = tmp_path / "staging.avro"
    counting = CountingFile(path.open("wb"), path)
    counting.write(b"header")  # still in the buffered file when the pieces go: flushed first
    assert counting.write_pieces([b"\x04\x0a", b"body-one", b"", b"body-two", b"S" * 16]) == 34
    counting.write(b"tail")
    assert counting.count == 6 + 34 + 4 == counting.tell()
    counting.fsync_close()
    assert path.read_bytes() == b"header\x04\x0abody-onebody-two" + b"S" * 16 + b"tail"


@pytest.mark.usefixtures("behind")
def test_an_in_memory_file_gets_the_pieces_joined() -> None:
    raw = io.BytesIO()
    counting = CountingFile(raw)
    assert counting.write_pieces([b"a", b"bc", b"def"]) == 6
    assert raw.getvalue() == b"abcdef" and counting.count == 6


def test_more_pieces_than_one_writev_takes_are_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In place (the write-behind thread's own chunking: tests/unit/formats/test_write_behind.py)."""
    monkeypatch.setattr(_file, "WRITE_BEHIND", False)
    calls: list[int] = []
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, bufs: calls.append(len(bufs)) or real(fd, bufs))
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path)
    pieces = [bytes([i % 251]) * 3 for i in range(_file._IOV_MAX + 1)]
    counting.write_pieces(pieces)
    counting.write_pieces(pieces[:3])
    counting.fsync_close()
    assert calls == [3]  # the long list went through one joined write
    assert path.read_bytes() == b"".join(pieces) + b"".join(pieces[:3])


def test_a_short_writev_is_completed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writev may write less than asked (a signal, a disk filling up): the rest still goes, in order."""
    monkeypatch.setattr(_file, "WRITE_BEHIND", False)
    real = os.writev
    monkeypatch.setattr(os, "writev", lambda fd, bufs: real(fd, [bytes(bufs[0])[:2]]))
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path)
    assert counting.write_pieces([b"abcd", b"efgh"]) == 8
    counting.fsync_close()
    assert path.read_bytes() == b"abcdefgh"


def test_the_pieces_count_towards_the_write_out_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behind: bool
) -> None:
    asked: list[int] = []
    monkeypatch.setattr(_file, "start_writeback", asked.append)  # in place: asked here
    if behind:  # queued after the writes, on the write-behind thread
        monkeypatch.setattr(_write_behind, "hint", lambda _tracker, fd: asked.append(fd))
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path)
    half = b"x" * (WRITEBACK_EVERY // 2)
    counting.write_pieces([half, b"y"])
    assert asked == []
    counting.write_pieces([half])
    assert asked == [counting._raw.fileno()]
    counting.fsync_close()


class _Parts:
    """A PartSink that keeps what it is handed."""

    def __init__(self, part_size: int) -> None:
        self._size = part_size
        self.parts: list[bytes] = []

    @property
    def part_size(self) -> int:
        return self._size

    def upload_part(self, data: BinaryIO, size: int) -> None:
        got = data.read()
        assert len(got) == size
        self.parts.append(got)


@pytest.mark.usefixtures("behind")
def test_spilled_parts_hold_the_pieces(tmp_path: Path) -> None:
    """With parts handed away as the file grows, pieces written by writev are in them, in order,
    and the local file is emptied after each part as for a plain write."""
    sink = _Parts(part_size=10)
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path, sink)
    counting.write(b"0123")
    counting.write_pieces([b"45", b"6789", b"AB"])  # 12 bytes locally: handed over
    counting.write_pieces([b"cd"])
    counting.fsync_close()
    assert sink.parts == [b"0123456789AB"]
    assert path.read_bytes() == b"cd"
    assert counting.count == 14 and counting.spilled == 12


@pytest.mark.parametrize("n", [0, 1, -1, 63, 64, -64, -65, 300, 2**31, -(2**31), 2**62, 2**63 - 1, -(2**63)])
def test_a_block_header_long_is_avros(n: int) -> None:
    """The count and size before a block written here are Avro longs, as fastavro's encoder writes them."""
    from fastavro.io.binary_encoder import BinaryEncoder

    from formats.avro_format import _avro_long

    out = io.BytesIO()
    BinaryEncoder(out).write_long(n)
    assert _avro_long(n) == out.getvalue()
