"""Crash-test children forked from a server that has already imported the sink.

The SIGKILL tests (test_sink_sigkill.py, test_sink_exactly_once.py) start well over a hundred
children that each run a task and kill themselves mid-commit, and test_reliability_config.py runs
``kcql-sink run`` on 61 broken configs. Started as ``python -m ...``, each child spent about a
second importing the sink and boto3 before doing any work; that was most of those tests' run time.
Here a ``forkserver`` (one per test session, started on first use) imports them once and forks
every child from that state. Each child is still a separate process with its own memory, file
descriptors and storage client, killed with a real ``SIGKILL``; only the parent test process reads
the storage afterwards, exactly as before.

``run_child`` gives the exit status as ``subprocess`` does (``-9`` for a SIGKILL, the argument of
``sys.exit`` otherwise, 1 for an uncaught exception, whose traceback goes to the child's stderr).
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ChildResult", "run_child"]

_PRELOAD = [
    "boto3",
    "sink.cli.dispatch",
    "sink.cli.run",
    "sink.runtime.collector",
    "sink.storage.local",
    "sink.storage.s3",
    "sink.task.task",
    "tests.batches",
    "tests.integration._sink_crash_driver",
    "tests.integration._sink_support",
]

_context = multiprocessing.get_context("forkserver")
_context.set_forkserver_preload(_PRELOAD)


@dataclass(frozen=True)
class ChildResult:
    returncode: int | None
    """As ``subprocess`` reports it: negative for a signal (``-9`` for SIGKILL); None: timed out."""
    stdout: str
    stderr: str


def _redirected(
    target: Callable[..., int], args: Sequence[Any], stdout: str, stderr: str, unset_env: Sequence[str]
) -> None:
    """In the child: its own stdout/stderr files (not the test's captured streams), then ``target``."""
    for name in unset_env:
        os.environ.pop(name, None)
    for fd, path in ((1, stdout), (2, stderr)):
        file_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(file_fd, fd)
        os.close(file_fd)
    sys.exit(target(*args))


def run_child(
    target: Callable[..., int],
    args: Sequence[Any],
    out_dir: Path,
    timeout: float,
    unset_env: Sequence[str] = (),
) -> ChildResult:
    """Run ``target(*args)`` (a module-level function) in a child forked from the preloaded server,
    in the test process's working directory, without the environment variables ``unset_env``.

    A child that outlives ``timeout`` is killed and reported with ``returncode`` None.

    Call it from one thread at a time: children started and joined from two threads at once got
    exit status 255 for some of them on CPython 3.11 (the forkserver client read EOF where the
    status should be; 10-15 of 61 children, 2026-12-07), although each exited 1.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    stdout, stderr = out_dir / "child.stdout", out_dir / "child.stderr"
    proc = _context.Process(
        target=_redirected, args=(target, list(args), str(stdout), str(stderr), list(unset_env))
    )
    proc.start()
    proc.join(timeout)
    timed_out = proc.is_alive()
    if timed_out:
        proc.kill()
        proc.join()
    returncode = None if timed_out else proc.exitcode
    proc.close()
    return ChildResult(returncode, _read(stdout), _read(stderr))


def _read(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""
