"""Give every Python thread its name at the OS level too (``prctl(PR_SET_NAME)``, 15 bytes: the
end of the name), so /proc shows which thread spent the CPU: ``bench.focus --threads`` puts
this directory on the sink's PYTHONPATH. CPython 3.11 leaves its threads named like the process."""

from __future__ import annotations

import contextlib
import ctypes
import threading
from typing import Any

_PR_SET_NAME = 15
_run = threading.Thread.run


def _named_run(self: threading.Thread) -> Any:
    with contextlib.suppress(OSError, AttributeError):  # not Linux: the numbers stay per process
        ctypes.CDLL(None).prctl(_PR_SET_NAME, self.name[-15:].encode(), 0, 0, 0)
    return _run(self)


threading.Thread.run = _named_run  # type: ignore[method-assign]
