"""The write-behind thread (formats/_write_thread.c): queued writes are never lost or misplaced.

A staging file's ``write_pieces`` returns before its bytes are written. Pinned here, on real
files: a queued write's error (``/dev/full``'s ENOSPC) is raised by the file's close or its next
write, never dropped; an abort waits for the queued writes before the descriptor closes (a
closed, reused descriptor number would take another file's bytes); a writer more than the limit
ahead waits; more pieces than one ``pwritev`` takes all land, in order; a forked child, as Spark
forks its Python workers, writes through a thread of its own.
"""

from __future__ import annotations

import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from formats import _write_behind
from formats._file import CountingFile

pytestmark = pytest.mark.skipif(not _write_behind.available(), reason="formats._write_thread was not built")


@pytest.fixture
def held() -> Iterator[None]:
    """The thread starts no job until the test lets it (``hold(False)``, also at the end)."""
    from formats import _write_thread

    _write_thread.hold(True)
    try:
        yield
    finally:
        _write_thread.hold(False)


def _release() -> None:
    from formats import _write_thread

    _write_thread.hold(False)


def test_a_queued_writes_error_is_raised_by_the_close(tmp_path: Path) -> None:
    counting = CountingFile(Path("/dev/full").open("wb"))  # noqa: SIM115 - the test closes it
    counting.write_pieces([b"head", b"body"])  # queued: its error is not known yet
    with pytest.raises(OSError, match="No space left") as raised:
        counting.fsync_close()  # a commit never takes a file a queued write failed in
    assert raised.value.errno == errno.ENOSPC
    assert not counting.closed  # the caller's abort closes it
    counting.close()  # and does not raise again
    assert counting.closed


def test_a_queued_writes_error_is_raised_by_the_next_write() -> None:
    counting = CountingFile(Path("/dev/full").open("wb"))  # noqa: SIM115 - the test closes it
    counting.write_pieces([b"a"])
    _write_behind.settle(counting._behind, raise_error=False)  # the thread has tried it
    with pytest.raises(OSError, match="No space left"):
        counting.write_pieces([b"b"])  # the append after a failed write fails, as a write in place would
    counting.close()


@pytest.mark.usefixtures("held")
def test_an_abort_waits_for_queued_writes_before_the_descriptor_closes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path)
    counting.write(b"head")
    counting.write_pieces([b"-queued-", b"bytes"])
    closer = threading.Thread(target=counting.close)
    closer.start()
    closer.join(0.2)
    assert closer.is_alive()  # waiting for the held write
    _release()
    closer.join(10)
    assert counting.closed
    assert path.read_bytes() == b"head-queued-bytes"  # written before the close, into this file


@pytest.mark.usefixtures("held")
def test_a_writer_far_ahead_waits(tmp_path: Path) -> None:
    from formats import _write_thread

    before = _write_thread.set_limit(4)
    try:
        path = tmp_path / "f"
        counting = CountingFile(path.open("wb"), path)
        counting.write_pieces([b"12345678"])  # over the limit once queued
        returned: list[int] = []
        second = threading.Thread(target=lambda: returned.append(counting.write_pieces([b"9"])))
        second.start()
        second.join(0.2)
        assert second.is_alive() and returned == []
        _release()
        second.join(10)
        assert returned == [1]
        counting.fsync_close()
        assert path.read_bytes() == b"123456789"
    finally:
        _write_thread.set_limit(before)


def test_more_pieces_than_one_pwritev_takes_land_in_order(tmp_path: Path) -> None:
    path = tmp_path / "f"
    pieces = [bytes([i % 251]) * (i % 7) for i in range(5000)]  # empty ones among them
    with path.open("wb") as fh:
        tracker = _write_behind.Tracker()
        _write_behind.write(tracker, fh.fileno(), pieces, 3, sum(map(len, pieces)))
        _write_behind.settle(tracker)
    assert path.read_bytes() == b"\0" * 3 + b"".join(pieces)


def test_pieces_that_do_not_add_up_are_refused(tmp_path: Path) -> None:
    with (tmp_path / "f").open("wb") as fh, pytest.raises(ValueError, match="hold 3 bytes, not 4"):
        _write_behind.write(_write_behind.Tracker(), fh.fileno(), [b"abc"], 0, 4)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_writes_through_its_own_thread(tmp_path: Path) -> None:
    first = CountingFile((tmp_path / "parent").open("wb"), tmp_path / "parent")
    first.write_pieces([b"parent"])  # the parent's thread runs
    first.fsync_close()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child's result is its exit code
        code = 1
        try:
            path = tmp_path / "child"
            child = CountingFile(path.open("wb"), path)
            child.write_pieces([b"child", b"-bytes"])
            child.fsync_close()
            code = 0 if path.read_bytes() == b"child-bytes" else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert (tmp_path / "parent").read_bytes() == b"parent"


def test_a_file_not_at_its_start_is_written_in_place(tmp_path: Path) -> None:
    """Queued writes' offsets count from the file's start; a file handed over mid-way is not queued."""
    path = tmp_path / "f"
    path.write_bytes(b"before-")
    counting = CountingFile(path.open("ab"), path)
    assert counting._behind is None
    counting.write_pieces([b"after", b"-pieces"])
    counting.write(b"!")
    counting.fsync_close()
    assert path.read_bytes() == b"before-after-pieces!"


def test_buffered_writes_after_queued_ones_go_past_them(tmp_path: Path) -> None:
    path = tmp_path / "f"
    counting = CountingFile(path.open("wb"), path)
    for i in range(50):  # the descriptor's position is only moved when a buffered write comes
        counting.write_pieces([b"<", str(i).encode(), b">"])
        if i % 7 == 0:
            counting.write(b"|")
    counting.fsync_close()
    expected = b"".join(b"<%d>" % i + (b"|" if i % 7 == 0 else b"") for i in range(50))
    assert path.read_bytes() == expected and counting.count == len(expected)


@pytest.mark.skipif(not hasattr(os, "SCHED_BATCH"), reason="SCHED_BATCH is Linux's")
def test_the_thread_is_named_and_yields_to_the_thread_that_wakes_it(tmp_path: Path) -> None:
    """Queueing a write wakes the thread; as SCHED_BATCH it does not preempt the consuming thread
    that woke it (issue 24). Named, so top, py-spy and this test can find it."""
    allowed: list[bool] = []

    def try_batch() -> None:  # on a thread of its own: the policy is per thread
        try:
            os.sched_setscheduler(0, os.SCHED_BATCH, os.sched_param(0))
            allowed.append(True)
        except OSError:  # a sandbox that forbids it: the C thread then runs as an ordinary one
            allowed.append(False)

    probe = threading.Thread(target=try_batch)
    probe.start()
    probe.join()
    if not allowed[0]:
        pytest.skip("this sandbox does not let a thread choose SCHED_BATCH")
    path = tmp_path / "f"
    with path.open("wb") as fh:
        tracker = _write_behind.Tracker()
        _write_behind.write(tracker, fh.fileno(), [b"x"], 0, 1)  # the thread starts at the first job
        _write_behind.settle(tracker)
    tasks = Path("/proc/self/task")
    named = [int(t.name) for t in tasks.iterdir() if (t / "comm").read_text().strip() == "kcql-sink-write"]
    assert len(named) == 1
    assert os.sched_getscheduler(named[0]) == os.SCHED_BATCH
