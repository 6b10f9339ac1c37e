"""A staging file asks the kernel to start writing it out every megabyte (formats/_file.py).

Without it a file's dirty pages wait for the commit's fsync, which then writes the whole file
while its records wait to become visible. Pinned here: the request is made once per
``WRITEBACK_EVERY`` bytes, on the file's own descriptor, never for an in-memory file, and the
system call behind it exists and accepts a real file on this (Linux) machine.
"""

from __future__ import annotations

import ctypes
import io
import os
import sys
from pathlib import Path

import pytest

from formats import _file, _write_behind
from formats._file import WRITEBACK_EVERY, CountingFile


@pytest.mark.parametrize("behind", [True, False], ids=["write-behind", "in-place"])
def test_writeback_is_asked_for_once_per_megabyte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, behind: bool
) -> None:
    """In place, or queued to the write-behind thread (formats/_write_behind.py) after the writes."""
    if behind and not _write_behind.available():
        pytest.skip("formats._write_thread was not built")
    asked: list[int] = []
    monkeypatch.setattr(_file, "WRITE_BEHIND", behind)
    monkeypatch.setattr(_file, "start_writeback", asked.append)
    monkeypatch.setattr(_write_behind, "hint", lambda _tracker, fd: asked.append(fd))
    path = tmp_path / "staging.avro"
    counting = CountingFile(path.open("wb"), path)
    chunk = b"x" * (WRITEBACK_EVERY // 4 + 1)
    for _ in range(9):  # 2.25 MB and a bit: two full megabytes
        counting.write(chunk)
    fd = counting._raw.fileno()
    counting.fsync_close()
    assert asked == [fd, fd]
    assert path.stat().st_size == 9 * len(chunk)


def test_an_in_memory_file_is_not_written_out(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[int] = []
    monkeypatch.setattr(_file, "start_writeback", asked.append)
    counting = CountingFile(io.BytesIO())
    counting.write(b"x" * (2 * WRITEBACK_EVERY))
    assert asked == []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="sync_file_range is Linux's")
def test_sync_file_range_accepts_a_staging_file(tmp_path: Path) -> None:
    """The real call, through the same ctypes binding: it returns 0 on a file with dirty pages
    (a wrong signature or flag would give EINVAL)."""
    assert _file.start_writeback is not None
    libc = ctypes.CDLL(None, use_errno=True)
    path = tmp_path / "f"
    with path.open("wb") as fh:
        fh.write(b"y" * 3 * WRITEBACK_EVERY)
        fh.flush()
        assert libc.sync_file_range(fh.fileno(), ctypes.c_int64(0), ctypes.c_int64(0), ctypes.c_uint(2)) == 0
        _file.start_writeback(fh.fileno())  # the product's binding, on the same file: no error
        os.fsync(fh.fileno())
