"""Plumbing every writer shares: the staging file handle, byte counting, fsync on close.

Kept private so each format module only holds what is specific to its encoding.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import io
import logging
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

from formats import _write_behind
from formats.base import FormatError, FormatWriter, PartSink

__all__ = ["WRITEBACK_EVERY", "WRITE_BEHIND", "CountingFile", "StagingWriter", "start_writeback"]

logger = logging.getLogger(__name__)

WRITEBACK_EVERY = 1 << 20
"""Bytes written to a staging file after which the kernel is asked to start writing them out
(``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which does not wait), as RocksDB's
``bytes_per_sync`` does. Without it the dirty pages pile up until the commit, whose fsync then
writes the whole file while the file's records wait to become visible: ~8 ms for each 5.5 MB
file of the benchmark's last three, in parallel (strace, 2026-11-28). With it the fsync finds
all but the last megabyte on its way to disk already."""

WRITE_BEHIND = _write_behind.available()
"""Whether new staging files queue their ``write_pieces`` and write-out hints to the write-behind
thread (:mod:`formats._write_behind`); ``False`` writes them in place (the benchmark's A/B)."""

_SYNC_FILE_RANGE_WRITE = 2
_IOV_MAX = 1024
"""The most buffers one ``writev`` takes on Linux (``IOV_MAX``); more are joined first."""


def _sync_file_range() -> Callable[[int], None] | None:
    """``fd -> None``: start the write-out of ``fd``'s dirty pages (Linux), else ``None``."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):  # pragma: no cover - a libc without it
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int

    def start(fd: int) -> None:
        call(fd, 0, 0, _SYNC_FILE_RANGE_WRITE)  # a failure here is only a missed hint: the fsync decides

    return start


start_writeback = _sync_file_range()
"""Start writing ``fd``'s dirty pages out without waiting, or ``None`` where that is not known."""


def _fileno(raw: IO[bytes]) -> int | None:
    try:
        return raw.fileno()
    except (OSError, AttributeError, io.UnsupportedOperation):  # an in-memory file
        return None


class CountingFile:
    """A binary file that counts what is written to it, and optionally hands full parts away.

    ``bytes_written`` must be cheap (the flush.size policy asks after every batch), so the count
    is kept in Python instead of calling ``stat`` or ``tell`` on the file.

    With a :class:`~formats.base.PartSink`, once the local file holds ``part_size`` bytes or more
    at the end of a ``write``, those bytes go to the sink as the next part and the local file is
    emptied: local disk holds at most a part plus one write. ``count`` (and ``tell``) keep
    counting the whole file, which is what encoders that record offsets (Parquet's footer) need.
    """

    __slots__ = ("_behind", "_fileno", "_local", "_path", "_raw", "_seek_due", "_spill", "_unsent", "count",
                 "spilled")

    def __init__(self, raw: IO[bytes], path: Path | None = None, spill: PartSink | None = None) -> None:
        if spill is not None and path is None:
            raise ValueError("a spilling CountingFile needs the path of its file to read parts back")
        self._raw = raw
        self._path = path
        self._spill = spill
        self._local = 0
        self._fileno = _fileno(raw)
        queue = WRITE_BEHIND and self._fileno is not None and raw.tell() == 0
        self._behind = _write_behind.Tracker() if queue else None
        """This file's jobs on the write-behind thread (:mod:`formats._write_behind`), if it queues
        its ``write_pieces`` and write-out hints there (a file written from its start: the
        queued writes' offsets are ``count - spilled``)."""
        self._seek_due = False
        """Queued writes went past the descriptor's position: a buffered write seeks past them first."""
        self._unsent = 0
        """Bytes written since the kernel was last asked to write the file out (:data:`WRITEBACK_EVERY`)."""
        self.count = 0
        self.spilled = 0
        """Bytes handed to the sink so far (``count - spilled`` are in the local file)."""

    @property
    def spills(self) -> bool:
        """Whether parts of this file are handed away as it grows."""
        return self._spill is not None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        if self._seek_due:
            self._seek_due = False
            self._raw.seek(self.count - self.spilled)
        n = self._raw.write(data)
        return self._wrote(len(data) if n is None else n)

    def write_pieces(self, pieces: Sequence[bytes]) -> int:
        """Write ``pieces`` one after the other, as ``write(b"".join(pieces))`` would.

        On a file with a descriptor they go to the kernel in one ``writev`` from where they lie:
        an Avro block of the pass-through is its header, the bodies of each batch it took and the
        sync marker, and joining them first copied every body once more (~32 MB per 300,000
        benchmark records). Whatever the buffered file still holds is flushed first, so the
        order of the bytes is the order of the calls.

        With the write-behind thread the pieces are queued for their offset and this returns at
        once: an earlier queued write's error is raised here, a later one's by the next call (or
        by the close) that must see the file whole.
        """
        if self._fileno is None or not 0 < len(pieces) <= _IOV_MAX:
            return self.write(b"".join(pieces))
        self._raw.flush()
        total = sum(map(len, pieces))
        if self._behind is not None:  # at its offset, without moving the descriptor (two syscalls)
            _write_behind.write(self._behind, self._fileno, pieces, self.count - self.spilled, total)
            self._seek_due = True
            return self._wrote(total)
        done = os.writev(self._fileno, pieces)
        if done < total:  # a short write (a signal, a full disk on the way): the rest as one
            rest = b"".join(pieces)[done:]
            while rest:
                n = os.write(self._fileno, rest)
                rest = rest[n:]
        self._raw.seek(0, os.SEEK_CUR)  # the buffered file's idea of its position follows the fd
        return self._wrote(total)

    def _wrote(self, written: int) -> int:
        self.count += written
        self._unsent += written
        if self._unsent >= WRITEBACK_EVERY:
            self._unsent = 0
            if self._fileno is not None and start_writeback is not None:
                # what BufferedWriter still holds goes at the next one
                if self._behind is not None:
                    _write_behind.hint(self._behind, self._fileno)
                else:
                    start_writeback(self._fileno)
        if self._spill is not None:
            self._local += written
            if self._local >= self._spill.part_size:
                self._hand_over(self._spill)
        return written

    def _hand_over(self, spill: PartSink) -> None:
        assert self._path is not None  # noqa: S101 - checked in __init__
        self._settle()
        self._raw.flush()
        with self._path.open("rb") as part:
            spill.upload_part(part, self._local)
        self._raw.seek(0)
        self._raw.truncate()
        self._seek_due = False
        self.spilled += self._local
        self._local = 0

    def flush(self) -> None:
        self._settle()
        self._raw.flush()

    def _settle(self) -> None:
        """Wait for this file's queued writes; raise the first one's error."""
        if self._behind is not None:
            _write_behind.settle(self._behind)

    def tell(self) -> int:
        return self.count

    @property
    def closed(self) -> bool:
        return self._raw.closed

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def writable(self) -> bool:
        return True

    def fsync_close(self) -> None:
        """Flush, fsync and close: after this the bytes are on disk, as the committer requires."""
        if self._raw.closed:
            return
        self._settle()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()

    def close(self) -> None:
        """Close without finishing (an abort): queued writes are waited for, never left to land
        on a descriptor number the process may have reused."""
        if self._raw.closed:
            return
        try:
            if self._behind is not None:
                # its error, if any, was or is raised by an append or the close that finishes it
                _write_behind.settle(self._behind, raise_error=False)
        finally:
            self._raw.close()


class StagingWriter(FormatWriter):
    """Base for writers that stream into one local staging file.

    Subclasses implement :meth:`write` and :meth:`_finish` (write the trailer: last block,
    Parquet footer, gzip trailer). With ``spill``, full parts leave the local file as it grows
    (see :class:`CountingFile`); after ``close`` the local file holds the last part. ``close``
    and ``abort`` are idempotent so the sink core can call them from error paths without
    tracking state.
    """

    def __init__(self, path: Path, spill: PartSink | None = None) -> None:
        self.path = path
        path = Path(path)
        # A staging file with content is never silently overwritten (that would be a caller bug);
        # an empty one, as tempfile.mkstemp leaves it, is fine to reuse.
        mode = "wb" if path.exists() and path.stat().st_size == 0 else "xb"
        self._file = CountingFile(path.open(mode), path, spill)  # closed by close()/abort()
        self._count = 0
        self._closed = False
        self._failed: BaseException | None = None
        """Why ``close`` failed: the file is incomplete, and a later ``close`` must say so again."""

    @property
    def record_count(self) -> int:
        return self._count

    @property
    def bytes_written(self) -> int:
        return self._file.count

    def _finish(self) -> None:
        """Write whatever completes the file (buffered rows, footers). Default: nothing."""

    def close(self) -> None:
        if self._closed:
            if self._failed is not None:  # a retried commit must not take the incomplete file
                raise FormatError(
                    f"the staging file {self.path} could not be finished ({self._failed}); "
                    "it must be discarded"
                ) from self._failed
            return
        self._closed = True
        try:
            self._finish()
            self._file.fsync_close()
        except BaseException as exc:
            self._failed = exc
            try:
                self._abort_encoder()
            except Exception:  # the original error is the one worth reporting
                logger.debug("ignoring error while releasing %s", self.path, exc_info=True)
            self._file.close()
            raise

    def abort(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._abort_encoder()
        except Exception:  # the file is deleted by the caller anyway; just release it
            logger.debug("ignoring error while aborting %s", self.path, exc_info=True)
        self._file.close()

    def _abort_encoder(self) -> None:
        """Release encoder resources without finishing the file. Default: nothing."""
