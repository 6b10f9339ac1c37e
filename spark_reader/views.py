"""Register one Spark temporary view per KCQL statement over the sink's committed output.

Local Parquet, JSON and CSV output is read by Spark's own file readers over the listed committed
files; everything else (S3 storage, Avro, TEXT, BYTES) goes through the Python data source in
:mod:`spark_reader.datasource`. Either way the view has the same columns: the value's fields (the
whole envelope in envelope mode), ``_topic``, ``_partition``, ``_file_first_offset``,
``_file_last_offset``, ``_file`` and one column per PARTITIONBY field.
"""

from __future__ import annotations

import functools
import logging
import os
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import pyarrow as pa

from kcql.model import SinkPlan, StoreFormat
from spark_reader.catalog import (
    DataFile,
    PartitionColumn,
    ViewSpec,
    list_files,
    partition_columns,
    view_specs,
)
from spark_reader.datasource import METADATA_COLUMNS, file_columns, make_source
from spark_reader.records import read_table
from spark_reader.storage import open_store

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["NATIVE_FORMATS", "register", "view_frames"]

log = logging.getLogger(__name__)

NATIVE_FORMATS = (StoreFormat.PARQUET, StoreFormat.JSON, StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS)
"""Formats Spark reads natively from local storage (no jar needed)."""

_SCHEMA_SAMPLE = 3


def register(
    spark: SparkSession,
    config: Mapping[str, Any],
    *,
    plans: Sequence[SinkPlan] | None = None,
    views: Mapping[str, str] | None = None,
    native: bool | None = None,
    scan_log: str | None = None,
) -> dict[str, str]:
    """Register a temporary view per KCQL statement of ``config``; returns view name → description.

    Args:
        spark: the session to register the views in.
        config: the sink's Connect config (``connect.s3.kcql`` plus storage keys), or KCQL under
            ``kcql`` plus storage keys. A ``views`` entry may rename views.
        plans: already compiled plans, instead of compiling the config's KCQL.
        views: default view name, topic or ``bucket:prefix`` → view name.
        native: force (True) or forbid (False) Spark's native readers for local Parquet/JSON/CSV;
            ``None`` uses them whenever possible.
        scan_log: a file to which the Python data source appends the keys each scan plans to read
            (for auditing which files a query touched; pruning tests use it).
    """
    frames = view_frames(spark, config, plans=plans, views=views, native=native, scan_log=scan_log)
    out: dict[str, str] = {}
    for name, (df, description) in frames.items():
        df.createOrReplaceTempView(name)
        out[name] = description
    return out


def view_frames(
    spark: SparkSession,
    config: Mapping[str, Any],
    *,
    plans: Sequence[SinkPlan] | None = None,
    views: Mapping[str, str] | None = None,
    native: bool | None = None,
    scan_log: str | None = None,
) -> dict[str, tuple[DataFrame, str]]:
    """The DataFrames :func:`register` would register, without registering them."""
    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    out: dict[str, tuple[DataFrame, str]] = {}
    for spec in view_specs(config, plans=plans, views=views):
        files = list_files(spec.plan, spec.storage)
        use_native = (
            native is not False
            and spec.storage.kind == "local"
            and spec.plan.format in NATIVE_FORMATS
            and bool(files)
        )
        if native and not use_native:
            log.info(
                "view %s: native reader not possible (storage, format or no files); using Python reader",
                spec.name,
            )
        df = _native_frame(spark, spec, files) if use_native else _python_frame(spark, spec, files, scan_log)
        layout = _layout_name(spec.plan)
        where = f"{spec.storage.kind}:{spec.plan.bucket}/{spec.plan.prefix}".rstrip("/")
        out[spec.name] = (
            df,
            (
                f"{spec.plan.format.value} {layout} from {spec.plan.source} at {where} "
                f"({len(files)} files, {'spark native' if use_native else 'python'} reader)"
            ),
        )
    return out


def _layout_name(plan: SinkPlan) -> str:
    if plan.partition_by is None:
        return "NOPARTITION"
    if plan.partition_by == ():
        return "default layout"
    return (
        ("KeysAndValues" if plan.include_keys else "Values")
        + " PARTITIONBY "
        + ", ".join(f.spec for f in plan.partition_by)
    )


def _sample_schema(spec: ViewSpec, files: Sequence[DataFile]) -> pa.Schema:
    """The value schema, unified over the first and the newest files (enough for evolution by addition)."""
    if not files:
        return pa.schema([])
    picks = {0, len(files) - 1, *range(1, min(_SCHEMA_SAMPLE, len(files)))}
    store = open_store(spec.storage)
    schemas = []
    for i in sorted(picks):
        f = files[i]
        table = read_table(
            store.read(spec.plan.bucket, f.key), spec.plan.format, name=f"{spec.plan.bucket}/{f.key}"
        )
        schemas.append(pa.schema([_nullable(fld) for fld in table.schema]))
    try:
        return pa.unify_schemas(schemas, promote_options="permissive")
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return schemas[-1]


def _nullable(fld: pa.Field) -> pa.Field:
    """Spark-friendly field: nullable, no NULL type (all-null JSON fields), no dictionary encoding."""
    typ = fld.type
    if pa.types.is_dictionary(typ):
        typ = typ.value_type
    if pa.types.is_null(typ):
        typ = pa.string()
    if pa.types.is_large_string(typ):
        typ = pa.string()
    if pa.types.is_large_binary(typ):
        typ = pa.binary()
    return pa.field(fld.name, typ, nullable=True)


def _python_frame(
    spark: SparkSession, spec: ViewSpec, files: Sequence[DataFile], scan_log: str | None
) -> DataFrame:
    value_schema = _sample_schema(spec, files)
    pcols = partition_columns(spec.plan, files, taken=value_schema.names)
    source = make_source(spec, value_schema, pcols, scan_log=scan_log, files=files)
    spark.dataSource.register(source)
    return spark.read.format(source.source_name).load()


_GLOB = re.compile(r"([{}\[\]*?\\])")


def _glob_escape(path: str) -> str:
    """Spark globs load() paths; partition values like ``[missing]`` must not be read as patterns."""
    return _GLOB.sub(r"\\\1", path)


_FILE_NAME = "__kcql_sink_file_name"
"""A temporary column of the union branches of :func:`_native_frame` (dropped before the view sees it)."""


def _native_frame(spark: SparkSession, spec: ViewSpec, files: Sequence[DataFile]) -> DataFrame:
    """Spark's own file reader over the committed files, plus the per-file columns.

    Without PARTITIONBY fields the view is one scan over every file, as ``spark.read.parquet``
    would plan it (see :func:`_single_scan`). With PARTITIONBY fields it is a union of one scan
    per (topic, partition, partition values) group whose group columns are literals, so a filter
    on them folds to ``false`` for the groups it excludes and Spark's optimizer removes those
    scans: pruning at planning, visible in ``inputFiles()``, without a custom file index.
    """
    store = open_store(spec.storage)
    plan = spec.plan
    local = {f.key: str(store.path(plan.bucket, f.key)) for f in files}  # type: ignore[union-attr]
    paths = {key: _glob_escape(path) for key, path in local.items()}

    def reader() -> Any:
        r = spark.read
        if plan.format == StoreFormat.PARQUET:
            return r.format("parquet").option("mergeSchema", "true")
        if plan.format == StoreFormat.JSON:
            return r.format("json")
        return r.format("csv").option("header", str(plan.format == StoreFormat.CSV_WITHHEADERS).lower())

    whole = reader().load(list(paths.values()))
    schema = whole.schema
    pcols: list[PartitionColumn] = partition_columns(plan, files, taken=schema.fieldNames())
    if not pcols:
        single = _single_scan(whole, files, local, pcols)
        if single is not None:
            return single
        log.info("view %s: Spark names the files unexpectedly; one scan per directory instead", spec.name)
    return _union_of_scans(reader, schema, files, paths, pcols)


def _single_scan(
    df: DataFrame, files: Sequence[DataFile], local: Mapping[str, str], pcols: Sequence[PartitionColumn]
) -> DataFrame | None:
    """One scan over all files; the per-file columns are looked up by ``_metadata.file_path``.

    One scan lets Spark pack the files into as many splits as it has cores, where a union splits
    every branch on its own (more, smaller tasks: the benchmark's aggregate took up to 1.4x a
    plain ``spark.read.parquet`` as a union of three scans). The lookup is a literal map from
    Spark's path string to a struct of the file's columns; a query that uses none of them does
    not evaluate it (Spark still adds its metadata columns to the scan: no measurable cost
    there). A filter on them references only ``_metadata.file_path``, so Spark evaluates it per
    file before opening any (file pruning at execution, where the union pruned at planning:
    ``inputFiles()`` lists every file) and once more per row read. Returns ``None`` when Spark's
    file list cannot be matched to ``files``.
    """
    from pyspark.sql import functions as F

    # absolute and normalised without resolving symlinks, as Hadoop qualifies a local path
    by_path = {os.path.normpath(Path(local[f.key]).absolute()): f for f in files}
    matched: list[tuple[str, DataFile]] = []
    for uri in df.inputFiles():
        parts = urlsplit(uri)
        f = by_path.pop(os.path.normpath(unquote(parts.path)), None) if parts.scheme == "file" else None
        if f is None:
            return None
        matched.append((_spark_file_path(uri), f))
    if by_path:
        return None
    entries: list[Any] = []
    for file_path, f in matched:
        consts = file_columns(f, pcols)
        entries += [F.lit(file_path), F.struct(*_file_literals(consts, pcols))]
    file_path_col = F.col("_metadata.file_path")
    info = F.coalesce(
        F.element_at(F.create_map(*entries), file_path_col),
        # never reached unless Spark changes how it spells paths: fail rather than show NULLs
        F.raise_error(F.concat(F.lit("spark_reader: no committed file is named "), file_path_col)),
    )
    names = [*METADATA_COLUMNS, *(c.column for c in pcols)]
    return df.select("*", *(info.getField(name).alias(name) for name in names))


def _spark_file_path(uri: str) -> str:
    """``_metadata.file_path`` of the file ``inputFiles()`` lists as ``uri``.

    Spark builds ``file_path`` through a Hadoop ``Path`` string, which drops an empty authority
    (``file:///tmp/x`` becomes ``file:/tmp/x``) and keeps the path's percent-encoding.
    """
    parts = urlsplit(uri)
    authority = f"//{parts.netloc}" if parts.netloc else ""
    return f"{parts.scheme}:{authority}{parts.path}"


def _file_literals(consts: Mapping[str, Any], pcols: Sequence[PartitionColumn]) -> list[Any]:
    """The per-file columns as typed literals, in view order."""
    from pyspark.sql import functions as F

    cols = [
        F.lit(consts["_topic"]).cast("string").alias("_topic"),
        F.lit(consts["_partition"]).cast("int").alias("_partition"),
        F.lit(consts["_file_first_offset"]).cast("bigint").alias("_file_first_offset"),
        F.lit(consts["_file_last_offset"]).cast("bigint").alias("_file_last_offset"),
        F.lit(consts["_file"]).cast("string").alias("_file"),
    ]
    cols += [F.lit(consts[c.column]).cast("bigint" if c.integer else "string").alias(c.column) for c in pcols]
    return cols


def _union_of_scans(
    reader: Callable[[], Any],
    schema: Any,
    files: Sequence[DataFile],
    paths: Mapping[str, str],
    pcols: Sequence[PartitionColumn],
) -> DataFrame:
    """One scan per (topic, partition, partition values) group, unioned; the group's columns as literals."""
    from pyspark.sql import functions as F

    groups: dict[tuple[Any, ...], list[DataFile]] = {}
    for f in files:
        groups.setdefault((f.topic, f.partition, f.values), []).append(f)
    branches = []
    for members in groups.values():
        consts = file_columns(members[0], pcols)
        # the file name as a column of its own first: referenced through the _metadata struct in
        # every branch of the union, Spark builds the whole struct per row (row index included)
        df = reader().schema(schema).load([paths[f.key] for f in members])
        df = df.select("*", F.col("_metadata.file_name").alias(_FILE_NAME))
        name_col = F.col(_FILE_NAME)

        def per_file(attr: str, members: list[DataFile] = members, name_col: Any = name_col) -> Any:
            entries = []
            for f in members:
                entries += [F.lit(f.key.rsplit("/", 1)[-1]), F.lit(getattr(f, attr))]
            return F.element_at(F.create_map(*entries), name_col)

        cols = [
            F.lit(consts["_topic"]).alias("_topic"),
            F.lit(consts["_partition"]).cast("int").alias("_partition"),
            per_file("first_offset").cast("bigint").alias("_file_first_offset"),
            per_file("last_offset").cast("bigint").alias("_file_last_offset"),
            per_file("key").cast("string").alias("_file"),
        ]
        cols += [
            F.lit(consts[c.column]).cast("bigint" if c.integer else "string").alias(c.column) for c in pcols
        ]
        branches.append(df.select("*", *cols).drop(_FILE_NAME))
    return functools.reduce(lambda a, b: a.unionByName(b), branches)
