"""Importing ``sink`` makes Arrow's C++ default pool jemalloc, unless the user chose another.

Each case is a fresh interpreter: Arrow fixes its pool when pyarrow is imported, so the order of
imports is the thing under test. ``pyarrow.default_memory_pool()`` names the pool Arrow's C++
code (the Parquet encoder among it) allocates from.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from sink.arrow_allocator import ENV

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="chosen on Linux only")

_BACKEND = "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"


def _backend(imports: str, chosen: str | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    if chosen is not None:
        env[ENV] = chosen
    done = subprocess.run(
        [sys.executable, "-c", f"{imports}; {_BACKEND}"], capture_output=True, text=True, env=env, check=True
    )
    return done.stdout.strip()


def test_sink_chooses_jemalloc_before_pyarrow_is_loaded() -> None:
    assert _backend("import pyarrow as first") != "jemalloc"  # pyarrow's own default (mimalloc)
    assert _backend("import sink") == "jemalloc"
    assert _backend("import sink.cli") == "jemalloc"  # the `kcql-sink` entry point


def test_a_users_choice_is_kept() -> None:
    assert _backend("import sink", chosen="system") == "system"
    assert _backend("import sink", chosen="mimalloc") == "mimalloc"


def test_a_process_that_loaded_pyarrow_first_is_left_alone() -> None:
    """Setting the variable then would change nothing in Arrow but would reach child processes."""
    code = "import os, pyarrow; import sink; print(os.environ.get('ARROW_DEFAULT_MEMORY_POOL'))"
    env = {k: v for k, v in os.environ.items() if k != ENV}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "None"
