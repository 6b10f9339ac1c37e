"""Staging-file writes done on a thread of their own, after the call that asked for them returned.

The sink's consuming thread is its critical path. A staging file's ``writev`` (copying ~30 MB
into the page cache per 300,000 benchmark records) and the write-out hint (``sync_file_range``,
which blocks while the kernel queues a megabyte of writes) need no Python, so they are queued to
one POSIX thread that never takes the GIL (``formats/_write_thread.c``) and done there in the
order they were queued: ~0.03 s of the ~0.11 s the consuming thread spent writing 300,000 Avro
records (in-process feed, 2026-11-28). A Python thread doing the same gained nothing: it needs the
GIL around each write, and on two busy cores handing the GIL over stalls the consuming thread.

Each write names its offset (``pwritev``), so it does not depend on the descriptor's position,
and the buffered writes a file also takes (headers, footers) go on past it. Nothing that reads,
uploads, fsyncs or closes a file may run before its queued writes are done: :func:`settle` waits
for them and raises the first one's error (a full disk, say), so a failed write fails the append
or the close after it, the same way a write in place would have. After a failure the file's later
jobs are skipped: the file is never committed. The bytes waiting are bounded (:data:`PENDING_LIMIT`);
a writer ahead of that waits. Where the C module was not built, files are written in place.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

__all__ = ["PENDING_LIMIT", "Tracker", "available", "hint", "settle", "write"]

PENDING_LIMIT = 16 << 20
"""Bytes queued and not yet written, beyond which a writer waits: at the page cache's ~1 GB/s,
~16 ms of work, and a bound on how long the queued batches' bodies outlive their batch."""

_c: ModuleType | None
try:
    from formats import _write_thread as _c
    from formats._write_thread import Tracker
except ImportError:  # built without a C compiler: files are written in place
    _c = None

    class Tracker:  # type: ignore[no-redef]
        """Never made: :func:`available` is False."""


def available() -> bool:
    """Whether writes can be queued here (the C module was built)."""
    return _c is not None


def write(tracker: Tracker, fd: int, pieces: Sequence[bytes], offset: int, total: int) -> None:
    """Queue ``pieces`` (``total`` bytes, held until written) for ``fd`` at ``offset``; raise the
    file's earlier failure instead, if it has one."""
    assert _c is not None  # noqa: S101 - callers check available()
    _c.write(tracker, fd, pieces, offset, total)


def hint(tracker: Tracker, fd: int) -> None:
    """Queue the write-out hint (``sync_file_range``) for ``fd`` after the jobs queued so far."""
    assert _c is not None  # noqa: S101 - callers check available()
    _c.hint(tracker, fd)


def settle(tracker: Tracker, raise_error: bool = True) -> None:
    """Wait, without the GIL, until every job of ``tracker`` is done; raise the first one's error."""
    assert _c is not None  # noqa: S101 - callers check available()
    _c.settle(tracker, raise_error)


if _c is not None:
    _c.set_limit(PENDING_LIMIT)
