"""How a task process sets up Python's garbage collector, and glibc's malloc, before its consume loop.

Three things the loop's allocations would otherwise pay for, measured with ``bench.focus`` and
``make bench``:

* Everything alive when the loop starts (modules, the compiled plans, converters and clients)
  lives as long as the process. Frozen (:func:`gc.freeze`), the full collections the loop
  triggers do not walk those ~75,000 objects again each time (tens of milliseconds apiece).
* Each ``consume()`` makes a couple of thousand messages, which the runtime holds for a batch or
  two and then drops; they are freed by reference counting, never by the collector. At the
  default threshold (a young collection every 700 allocations) the collector walked each of
  them once or twice before they died: about 300 young and 25 middle collections per 300,000
  records, 5% of the consuming thread. At :data:`YOUNG` a collection comes every 50,000
  allocations, after the messages it would have walked are gone. Cyclic garbage waits that much
  longer to be collected: a few megabytes at most.
* librdkafka's broker thread allocates each fetched message (~41,000 per fetch response from
  Tansu) in its own glibc arena, and the consuming thread frees them. Each time the arena's top
  was free again, glibc gave it back to the kernel (its trim threshold is 128 KiB), and the next
  response grew it again one page at a time: an ``mprotect`` call and a page fault per 4 KiB,
  14,100 calls per 300,000 records (strace, 2026-12-07), all on the thread that parses the
  fetches. With :data:`TRIM_THRESHOLD` the arena keeps what it grew to (3,400 calls, the first
  growth only), and the stream of 300,000 Confluent Avro records into STOREAS AVRO took
  0.334 s instead of 0.345 s (medians of 10 alternated rounds, bare consume set up the same
  way). The process keeps up to its peak of freed memory rather than returning it.
"""

from __future__ import annotations

import ctypes
import gc
import sys

__all__ = ["TRIM_THRESHOLD", "YOUNG", "keep_freed_memory", "settle_heap"]

YOUNG = 50_000
"""Allocations (less deallocations) of tracked objects between two young collections."""

TRIM_THRESHOLD = 64 << 20
"""Free bytes at the top of a glibc heap before it is given back to the kernel (glibc's default:
128 KiB, raised dynamically only for the main heap). Above a fetch response's worth of messages
(~10 MB), below a thread arena's 64 MiB heap."""

_M_TRIM_THRESHOLD = -1  # <malloc.h>


def settle_heap() -> None:
    """Collect, freeze what survives, space young collections out, and keep freed memory (see
    the module docstring)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
    keep_freed_memory()


def keep_freed_memory() -> bool:
    """Raise glibc's trim threshold to :data:`TRIM_THRESHOLD`; whether it was (False off glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # no C library to ask, or one without mallopt
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD))
