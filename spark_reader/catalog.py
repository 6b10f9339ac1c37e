"""What is committed: the views a config defines and the data files behind each of them.

Listing goes through the layout contract (``partitioners.layout``): only keys that parse as final
data keys of the plan are returned, so staging, temp-upload and index objects are never read, and
because the sink makes a file visible atomically under its final key, a listed file is whole.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kcql.errors import ConfigError
from kcql.model import SinkPlan
from spark_reader import _layout
from spark_reader.storage import StorageSettings, open_store

__all__ = [
    "DataFile",
    "PartitionColumn",
    "ViewSpec",
    "list_files",
    "partition_columns",
    "plans_from_config",
    "sanitize_identifier",
    "view_specs",
]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PartitionColumn:
    """A PARTITIONBY field exposed as a column."""

    index: int
    """Position in the PARTITIONBY list (and in :attr:`DataFile.values`)."""
    display_name: str
    """The name in the layout (``a.b``, ``date``)."""
    column: str
    """The SQL column name (sanitized, unique within the view)."""
    kind: str
    integer: bool = False
    """True when every value is an integer (``_partition`` always is) and the column is BIGINT."""


@dataclass(frozen=True, slots=True)
class DataFile:
    """One committed data file and what its key tells about it."""

    key: str
    size: int
    topic: str
    partition: int
    values: tuple[str | None, ...] = ()
    """PARTITIONBY values in PARTITIONBY order, unescaped; ``None`` where Lenses wrote ``[missing]``."""
    first_offset: int | None = None
    last_offset: int | None = None
    min_timestamp: int | None = None
    max_timestamp: int | None = None

    def sort_key(self) -> tuple[str, int, int, str]:
        off = self.last_offset if self.last_offset is not None else (self.first_offset or 0)
        return (self.topic, self.partition, off, self.key)


@dataclass(frozen=True)
class ViewSpec:
    """One KCQL statement as a readable view."""

    name: str
    plan: SinkPlan
    storage: StorageSettings


_IDENT = re.compile(r"[^A-Za-z0-9_]+")


def sanitize_identifier(text: str) -> str:
    """A valid unquoted Spark SQL identifier derived from ``text`` (``my-topic.v1`` → ``my_topic_v1``)."""
    ident = _IDENT.sub("_", text).strip("_") or "view"
    return "_" + ident if ident[0].isdigit() else ident


def plans_from_config(config: Mapping[str, Any]) -> tuple[SinkPlan, ...]:
    """Compile the config's KCQL (``connect.s3.kcql``, or ``kcql``) into plans.

    Raises:
        ConfigError: when no KCQL is given; KCQL errors propagate with their position.
    """
    text = None
    for key in ("connect.s3.kcql", "connect.local.kcql", "kcql"):
        for k, v in config.items():
            if str(k).lower() == key and v:
                text = str(v)
                break
        if text:
            break
    if not text:
        raise ConfigError([("connect.s3.kcql", "", "required: the KCQL statements whose output to read")])
    import kcql

    return tuple(kcql.parse(text))


def view_specs(
    config: Mapping[str, Any],
    *,
    plans: Sequence[SinkPlan] | None = None,
    views: Mapping[str, str] | None = None,
) -> list[ViewSpec]:
    """The views ``config`` defines: one per statement, named after the target prefix or topic.

    ``views`` maps a statement's default view name, topic, or ``bucket:prefix`` to the name to use.
    """
    storage = StorageSettings.from_config(config)
    plans = tuple(plans) if plans is not None else plans_from_config(config)
    overrides = dict(views or config.get("views") or {})
    specs: list[ViewSpec] = []
    used: set[str] = set()
    for plan in plans:
        base = plan.prefix.rstrip("/").rsplit("/", 1)[-1] if plan.prefix else ""
        if not base or base == "topics":
            base = plan.source if plan.source != "*" else plan.bucket
        default = sanitize_identifier(base)
        name = default
        for candidate in (default, plan.source, f"{plan.bucket}:{plan.prefix}"):
            if candidate in overrides:
                name = sanitize_identifier(overrides[candidate])
                break
        unique, n = name, 2
        while unique.lower() in used:
            unique, n = f"{name}_{n}", n + 1
        used.add(unique.lower())
        specs.append(ViewSpec(unique, plan, storage))
    return specs


def _is_int(text: str | None) -> bool:
    return text is not None and re.fullmatch(r"-?(0|[1-9]\d{0,17})", text) is not None


def partition_columns(
    plan: SinkPlan, files: Iterable[DataFile], taken: Iterable[str] = ()
) -> list[PartitionColumn]:
    """The PARTITIONBY fields as columns; integer-typed when every listed value is an integer."""
    files = list(files)
    used = {t.lower() for t in taken} | {"_topic", "_partition"}
    cols: list[PartitionColumn] = []
    for index, f in enumerate(plan.partition_by or ()):
        column = base = sanitize_identifier(f.display_name)
        if column.lower() in used:
            column = base = f"part_{base}"
        n = 2
        while column.lower() in used:
            column, n = f"{base}_{n}", n + 1
        used.add(column.lower())
        present = [
            df.values[index] for df in files if index < len(df.values) and df.values[index] is not None
        ]
        integer = f.kind == "partition" or (bool(present) and all(_is_int(v) for v in present))
        cols.append(PartitionColumn(index, f.display_name, column, f.kind, integer))
    return cols


def list_files(
    plan: SinkPlan,
    storage: StorageSettings,
    *,
    topic: str | None = None,
    partition: int | None = None,
) -> list[DataFile]:
    """Every committed data file of ``plan``, sorted by topic, partition and offset.

    ``topic``/``partition`` narrow the listing prefix in the default layout, so a query on one
    topic-partition lists only that directory.
    """
    store = open_store(storage)
    prefix = _layout.listing_prefix(plan, topic)
    files: list[DataFile] = []
    foreign: list[str] = []
    for obj in store.list(plan.bucket, prefix):
        if not _layout.is_data_key(plan, obj.key):
            continue
        info = _layout.parse_key(plan, obj.key)
        if info is None:
            foreign.append(obj.key)
            continue
        if (topic is not None and info.topic != topic) or (
            partition is not None and info.partition != partition
        ):
            continue
        if not plan.matches_topic(info.topic):
            continue
        files.append(
            DataFile(
                key=obj.key,
                size=obj.size,
                topic=info.topic,
                partition=info.partition,
                values=info.values,
                first_offset=info.first_offset,
                last_offset=info.last_offset,
                min_timestamp=info.min_timestamp,
                max_timestamp=info.max_timestamp,
            )
        )
    if foreign and not files:
        # Nothing parses but something is there: most likely the KCQL (PARTITIONBY, padding,
        # naming) differs from what wrote these files. Say so instead of showing an empty view.
        log.warning(
            "%d object(s) under %s/%s do not match the layout of `%s` (e.g. %s); check PARTITIONBY, "
            "padding and naming",
            len(foreign),
            plan.bucket,
            prefix,
            plan.statement or plan.source,
            foreign[0],
        )
    files.sort(key=DataFile.sort_key)
    return _derive_first_offsets(plan, files)


def _derive_first_offsets(plan: SinkPlan, files: list[DataFile]) -> list[DataFile]:
    """Without PARTITIONBY a topic-partition's files are consecutive: a file starts after its predecessor."""
    if plan.partition_by:
        return files
    out: list[DataFile] = []
    prev: DataFile | None = None
    for f in files:
        if (
            f.first_offset is None
            and prev is not None
            and prev.last_offset is not None
            and (prev.topic, prev.partition) == (f.topic, f.partition)
        ):
            f = DataFile(**{**_asdict(f), "first_offset": prev.last_offset + 1})
        out.append(f)
        prev = f
    return out


def _asdict(f: DataFile) -> dict[str, Any]:
    return {name: getattr(f, name) for name in DataFile.__slots__}
