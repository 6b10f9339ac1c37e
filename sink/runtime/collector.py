"""How a task process sets up Python's garbage collector before its consume loop.

Two things the loop's allocations would otherwise pay for, measured with ``bench.focus``:

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
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG", "settle_heap"]

YOUNG = 50_000
"""Allocations (less deallocations) of tracked objects between two young collections."""


def settle_heap() -> None:
    """Collect, freeze what survives, and space young collections out (see the module docstring)."""
    gc.collect()
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)
