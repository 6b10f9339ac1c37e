"""Open staging files against the process's file-descriptor limit.

Every open writer holds one descriptor (its staging file). ``connect.s3.max.open.writers`` bounds
one task, but the tasks of a worker share one process, and the Kafka client, the storage client
and the REST server need descriptors too. Past the limit, ``open`` fails with ``EMFILE`` and a
whole partition's commit fails with it (seen with 30,000 PARTITIONBY paths). So every task's pool
also draws on one process-wide budget: the soft ``RLIMIT_NOFILE`` less :data:`RESERVED`. When it is
spent, a pool commits its least recently used file before opening another, exactly as when
``max.open.writers`` is reached.

The budget first raises the soft limit to the hard one, which the JVM running Kafka Connect does
by default (HotSpot's ``-XX:+MaxFDLimit``), so the sink gets what a Connect worker would.
"""

from __future__ import annotations

import logging
import threading

__all__ = ["RESERVED", "DescriptorBudget", "process_budget"]

log = logging.getLogger(__name__)

RESERVED = 512
"""Descriptors kept for everything but staging files: sockets, the index, logs, Spark's pipes."""


class DescriptorBudget:
    """How many staging files the process may hold open, and how many it holds."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            self.open += 1

    def give(self) -> None:
        with self._lock:
            self.open -= 1

    @property
    def spent(self) -> bool:
        return self.open >= self.limit


_BUDGET: DescriptorBudget | None = None
_BUDGET_LOCK = threading.Lock()


def _soft_limit() -> int | None:
    """The soft descriptor limit after raising it to the hard one; ``None`` when unlimited/unknown."""
    try:
        import resource
    except ImportError:  # not a POSIX system: nothing to ask
        return None
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError) as exc:  # e.g. macOS caps it below the hard limit
            log.debug("could not raise the descriptor limit to %s: %s", target, exc)
    return None if soft == resource.RLIM_INFINITY else soft


def process_budget() -> DescriptorBudget:
    """The process's one budget (created, and the limit raised, on first use)."""
    global _BUDGET
    with _BUDGET_LOCK:
        if _BUDGET is None:
            soft = _soft_limit()
            _BUDGET = DescriptorBudget(1 << 62 if soft is None else max(16, soft - RESERVED))
        return _BUDGET
