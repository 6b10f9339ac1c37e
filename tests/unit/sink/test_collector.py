"""sink/runtime/collector.py: a task process's collector set-up (checked in a fresh interpreter,
since freezing and thresholds are process-wide)."""

from __future__ import annotations

import subprocess
import sys

from sink.runtime.collector import YOUNG


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
