"""A PySpark Python data source over one view's committed files (S3 storage, Avro, TEXT, BYTES).

Why a Python data source: the hadoop-aws and spark-avro jars are not available (nothing may be
downloaded at run time), so S3 objects and Avro files are read in the Python workers with boto3
and fastavro/pyarrow and handed to Spark as Arrow record batches.

Each query lists the committed files afresh in ``partitions()`` (so new commits become visible to
the next query, and a query never sees a file that is not complete under its final key), prunes
them with the filters Spark pushes down on partition columns, and plans one input partition per
group of files.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualNullSafe,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    IsNull,
    LessThan,
    LessThanOrEqual,
    Not,
    StringContains,
    StringEndsWith,
    StringStartsWith,
)
from pyspark.sql.types import StructType

from kcql.model import SinkPlan
from spark_reader.catalog import DataFile, PartitionColumn, ViewSpec, list_files
from spark_reader.records import conform, read_table
from spark_reader.storage import open_store

__all__ = ["METADATA_COLUMNS", "file_columns", "make_source", "metadata_arrow_fields"]

log = logging.getLogger(__name__)

METADATA_COLUMNS = ("_topic", "_partition", "_file_first_offset", "_file_last_offset", "_file")
"""Columns every view has: the record's topic and partition, its file's offset range and key."""

_PARTITION_BYTES = 64 * 1024 * 1024
_PARTITION_FILES = 64


def metadata_arrow_fields() -> list[pa.Field]:
    return [
        pa.field("_topic", pa.string()),
        pa.field("_partition", pa.int32()),
        pa.field("_file_first_offset", pa.int64()),
        pa.field("_file_last_offset", pa.int64()),
        pa.field("_file", pa.string()),
    ]


def file_columns(f: DataFile, pcols: Sequence[PartitionColumn]) -> dict[str, Any]:
    """The per-file constant columns (metadata and partition values) of ``f``."""
    row: dict[str, Any] = {
        "_topic": f.topic,
        "_partition": f.partition,
        "_file_first_offset": f.first_offset,
        "_file_last_offset": f.last_offset,
        "_file": f.key,
    }
    for c in pcols:
        value = f.values[c.index] if c.index < len(f.values) else None
        if c.integer and value is not None:
            try:
                row[c.column] = int(value)
            except ValueError:
                row[c.column] = None
        else:
            row[c.column] = value
    return row


def _matches(flt: Filter, row: dict[str, Any]) -> bool:
    """Evaluate a pushed filter against a file's constant columns (SQL semantics: NULL never matches)."""
    if isinstance(flt, Not):
        inner = flt.child
        value = row.get(getattr(inner, "attribute", ("",))[0])
        if value is None and not isinstance(inner, IsNull | IsNotNull):
            return False
        return not _matches(inner, row)
    value = row.get(getattr(flt, "attribute", ("",))[0])
    if isinstance(flt, IsNull):
        return value is None
    if isinstance(flt, IsNotNull):
        return value is not None
    if isinstance(flt, EqualNullSafe):
        return value == flt.value
    if value is None:
        return False
    try:
        if isinstance(flt, EqualTo):
            return value == flt.value
        if isinstance(flt, In):
            return value in flt.value
        if isinstance(flt, GreaterThan):
            return value > flt.value
        if isinstance(flt, GreaterThanOrEqual):
            return value >= flt.value
        if isinstance(flt, LessThan):
            return value < flt.value
        if isinstance(flt, LessThanOrEqual):
            return value <= flt.value
        if isinstance(flt, StringStartsWith):
            return str(value).startswith(flt.value)
        if isinstance(flt, StringEndsWith):
            return str(value).endswith(flt.value)
        if isinstance(flt, StringContains):
            return flt.value in str(value)
    except TypeError:
        return True  # incomparable literal: keep the file, Spark evaluates the filter itself
    return True


def _source_paths(plan: SinkPlan, pcols: Sequence[PartitionColumn]) -> dict[tuple[str, ...], PartitionColumn]:
    """Column paths of the fields PARTITIONBY entries were taken from, in the view's schema."""
    out: dict[tuple[str, ...], PartitionColumn] = {}
    for fld, col in zip(plan.partition_by or (), pcols, strict=False):
        if fld.kind == "value" and fld.path:
            out[(*(("value",) if plan.envelope is not None else ()), *fld.path)] = col
        elif fld.kind == "key" and plan.envelope is not None:
            out[("key", *fld.path)] = col
    return out


def _is_text_match(flt: Filter) -> bool:
    if isinstance(flt, EqualTo):
        return isinstance(flt.value, str)
    if isinstance(flt, In):
        return all(isinstance(v, str) for v in flt.value)
    return False


def _value_at(f: DataFile, col: PartitionColumn) -> str | None:
    return f.values[col.index] if col.index < len(f.values) else None


def _text_matches(flt: Filter, rendered: str | None) -> bool:
    """Whether a file whose directory shows ``rendered`` can hold rows passing ``flt``."""
    if isinstance(flt, EqualTo):
        return rendered == flt.value
    if isinstance(flt, In):
        return rendered in flt.value
    return True


class _Reader(DataSourceReader):
    def __init__(self, source: type[KcqlSinkSource]) -> None:
        self.spec: ViewSpec = source.spec
        self.pcols: tuple[PartitionColumn, ...] = source.partition_cols
        self.value_schema: pa.Schema = source.value_schema
        self.out_schema: pa.Schema = source.arrow_schema
        self.scan_log: str | None = source.scan_log
        self._files: tuple[DataFile, ...] | None = source.files
        self.filters: list[Filter] = []
        self.derived: list[tuple[Filter, PartitionColumn]] = []

    def pushFilters(self, filters: list[Filter]) -> Iterable[Filter]:
        """Keep filters usable for pruning; Spark still re-checks every filter on the rows.

        Filters on per-file columns (partition columns, ``_topic``...) prune exactly. A string
        equality on the value field a PARTITIONBY entry came from (``WHERE region = 'eu'`` with
        ``PARTITIONBY region``) also prunes, because the directory holds that field's text.
        """
        constant = {*METADATA_COLUMNS, *(c.column for c in self.pcols)}
        sources = _source_paths(self.spec.plan, self.pcols)
        for flt in filters:
            child = flt.child if isinstance(flt, Not) else flt
            attr = tuple(getattr(child, "attribute", ()))
            if len(attr) == 1 and attr[0] in constant:
                self.filters.append(flt)
            elif attr in sources and _is_text_match(flt):
                self.derived.append((flt, sources[attr]))
            yield flt

    def _pinned(self, column: str) -> Any:
        for flt in self.filters:
            if isinstance(flt, EqualTo) and flt.attribute == (column,):
                return flt.value
        return None

    def __getstate__(self) -> dict[str, Any]:
        # The reader is pickled into every read task before partitions() runs; the file list is
        # only needed for planning, so it does not travel with the tasks.
        state = dict(self.__dict__)
        state["_files"] = None
        return state

    def partitions(self) -> Sequence[InputPartition]:
        topic = self._pinned("_topic")
        partition = self._pinned("_partition")
        if self._files is not None:
            files = [
                f
                for f in self._files
                if (not isinstance(topic, str) or f.topic == topic)
                and (not isinstance(partition, int) or f.partition == partition)
            ]
        else:
            files = list_files(
                self.spec.plan,
                self.spec.storage,
                topic=topic if isinstance(topic, str) else None,
                partition=partition if isinstance(partition, int) else None,
            )
        selected = [
            f
            for f in files
            if all(_matches(flt, file_columns(f, self.pcols)) for flt in self.filters)
            and all(_text_matches(flt, _value_at(f, col)) for flt, col in self.derived)
        ]
        log.debug("view %s: %d of %d files after pruning", self.spec.name, len(selected), len(files))
        if self.scan_log:
            with Path(self.scan_log).open("a", encoding="utf-8") as fh:
                pushed = "; ".join(
                    [*map(repr, self.filters), *(f"{flt!r} via {c.column}" for flt, c in self.derived)]
                )
                fh.write(
                    "\t".join([self.spec.name, uuid.uuid4().hex, pushed, *(f.key for f in selected)]) + "\n"
                )
        groups: list[InputPartition] = []
        batch: list[DataFile] = []
        size = 0
        for f in selected:
            if batch and (size + f.size > _PARTITION_BYTES or len(batch) >= _PARTITION_FILES):
                groups.append(InputPartition(tuple(batch)))
                batch, size = [], 0
            batch.append(f)
            size += f.size
        if batch:
            groups.append(InputPartition(tuple(batch)))
        return groups

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        store = open_store(self.spec.storage)
        plan = self.spec.plan
        for f in partition.value:
            data = store.read(plan.bucket, f.key)
            table = conform(read_table(data, plan.format, name=f"{plan.bucket}/{f.key}"), self.value_schema)
            consts = file_columns(f, self.pcols)
            n = table.num_rows
            for fld in self.out_schema:
                if fld.name in consts and fld.name not in table.column_names:
                    table = table.append_column(fld, pa.array([consts[fld.name]] * n, fld.type))
            yield from table.select(self.out_schema.names).cast(self.out_schema).to_batches()


class KcqlSinkSource(DataSource):
    """Base of the per-view data sources; :func:`make_source` subclasses it with the view's spec.

    The spec travels inside the (cloudpickled) class rather than in string options so that S3
    credentials never appear in query plans or logs.
    """

    spec: ClassVar[ViewSpec]
    partition_cols: ClassVar[tuple[PartitionColumn, ...]] = ()
    value_schema: ClassVar[pa.Schema]
    arrow_schema: ClassVar[pa.Schema]
    spark_schema: ClassVar[StructType]
    source_name: ClassVar[str] = "kcql_sink"
    scan_log: ClassVar[str | None] = None
    files: ClassVar[tuple[DataFile, ...] | None] = None
    """The committed files when the view was registered (the view's snapshot); ``None`` lists on
    every planning instead."""

    @classmethod
    def name(cls) -> str:
        return cls.source_name

    def schema(self) -> StructType:
        return self.spark_schema

    def reader(self, schema: StructType) -> DataSourceReader:
        return _Reader(type(self))


def make_source(
    spec: ViewSpec,
    value_schema: pa.Schema,
    pcols: Sequence[PartitionColumn],
    *,
    scan_log: str | None = None,
    files: Sequence[DataFile] | None = None,
) -> type[KcqlSinkSource]:
    """A data source class for ``spec``; register it with ``spark.dataSource.register``.

    With ``files`` the view is a snapshot of those files (Spark caches a relation's planned
    partitions anyway, so a view could not see later commits reliably; re-register instead).
    """
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    fields = list(value_schema)
    fields += [f for f in metadata_arrow_fields() if f.name not in value_schema.names]
    fields += [pa.field(c.column, pa.int64() if c.integer else pa.string()) for c in pcols]
    spark_schema = from_arrow_schema(pa.schema(fields), prefer_timestamp_ntz=False)
    arrow_schema = to_arrow_schema(spark_schema, timezone="UTC")
    value_names = set(value_schema.names)
    conformed_values = pa.schema([f for f in arrow_schema if f.name in value_names])
    name = f"kcql_sink_{spec.name}_{uuid.uuid4().hex[:8]}"
    attrs = {
        "spec": spec,
        "partition_cols": tuple(pcols),
        "value_schema": conformed_values,
        "arrow_schema": arrow_schema,
        "spark_schema": spark_schema,
        "source_name": name,
        "scan_log": scan_log,
        "files": tuple(files) if files is not None else None,
        "__module__": __name__,
        "__qualname__": f"_dynamic.{name}",
    }
    return type(name, (KcqlSinkSource,), attrs)
