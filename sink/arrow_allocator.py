"""Arrow's allocator in a kcql-sink process: jemalloc, unless the user has chosen one.

pyarrow's wheels carry three allocators and default to mimalloc. With mimalloc, each commit
thread's first Parquet files cost 26-100 ms of CPU to encode, 22-100 ms of it system time: the
thread's fresh memory arrives as 2 MB pages the kernel zeroes one by one (18-80 faults, ~1 ms
each, on this VM), and a thread's later files reuse them (4-9 ms). With jemalloc the same files
took 12-18 ms, and AVRO→PARQUET's whole process used 0.22-0.27 s of CPU instead of 0.34-0.45 s
while consuming 300,000 records (in-process feed, five runs each, 2026-11-28; docs/benchmarks.md,
"Arrow's allocator"). On a two-core machine that CPU is taken from the consuming thread,
librdkafka and the broker.

Arrow reads ``ARROW_DEFAULT_MEMORY_POOL`` once, while pyarrow is imported, and its C++ code (the
Parquet encoder's page buffers among it) allocates from that pool whatever
``pyarrow.set_memory_pool`` says later. So the choice is made here, before any of kcql-sink imports
pyarrow: ``sink/__init__.py`` calls :func:`prefer_jemalloc`. A value already set is kept (any of
``jemalloc``, ``mimalloc``, ``system``), and a process that imported pyarrow before ``sink`` keeps
whatever pyarrow chose then. Child processes (Spark's Python workers) inherit the variable.
"""

from __future__ import annotations

import os
import sys

__all__ = ["ENV", "prefer_jemalloc"]

ENV = "ARROW_DEFAULT_MEMORY_POOL"


def prefer_jemalloc() -> None:
    """Ask for jemalloc where pyarrow's Linux wheels have it, if nothing was chosen yet.

    Other platforms keep Arrow's default: a build without jemalloc would print a warning for the
    unsupported choice (and fall back).
    """
    if sys.platform.startswith("linux") and "pyarrow" not in sys.modules:
        os.environ.setdefault(ENV, "jemalloc")
