"""The archive side of replay: which committed files to read, in which order, and their records.

Files are found through the reader's layout contract (:func:`spark_reader.catalog.list_files`):
only keys that parse as final data keys of the layout are listed, so staging, ``.temp-upload`` and
index objects are never read, and a listed file is whole (the sink makes a file visible
atomically under its final key). Files are ordered by topic, partition and offset, so records come
back in offset order per source partition (with PARTITIONBY, in the order of each file's last
offset; see docs/replay.md).

Each format is decoded with an independent library (json, fastavro, pyarrow, csv), never with
our writers. What a record keeps depends on the file: an envelope keeps key, value, headers,
timestamp, partition and offset; without one only the value comes back, and the partition and
offsets from the file's name.
"""

from __future__ import annotations

import base64
import csv
import gzip
import io
import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from kcql.errors import SinkError
from kcql.model import StoreFormat
from kcql.replay import ReplayPlan
from spark_reader.catalog import DataFile, list_files
from spark_reader.storage import StorageSettings, open_store
from spark_reader.stream import record_offsets

__all__ = ["ArchiveError", "ArchivedRecord", "decode_file", "list_committed", "read_records"]

_GZIP_MAGIC = b"\x1f\x8b"


class ArchiveError(SinkError):
    """A committed file cannot be decoded (names the file and the format)."""


@dataclass(frozen=True, slots=True)
class ArchivedRecord:
    """One archived record as the file keeps it (values decoded, not yet serialised)."""

    topic: str
    partition: int
    offset: int | None
    key: Any = None
    value: Any = None
    headers: tuple[tuple[str, Any], ...] = ()
    timestamp: int | None = None
    has_key: bool = False
    """True when the file kept the key (envelope with the key field)."""
    key_schema: Any = None
    value_schema: Any = None
    """The Avro schemas of key and value when the file is AVRO (its writer schema), else None."""


def list_committed(plan: ReplayPlan, storage: StorageSettings) -> list[DataFile]:
    """The plan's committed files, sorted by topic, partition and offset."""
    files = list_files(plan.layout, storage, topic=plan.source_topic)
    return files


def read_records(plan: ReplayPlan, storage: StorageSettings, f: DataFile) -> list[ArchivedRecord]:
    """Every record of committed file ``f``, in file order."""
    data = open_store(storage).read(plan.bucket, f.key)
    return decode_file(plan, f, data)


def decode_file(plan: ReplayPlan, f: DataFile, data: bytes) -> list[ArchivedRecord]:
    """Decode the bytes of ``f`` into records.

    Raises:
        ArchiveError: naming the file when it does not decode as the statement's format.
    """
    fmt = plan.layout.format
    name = f"{plan.bucket}/{f.key}"
    try:
        rows, schema = _rows(data, fmt)
    except (ValueError, TypeError, KeyError, OSError, EOFError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise ArchiveError(f"cannot decode {name} as {fmt.value}: {exc}") from exc
    envelope = plan.layout.envelope is not None
    offsets = record_offsets(f, len(rows), rows, envelope, contiguous=not plan.layout.partition_by)
    key_schema = _field_schema(schema, "key") if envelope else None
    value_schema = _field_schema(schema, "value") if envelope else schema
    out: list[ArchivedRecord] = []
    for row, offset in zip(rows, offsets, strict=True):
        if envelope:
            rec = _from_envelope(row, f, offset, fmt, name)
            out.append(replace(rec, key_schema=key_schema, value_schema=value_schema) if schema else rec)
        else:
            out.append(ArchivedRecord(f.topic, f.partition, offset, value=row, value_schema=value_schema))
    return out


def _field_schema(schema: Any, name: str) -> Any:
    """The type of envelope field ``name``, without the ``null`` branch the envelope added."""
    if not isinstance(schema, dict):
        return None
    for fld in schema.get("fields", ()):
        if fld.get("name") == name:
            typ = fld["type"]
            if isinstance(typ, list):
                branches = [b for b in typ if b != "null"]
                return branches[0] if len(branches) == 1 else branches
            return typ
    return None


def _rows(data: bytes, fmt: StoreFormat) -> tuple[list[Any], Any]:
    """The file's rows, and its Avro writer schema when it is AVRO."""
    if fmt == StoreFormat.PARQUET:
        table = pq.read_table(pa.BufferReader(data))
        return table.to_pylist(), None
    if fmt == StoreFormat.BYTES:
        return [data], None
    if data[:2] == _GZIP_MAGIC:
        data = gzip.decompress(data)
    if fmt == StoreFormat.AVRO:
        reader = fastavro.reader(io.BytesIO(data))
        records: list[Any] = list(reader)
        # the schema as written (names as given), not fastavro's parsed form
        return records, json.loads(reader.metadata["avro.schema"])
    if fmt == StoreFormat.JSON:
        return [json.loads(line) for line in data.decode("utf-8").splitlines() if line.strip()], None
    if fmt == StoreFormat.TEXT:
        return data.decode("utf-8").splitlines(), None
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    if fmt == StoreFormat.CSV_WITHHEADERS:
        if not rows:
            return [], None
        header, body = rows[0], rows[1:]
        return [dict(zip(header, r, strict=False)) for r in body], None
    return list(rows), None


def _from_envelope(row: Any, f: DataFile, offset: int | None, fmt: StoreFormat, name: str) -> ArchivedRecord:
    if not isinstance(row, dict):
        raise ArchiveError(f"{name}: an envelope row is not an object: {str(row)[:80]!r}")
    found = row.get("metadata")
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    key = row.get("key")
    value = row.get("value")
    if fmt == StoreFormat.JSON:
        # Lenses/Jackson write byte arrays base64 with a `<field>IsArray` flag
        if row.get("keyIsArray") and isinstance(key, str):
            key = base64.b64decode(key)
        if row.get("valueIsArray") and isinstance(value, str):
            value = base64.b64decode(value)
        headers = _json_headers(row.get("headers"))
    else:
        headers = _entry_headers(row.get("headers"))
    ts = meta.get("timestamp")
    partition = meta.get("partition")
    return ArchivedRecord(
        topic=str(meta.get("topic") or f.topic),
        partition=int(partition) if partition is not None else f.partition,
        offset=offset,
        key=key,
        value=value,
        headers=headers,
        timestamp=int(ts) if ts is not None else None,
        has_key="key" in row,
    )


def _json_headers(obj: Any) -> tuple[tuple[str, Any], ...]:
    """Lenses' JSON header object back to (name, value) pairs; a list holds a repeated name's values."""
    if not isinstance(obj, dict):
        return ()
    out: list[tuple[str, Any]] = []
    for hname, hvalue in obj.items():
        if isinstance(hvalue, list):
            out.extend((hname, v) for v in hvalue)
        else:
            out.append((hname, hvalue))
    return tuple(out)


def _entry_headers(entries: Any) -> tuple[tuple[str, Any], ...]:
    """AVRO/PARQUET header entries ``[{name, value, value_bytes}]`` back to (name, value) pairs."""
    if not isinstance(entries, Sequence):
        return ()
    out: list[tuple[str, Any]] = []
    for e in entries:
        if not isinstance(e, dict):
            continue
        raw = e.get("value_bytes")
        out.append((str(e.get("name")), bytes(raw) if raw is not None else e.get("value")))
    return tuple(out)
