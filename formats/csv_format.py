"""STOREAS CSV and CSV_WITHHEADERS, written with the ``csv`` module (RFC 4180 quoting).

* Columns are the top-level field names of the first record's schema (a record schema), or the
  keys of the first value (schemaless dicts). CSV_WITHHEADERS writes them as the first line.
* Cells: strings as is; ``None`` an empty cell (CSV cannot tell null from ""); booleans
  ``true``/``false``; numbers and decimals in plain notation; timestamps ISO-8601 UTC with
  milliseconds (``2024-03-01T12:30:45.123Z``); dates ``2024-03-01``; times ``12:30:45.123000``; UUIDs in
  their canonical text; bytes base64; nested structs,
  arrays and maps as compact JSON text (the same encoding as STOREAS JSON), so no information is
  flattened away and Spark can ``from_json`` them.
* Fields containing the delimiter, quotes or line breaks are quoted (``"`` doubled inside); lines
  end with ``\\n``.
* The value must be a struct/dict; anything else (including tombstones) raises
  :class:`RecordFormatError`.
* Schema changes roll a new file like AVRO/PARQUET (the header would be wrong otherwise): with
  schemas, per ``schema.compatibility`` (see :mod:`formats.schema_evolution`; projected records
  get empty cells for missing columns); schemaless, a dict whose keys differ from the columns
  starts a new file under NONE, and under the other modes only when it has a key that is not a
  column.
"""

from __future__ import annotations

import base64
import csv
import io
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import Any

from formats._file import StagingWriter
from formats._unicode import surrogate_error, value_surrogate
from formats.avro_schemas import non_null_branch
from formats.base import (
    Batch,
    FileFormat,
    FormatSettings,
    FormatWriter,
    PartSink,
    Record,
    RecordFormatError,
)
from formats.json_values import dumps
from formats.schema_evolution import Decision, SchemaEvolution
from kcql.model import StoreFormat

__all__ = ["CsvFormat", "CsvWriter"]


def _cell(value: Any) -> Any:
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return value
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date | time):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(value).decode("ascii")
    return dumps(value)


class CsvWriter(StagingWriter):
    """Writes one CSV row per record value."""

    def __init__(
        self, path: Path, settings: FormatSettings, headers: bool, spill: PartSink | None = None
    ) -> None:
        super().__init__(path, spill)
        self._headers = headers
        self._format_name = "CSV_WITHHEADERS" if headers else "CSV"
        self._mode = (settings.schema_compatibility or "NONE").upper()
        self._evolution = SchemaEvolution(self._mode)
        self._columns: tuple[str, ...] | None = None
        self._column_set: frozenset[str] = frozenset()
        self._schemaless: bool | None = None
        self._buffer = io.StringIO()
        self._csv = csv.writer(self._buffer, lineterminator="\n", quoting=csv.QUOTE_MINIMAL)

    def _fits(self, record: Record, value: dict[str, Any]) -> bool:
        schema = record.value_schema
        if self._columns is None:
            inner = non_null_branch(schema)
            if isinstance(inner, dict) and inner.get("type") == "record":
                self._columns = tuple(f["name"] for f in inner["fields"])
                self._schemaless = False
                self._evolution.decide(schema)
            else:
                self._columns = tuple(value)
                self._schemaless = True
            self._column_set = frozenset(self._columns)
            return True
        if schema is not None:
            return not self._schemaless and self._evolution.decide(schema) is not Decision.ROLL
        if not self._schemaless:
            return False
        if self._mode == "NONE":
            return len(value) == len(self._columns) and value.keys() == self._column_set
        return value.keys() <= self._column_set

    def append(self, batch: Batch) -> int:
        return self._write_records(batch.records())

    def _write_records(self, records: Sequence[Record]) -> int:
        written = 0
        rows: list[list[Any]] = []
        if self._headers and self._count == 0 and records and isinstance(records[0].value, dict):
            header_pending = True
        else:
            header_pending = False
        try:
            for index, record in enumerate(records):
                value = record.value
                if not isinstance(value, dict):
                    kind = "a null value (tombstone)" if value is None else f"a {type(value).__name__}"
                    raise RecordFormatError(
                        f"STOREAS CSV needs a struct value (columns are its fields), got {kind}",
                        record,
                        index,
                    )
                bad = value_surrogate(record)
                if bad is not None:
                    raise surrogate_error(record, index, "value", bad, self._format_name)
                if not self._fits(record, value):
                    break
                rows.append([_cell(value.get(c)) for c in self._columns or ()])
                written += 1
        finally:
            if rows:
                if header_pending and self._columns is not None:
                    self._csv.writerow(self._columns)
                self._csv.writerows(rows)
                self._file.write(self._buffer.getvalue().encode("utf-8"))
                self._buffer.seek(0)
                self._buffer.truncate()
                self._count += len(rows)
        return written


class CsvFormat(FileFormat):
    """CSV (``csv`` extension), with a header line for CSV_WITHHEADERS."""

    def open(self, path: Path, spill: PartSink | None = None) -> FormatWriter:
        return CsvWriter(path, self.settings, self.settings.format is StoreFormat.CSV_WITHHEADERS, spill)
