"""A child process that runs a :class:`sink.task.task.SinkTask` and is killed with SIGKILL mid-commit.

Run as ``python -m tests.integration._sink_crash_driver SPEC.json``. The spec says which connector
config to start with, how many records to put (values ``{"id": i, "kind": "a"|"b"}`` on one
partition, offsets ``0..records-1``), in which flush mode, and at which commit step (and which
occurrence of it) the process kills itself with ``SIGKILL``: no ``finally``, no ``atexit``, no
flush of anything, exactly like a machine losing power after that storage call returned.

After every batch the driver asks ``pre_commit`` for the safe offset and writes it to
``group_offset_file``, playing the Kafka consumer group; the parent replays from the offset
``open`` returns, or from that group offset when ``open`` has none, as the Connect runtime does.

Besides the commit steps, ``kill_step`` may be ``after-batch``: the process dies after a put and
its pre-commit, with files still open (the only crash point when exactly-once is off, since a
direct upload has no intermediate steps).

``storage_kill`` (``{"method": "copy", "nth": 1}``) instead kills the process right after the
n-th successful call of that storage method, wherever it happens: in ``open``'s recovery too.

Exit status: killed by SIGKILL at the step (the parent checks ``-9``), or 0 with ``COMPLETED``
on stdout if the step was never reached (which the parent treats as a test failure: a crash
test that does not crash proves nothing).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

from sink.records.record import SinkRecord, TopicPartition
from sink.task.task import SinkTask
from tests.batches import put_records

TOPIC = "orders"
PARTITION = 0


def make_records(start: int, stop: int) -> list[SinkRecord]:
    """Records ``start..stop-1`` of the test partition; both sides of the test build them alike."""
    out = []
    for offset in range(start, stop):
        value = {"id": offset, "kind": "a" if offset % 3 else "b", "pad": "x" * 10}
        out.append(
            SinkRecord(
                TOPIC,
                PARTITION,
                offset,
                timestamp=1_700_000_000_000 + offset,
                key=None,
                value=value,
                raw_value=json.dumps(value, separators=(",", ":")).encode(),
            )
        )
    return out


def _kill_after_storage_call(method: str, nth: int) -> None:
    """Make the task's storage SIGKILL the process right after the ``nth`` successful ``method`` call.

    This reaches crash points the commit hook cannot, e.g. in the middle of ``open``'s recovery.
    """
    import sink.task.task as task_module

    real_create = task_module.create_storage
    calls = {"n": 0}

    def create(settings: Any) -> Any:
        storage = real_create(settings)
        original = getattr(storage, method)

        def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            calls["n"] += 1
            if calls["n"] == nth:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            return result

        setattr(storage, method, wrapped)
        return storage

    task_module.create_storage = create


def main(spec_path: str) -> int:
    spec: dict[str, Any] = json.loads(Path(spec_path).read_text())
    kill_step: str = spec["kill_step"]
    kill_at: int = spec["kill_at"]
    seen = {"n": 0}

    def hook(step: str) -> None:
        if step == kill_step:
            seen["n"] += 1
            if seen["n"] == kill_at:
                sys.stdout.flush()
                os.kill(os.getpid(), signal.SIGKILL)

    storage_kill = spec.get("storage_kill")
    if storage_kill:
        _kill_after_storage_call(storage_kill["method"], storage_kill["nth"])
    group_file = Path(spec["group_offset_file"])
    task = SinkTask()
    task.fault_hook = hook
    task.start(spec["config"])
    tp = TopicPartition(TOPIC, PARTITION)
    resume = task.open([tp]).get(tp, 0)
    batch = spec["batch"]
    for start in range(resume, spec["records"], batch):
        stop = min(start + batch, spec["records"])
        put_records(task, make_records(start, stop))
        if spec["mode"] == "interval":
            time.sleep(spec["sleep_after_batch"])  # the timer commits idle files meanwhile
        safe = task.pre_commit({tp: stop}).get(tp)
        if safe is not None:
            group_file.write_text(str(safe))
        hook("after-batch")  # a crash between commits, with files still open
    task.close([tp])
    task.stop()
    print("COMPLETED")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
