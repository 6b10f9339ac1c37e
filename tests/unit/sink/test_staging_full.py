"""A full staging disk (ENOSPC injected into the staging file's writes): a clear, retriable error
naming the staging file, a broken file that is never committed, and exactly once after a replay."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import pytest

from kcql.model import FlushSettings
from sink.commit.staging import StagingFullError
from tests.batches import put_records
from tests.unit.sink.test_task import TP, _data, _json_ids, _plan, _start, rec


class _FullDisk:
    """Makes every staging-file write fail with ENOSPC while ``on`` is set (as a full disk would)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from formats._file import CountingFile

        self.on = False
        real_write = CountingFile.write
        disk = self

        def write(file: CountingFile, data: Any) -> int:
            if disk.on:
                raise OSError(errno.ENOSPC, "No space left on device")
            return real_write(file, data)

        monkeypatch.setattr(CountingFile, "write", write)


def test_enospc_names_the_staging_file_and_nothing_broken_is_committed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk = _FullDisk(monkeypatch)
    task = _start(tmp_path, _plan(flush=FlushSettings(count=5, size=10**9, interval=3600)))
    try:
        task.open([TP])
        put_records(task, [rec(i) for i in range(7)])  # 0-4 committed, 5-6 staged
        disk.on = True
        with pytest.raises(StagingFullError) as caught:
            put_records(task, [rec(i) for i in range(7, 9)])
        message = str(caught.value)
        assert str(tmp_path / "staging") in message and "No space left on device" in message
        assert "[Errno" not in message and caught.value.retriable and caught.value.errno == errno.ENOSPC
        with pytest.raises(StagingFullError):  # the broken file takes no more records...
            put_records(task, [rec(9)])
        task.close([TP])  # ...and is not committed on close: its records are replayed
        assert sorted(_json_ids(tmp_path)) == [0, 1, 2, 3, 4]
        disk.on = False  # space returns: the replay from the last commit
        resume = task.open([TP])
        assert resume == {TP: 5}
        put_records(task, [rec(i) for i in range(5, 10)])
        assert _json_ids(tmp_path) == dict.fromkeys(range(10), 1)
        assert len(_data(tmp_path)) == 2
    finally:
        task.stop()


def test_a_full_disk_at_start_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from sink.commit.staging import StagingArea

    def full(*_args: Any, **_kwargs: Any) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "open", full)
    with pytest.raises(StagingFullError) as caught:
        StagingArea(tmp_path / "staging", "conn", "task1")
    assert str(tmp_path / "staging" / "conn" / "task1") in str(caught.value)
