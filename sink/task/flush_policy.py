"""When an open file is closed and committed: flush.count, flush.size, flush.interval (OR-combined).

The interval is measured from the file's first record on the monotonic clock (wall-clock jumps
neither flush early nor hold a file back), and it is enforced by the task's timer thread, so a
partition that stops receiving records still gets its data committed within the interval (Lenses
and Confluent only check on the next record; see reference §5 and Confluent #144).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from kcql.model import SinkPlan

__all__ = ["FlushPolicy", "FlushReason"]

FlushReason = Literal["count", "size", "interval"]


@dataclass(frozen=True, slots=True)
class FlushPolicy:
    """The three limits of one KCQL statement."""

    count: int
    size: int
    interval: float
    """Seconds since the file's first record."""

    @classmethod
    def from_plan(cls, plan: SinkPlan) -> FlushPolicy:
        return cls(count=plan.flush.count, size=plan.flush.size, interval=float(plan.flush.interval))

    def room(self, record_count: int) -> int:
        """How many more records the file may take before flush.count is reached."""
        return max(self.count - record_count, 0)

    def deadline(self, opened_at: float) -> float:
        """Monotonic time at which a file whose first record arrived at ``opened_at`` is due."""
        return opened_at + self.interval

    def reason(
        self, record_count: int, bytes_written: int, opened_at: float, now: float
    ) -> FlushReason | None:
        """Which limit a file has reached, or ``None``; an empty file never flushes."""
        if record_count <= 0:
            return None
        if record_count >= self.count:
            return "count"
        if bytes_written >= self.size:
            return "size"
        if now >= opened_at + self.interval:
            return "interval"
        return None
