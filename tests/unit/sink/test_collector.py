"""sink/runtime/collector.py: a task process's collector set-up (checked in a fresh interpreter,
since freezing and thresholds are process-wide)."""

from __future__ import annotations

import subprocess
import sys

from sink.runtime.collector import TRIM_THRESHOLD, YOUNG


def test_settle_heap_freezes_what_lives_and_spaces_young_collections_out() -> None:
    code = (
        "import gc\n"
        "from sink.runtime.collector import YOUNG, settle_heap\n"
        "before = gc.get_threshold()\n"
        "settle_heap()\n"
        "after = gc.get_threshold()\n"
        "assert gc.get_freeze_count() > 1000, gc.get_freeze_count()\n"
        "assert after == (YOUNG, before[1], before[2]), (before, after)\n"
        "print('ok')\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
    assert YOUNG > 700  # spaced out beyond the interpreter's default


# A thread allocates 40,000 small blocks in its own glibc arena and the main thread frees them, as
# librdkafka's broker thread allocates fetched messages and the consuming thread frees them. With
# a trim threshold in argv[1] (else glibc's default) set first; prints the arenas' bytes once grown
# and after the frees. Nothing else is imported: imports free big mapped blocks, on which glibc
# raises its threshold by itself.
_ARENA_CHURN = """
import ctypes, sys, threading
libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
if len(sys.argv) > 1:
    assert libc.mallopt(-1, int(sys.argv[1])) == 1  # M_TRIM_THRESHOLD
blocks = []
worker = threading.Thread(target=lambda: blocks.extend(libc.malloc(256) for _ in range(40000)))
worker.start()
worker.join()
grown = libc.mallinfo2().arena
for block in blocks:
    libc.free(block)
print(grown, libc.mallinfo2().arena)
"""


def _arena_after_churn(*threshold: int) -> tuple[int, int]:
    done = subprocess.run(
        [sys.executable, "-c", _ARENA_CHURN, *map(str, threshold)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr
    grown, after = map(int, done.stdout.split())
    return grown, after


def test_the_trim_threshold_keeps_what_a_thread_arena_grew_to() -> None:
    grown, after = _arena_after_churn()
    assert after < grown - (4 << 20), "glibc no longer gives a thread arena's free top back: nothing to fix"
    grown, after = _arena_after_churn(TRIM_THRESHOLD)
    assert after == grown, f"{grown - after} bytes of the thread's arena went back to the kernel"


def test_settle_heap_raises_the_trim_threshold() -> None:
    code = (
        "import sink.runtime.collector as collector\n"
        "calls = []\n"
        "keep = collector.keep_freed_memory\n"
        "collector.keep_freed_memory = lambda: calls.append(keep()) or calls[-1]\n"
        "collector.settle_heap()\n"
        "print(calls)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True]", "settle_heap did not set the trim threshold (or glibc refused)"
