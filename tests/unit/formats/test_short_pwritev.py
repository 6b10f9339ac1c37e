"""The write-behind thread's short-write path (``write_all`` in formats/_write_thread.c).

When ``pwritev`` writes fewer bytes than asked, ``write_all`` steps past what went (whole pieces,
then part of one) and writes the rest at the offset after it. A regular file never writes short,
so that continuation is reachable only by making ``pwritev`` short: a child process runs with
``short_pwritev.c`` preloaded, which passes at most 7 bytes to each call. The pieces (empty,
1-byte, longer than 7; bytes, bytearray and memoryview; more than one ``pwritev``'s 1024) must
land exactly as a whole write would put them.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = Path(__file__).parents[3]
MAX = 7
OFFSET = 5
PREFIX = b"P" * OFFSET  # written first; the queued pieces go after it, never over it

CHILD = """
import json, os, sys
from formats import _write_behind
sizes = json.loads(sys.argv[1])
payload = open(sys.argv[2], "rb").read()
pieces, at = [], 0
for i, size in enumerate(sizes):
    chunk = payload[at:at + size]
    at += size
    pieces.append((bytes, bytearray, memoryview)[i % 3](chunk))
fd = os.open(sys.argv[3], os.O_WRONLY)
try:
    tracker = _write_behind.Tracker()
    half = len(pieces) // 3  # two jobs: the second starts where the first ended
    first = sum(sizes[:half])
    _write_behind.write(tracker, fd, pieces[:half], int(sys.argv[4]), first)
    _write_behind.write(tracker, fd, pieces[half:], int(sys.argv[4]) + first, len(payload) - first)
    _write_behind.settle(tracker)
finally:
    os.close(fd)
"""


def _sizes() -> list[int]:
    """3000 pieces: empty, 1-byte and up to 40 bytes, runs of empties between them."""
    return [0 if i % 11 in (3, 4) else (i * 7919) % 41 for i in range(3000)]


def _preload(tmp_path: Path) -> Path:
    """The interposer, built with the compiler the C modules were built with (Python's ``CC``)."""
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    if not cc or shutil.which(cc[0]) is None:
        pytest.fail(f"no C compiler ({cc[:1]}) on PATH: the short-pwritev interposer cannot be built")
    so = tmp_path / "short.so"
    subprocess.run(
        [*cc, "-shared", "-fPIC", "-O1", "-o", str(so), str(HERE / "short_pwritev.c"), "-ldl"], check=True
    )
    return so


def _run_child(tmp_path: Path, so: Path, payload: bytes, max_bytes: int | None) -> tuple[bytes, int]:
    """The file's bytes after the child wrote ``payload``, and how many pwritev calls it made."""
    source, target, mark = tmp_path / "payload", tmp_path / "target", tmp_path / "mark"
    source.write_bytes(payload)
    target.write_bytes(PREFIX)
    mark.unlink(missing_ok=True)
    env = {**os.environ, "LD_PRELOAD": str(so), "SHORT_PWRITEV_MARK": str(mark)}
    env.pop("SHORT_PWRITEV_MAX", None)
    if max_bytes is not None:
        env["SHORT_PWRITEV_MAX"] = str(max_bytes)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(_sizes()), str(source), str(target), str(OFFSET)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return target.read_bytes(), mark.stat().st_size if mark.exists() else 0


def test_short_pwritev_writes_continue_past_what_went(tmp_path: Path) -> None:
    try:
        from formats import _write_thread  # noqa: F401 - the module under test must be built
    except ImportError as exc:
        pytest.fail(f"formats._write_thread is not built ({exc}): its short-write path goes untested")
    so = _preload(tmp_path)
    sizes = _sizes()
    payload = bytes((i * 31 + i // 256) % 256 for i in range(sum(sizes)))
    assert len(sizes) > 1024 and 0 in sizes and 1 in sizes and max(sizes) > MAX

    written, calls = _run_child(tmp_path, so, payload, MAX)
    assert written == PREFIX + payload  # every byte once, in order, at its offset
    assert calls >= len(payload) / MAX - 1  # the interposer ran and every write was short

    whole, whole_calls = _run_child(tmp_path, so, payload, None)  # the same writes, not cut short
    assert whole == PREFIX + payload
    assert 0 < whole_calls < calls
