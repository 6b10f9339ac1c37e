"""Spilling: a file handed away in parts while it is written is the same file, byte for byte.

Each format writes the same records twice, once with a :class:`PartSink` of a small part size
and once without; the parts followed by what is left locally must equal the unspilled file, and
the reassembled file must read back with the independent reader. The local file must never hold
a part's worth after a write returns (that is what bounds local staging).
"""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import BinaryIO

import fastavro
import fastavro._write
import pyarrow.parquet as pq
import pytest

from formats import FormatError, FormatSettings, get_format
from formats._file import CountingFile
from kcql.model import StoreFormat
from tests.unit.formats.records import append, orders, record

N = 5000


class Parts:
    """A PartSink that keeps the parts in memory and checks every hand-over."""

    def __init__(self, part_size: int, local: Path) -> None:
        self.part_size = part_size
        self.local = local
        self.parts: list[bytes] = []
        self.fail = False

    def upload_part(self, data: BinaryIO, size: int) -> None:
        assert size >= self.part_size
        assert self.local.stat().st_size == size  # the whole local file, flushed
        if self.fail:
            raise OSError("storage is down")
        chunk = data.read(size)
        assert len(chunk) == size
        self.parts.append(chunk)


CASES = [
    ("json", FormatSettings(format=StoreFormat.JSON), "orders"),
    # deflate emits output in large steps: enough records for several of them
    ("json-gzip", FormatSettings(format=StoreFormat.JSON, codec="GZIP"), "numbered"),
    ("avro", FormatSettings(format=StoreFormat.AVRO), "orders"),
    ("avro-deflate", FormatSettings(format=StoreFormat.AVRO, codec="DEFLATE"), "orders"),
    ("parquet", FormatSettings(format=StoreFormat.PARQUET), "orders"),
    ("parquet-snappy", FormatSettings(format=StoreFormat.PARQUET, codec="SNAPPY"), "orders"),
    ("csv", FormatSettings(format=StoreFormat.CSV_WITHHEADERS), "flat"),
    ("text", FormatSettings(format=StoreFormat.TEXT), "text"),
]


def _records(kind: str, n: int) -> list:  # type: ignore[type-arg]
    if kind == "orders":
        return orders(n)
    if kind == "numbered":
        return [record(i, {"id": i, "hash": (i * 2654435761) % 10**12}) for i in range(n * 10)]
    if kind == "flat":
        return [record(i, {"id": i, "name": f"name-{i}" * 3}) for i in range(n)]
    return [record(i, f"line {i} " + "x" * (i % 50)) for i in range(n)]


def _write(path: Path, settings: FormatSettings, kind: str, spill: Parts | None) -> int:
    """Write the records in batches of 100; returns the most the local file held after a batch."""
    writer = get_format(settings).open(path, spill)
    records = _records(kind, N)
    most = 0
    for start in range(0, len(records), 100):
        assert append(writer, records[start : start + 100]) == len(records[start : start + 100])
        most = max(most, path.stat().st_size)
    writer.close()
    return most


@pytest.mark.parametrize(("name", "settings", "kind"), CASES, ids=[c[0] for c in CASES])
def test_spilled_parts_and_the_local_rest_are_the_unspilled_file(
    tmp_path: Path, name: str, settings: FormatSettings, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # an Avro file's sync marker is random: the same one in both files, so the bytes can match
    monkeypatch.setattr(fastavro._write, "urandom", lambda n: b"\x5a" * n)
    plain = tmp_path / f"plain.{name}"
    _write(plain, settings, kind, None)
    whole = plain.read_bytes()
    part_size = max(1024, len(whole) // 7)  # several parts, whatever the encoding's size

    spilled = tmp_path / f"spilled.{name}"
    parts = Parts(part_size, spilled)
    most = _write(spilled, settings, kind, parts)

    assert len(parts.parts) >= 2, f"{name}: {len(whole)} bytes gave {len(parts.parts)} parts"
    assert b"".join(parts.parts) + spilled.read_bytes() == whole
    assert most < part_size, "the local file held a part's worth after a write returned"
    _read_back(name, b"".join(parts.parts) + spilled.read_bytes(), tmp_path)


def _read_back(name: str, data: bytes, tmp_path: Path) -> None:
    """The reassembled file through an independent reader (the record count is what matters)."""
    if name.startswith("json"):
        text = gzip.decompress(data) if name == "json-gzip" else data
        assert len([json.loads(line) for line in text.splitlines()]) == (N * 10 if name == "json-gzip" else N)
    elif name.startswith("avro"):
        assert sum(1 for _ in fastavro.reader(io.BytesIO(data))) == N
    elif name.startswith("parquet"):
        assert pq.read_table(io.BytesIO(data)).num_rows == N
    elif name == "csv":
        assert len(data.decode().splitlines()) == N + 1  # header + rows
    else:
        assert len(data.decode().splitlines()) == N


def test_a_single_bytes_value_larger_than_a_part_is_one_part(tmp_path: Path) -> None:
    path = tmp_path / "x.bytes"
    parts = Parts(1000, path)
    writer = get_format(FormatSettings(format=StoreFormat.BYTES)).open(path, parts)
    value = bytes(range(256)) * 20
    assert append(writer, [record(0, value)]) == 1
    writer.close()
    assert parts.parts == [value]
    assert path.read_bytes() == b""
    assert writer.bytes_written == len(value)


def test_counts_cover_the_whole_file_and_a_failed_hand_over_keeps_the_bytes(tmp_path: Path) -> None:
    path = tmp_path / "f"
    parts = Parts(10, path)
    counting = CountingFile(path.open("wb"), path, parts)
    counting.write(b"12345")
    assert (counting.count, counting.spilled, parts.parts) == (5, 0, [])
    counting.write(b"67890ab")  # 12 bytes local: one part
    assert (counting.count, counting.spilled, parts.parts) == (12, 12, [b"1234567890ab"])
    assert counting.tell() == 12
    parts.fail = True
    with pytest.raises(OSError, match="storage is down"):
        counting.write(b"cdefghijkl")
    assert path.read_bytes() == b"cdefghijkl"  # not lost: the file is discarded by the caller
    assert (counting.count, counting.spilled) == (22, 12)
    counting.fsync_close()


def test_a_spilling_file_needs_its_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="path"):
        CountingFile(io.BytesIO(), None, Parts(10, tmp_path / "f"))


def test_a_close_that_failed_fails_again_instead_of_passing_an_incomplete_file(tmp_path: Path) -> None:
    # the last part fails at close (the JSON writer's last write spills): a retried commit calls
    # close again and must not get a "finished" file whose tail never went anywhere
    path = tmp_path / "x.json"
    parts = Parts(1024, path)
    writer = get_format(FormatSettings(format=StoreFormat.JSON, codec="GZIP")).open(path, parts)
    append(writer, _records("numbered", 5000))
    parts.fail = True
    with pytest.raises(OSError, match="storage is down"):
        writer.close()
    with pytest.raises(FormatError, match="could not be finished"):
        writer.close()
    writer.abort()  # still fine: the caller discards the file
