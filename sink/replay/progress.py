"""The progress line: files, records and records/s, printed about once a second and at the end."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TextIO

__all__ = ["Progress"]


@dataclass
class Progress:
    """Counts shown on the progress line and returned at the end."""

    files: int = 0
    records: int = 0
    recognised: int = 0
    """Records found already in the target at start (Tansu shows aborted records; see producer)."""
    started: float = field(default_factory=time.monotonic)
    _last_print: float = 0.0

    def line(self) -> str:
        elapsed = max(time.monotonic() - self.started, 1e-9)
        rate = self.records / elapsed
        extra = f", {self.recognised} already there" if self.recognised else ""
        return f"replay: files {self.files}, records {self.records}{extra}, {rate:,.0f} records/s"

    def maybe_print(self, out: TextIO | None, every: float, force: bool = False) -> None:
        now = time.monotonic()
        if out is not None and (force or now - self._last_print >= every):
            self._last_print = now
            out.write(self.line() + "\n")
            out.flush()
