"""Test data in the Lenses layout, written with independent libraries (pyarrow, fastavro, json, csv).

Used by the spark_reader unit and integration tests to produce committed files at the keys the
sink writes (reference §4.1), plus the staging/index litter a live sink leaves around, and to
compute expected aggregates straight from the files without going through spark_reader.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import fastavro
import pyarrow as pa
import pyarrow.parquet as pq

from kcql.model import EnvelopeFields, PartitionField, SinkPlan, StoreFormat
from partitioners import escape
from tests.unit.formats.records import append

REGIONS = ("eu", "us", "ap/south %east")
"""The third needs escaping (``/``, ``%``) and contains a space, which is kept."""

VALUE_SCHEMA = {
    "type": "record",
    "name": "Order",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "region", "type": "string"},
    ],
}



@dataclass(frozen=True)
class Rec:
    topic: str
    partition: int
    offset: int
    timestamp: int
    key: str
    value: dict


def records(topic: str = "orders", partitions: int = 2, per_partition: int = 9) -> list[Rec]:
    out = []
    for p in range(partitions):
        for o in range(per_partition):
            i = p * 1000 + o
            value = {"id": i, "name": f"n{i % 5}", "amount": round(i * 1.5, 2), "region": REGIONS[i % 3]}
            out.append(Rec(topic, p, o, 1_700_000_000_000 + i, f"k{i % 7}", value))
    return out


def plan(
    fmt: StoreFormat,
    layout: str,
    *,
    bucket: str = "bkt",
    prefix: str = "data",
    envelope: bool = False,
    source: str = "orders",
) -> SinkPlan:
    """layout: default | default-kv | values | kv | nopartition."""
    region = PartitionField("region", "value", ("region",))
    part = PartitionField("_partition", "partition")
    partition_by: tuple[PartitionField, ...] | None = {
        "default": (),
        "default-kv": (),
        "values": (region,),
        "kv": (region, part),
        "nopartition": None,
    }[layout]
    return SinkPlan(
        bucket=bucket,
        prefix=prefix,
        source=source,
        format=fmt,
        partition_by=partition_by,
        include_keys=layout in ("default-kv", "kv"),
        envelope=EnvelopeFields() if envelope else None,
    )


def _dir_value(rec: Rec, f: PartitionField) -> str:
    if f.kind == "partition":
        return str(rec.partition)
    if f.kind == "topic":
        return rec.topic
    return escape(str(rec.value[f.path[0]]))


def file_key(p: SinkPlan, recs: list[Rec], ext: str) -> str:
    first, last = recs[0], recs[-1]
    base = p.prefix + "/" if p.prefix else ""
    if p.partition_by == ():
        dirs = (
            [f"topic={first.topic}", f"partition={first.partition}"]
            if p.include_keys
            else [first.topic, str(first.partition)]
        )
        ts = [r.timestamp for r in recs]
        name = f"{last.offset:012d}_{min(ts)}_{max(ts)}.{ext}"
    else:
        dirs = []
        for f in p.partition_by or ():
            v = _dir_value(first, f)
            dirs.append(f"{f.display_name}={v}" if p.include_keys else v)
        name = f"{first.topic}({first.partition}_{last.offset:012d}).{ext}"
    return base + "".join(d + "/" for d in dirs) + name


def _row(p: SinkPlan, r: Rec) -> dict:
    if p.envelope is None:
        return r.value
    return {
        "key": r.key,
        "value": r.value,
        "headers": {"h": f"x{r.offset % 2}"},
        "metadata": {
            "timestamp": r.timestamp,
            "topic": r.topic,
            "partition": r.partition,
            "offset": r.offset,
        },
    }


def _avro_schema(p: SinkPlan) -> dict:
    if p.envelope is None:
        return VALUE_SCHEMA
    return {
        "type": "record",
        "name": "Envelope",
        "fields": [
            {"name": "key", "type": ["null", "string"]},
            {"name": "value", "type": ["null", VALUE_SCHEMA]},
            {
                "name": "headers",
                "type": {"type": "record", "name": "H", "fields": [{"name": "h", "type": "string"}]},
            },
            {
                "name": "metadata",
                "type": {
                    "type": "record",
                    "name": "M",
                    "fields": [
                        {"name": "timestamp", "type": "long"},
                        {"name": "topic", "type": "string"},
                        {"name": "partition", "type": "int"},
                        {"name": "offset", "type": "long"},
                    ],
                },
            },
        ],
    }


def encode(p: SinkPlan, recs: list[Rec]) -> tuple[bytes, str]:
    """The bytes of one committed file holding ``recs`` and its extension."""
    rows = [_row(p, r) for r in recs]
    fmt = p.format
    if fmt == StoreFormat.JSON:
        return ("".join(json.dumps(x) + "\n" for x in rows)).encode(), "json"
    if fmt == StoreFormat.AVRO:
        buf = io.BytesIO()
        fastavro.writer(buf, fastavro.parse_schema(_avro_schema(p)), rows)
        return buf.getvalue(), "avro"
    if fmt == StoreFormat.PARQUET:
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_pylist(rows), buf)
        return buf.getvalue(), "parquet"
    if fmt in (StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS):
        sio = io.StringIO()
        w = csv.writer(sio, lineterminator="\n")
        if fmt == StoreFormat.CSV_WITHHEADERS:
            w.writerow(list(rows[0]))
        for x in rows:
            w.writerow(list(x.values()))
        return sio.getvalue().encode(), "csv"
    if fmt == StoreFormat.TEXT:
        return "".join(r.value["name"] + "\n" for r in recs).encode(), "text"
    if fmt == StoreFormat.BYTES:
        return json.dumps(recs[0].value).encode(), "bytes"
    raise AssertionError(fmt)


def group(p: SinkPlan, recs: Iterable[Rec], per_file: int) -> list[list[Rec]]:
    """Split records into files the way the sink does: per topic-partition and partition values."""
    if p.format == StoreFormat.BYTES:
        per_file = 1
    writers: dict[tuple, list[Rec]] = {}
    files: list[list[Rec]] = []
    for r in recs:
        k = (r.topic, r.partition, tuple(_dir_value(r, f) for f in (p.partition_by or ())))
        cur = writers.setdefault(k, [])
        cur.append(r)
        if len(cur) >= per_file:
            files.append(cur)
            writers[k] = []
    files += [v for v in writers.values() if v]
    return files


def write_all(
    p: SinkPlan,
    recs: Iterable[Rec],
    put: Callable[[str, bytes], None],
    *,
    per_file: int = 4,
    litter: bool = True,
) -> list[str]:
    """Write ``recs`` as committed files through ``put(key, data)``; returns the data keys.

    With ``litter``, also writes what a live sink leaves beside its data: an index object, a
    half-uploaded temp object and a hidden staging file, none of which a reader may show.
    """
    keys = []
    for chunk in group(p, recs, per_file):
        data, ext = encode(p, chunk)
        key = file_key(p, chunk, ext)
        put(key, data)
        keys.append(key)
    if litter and keys:
        add_litter(put, keys)
    return keys


def add_litter(put: Callable[[str, bytes], None], keys: list[str]) -> None:
    """What a live sink leaves beside its data: index/lock objects, a half-uploaded temp object
    and a hidden staging file (in a data directory). A reader must show none of them."""
    half = b"PAR1\x00half-a-file"
    put(".indexes/conn/.locks/Topic(orders)/0.lock", b'{"owner":"x","committedOffset":3}')
    put(f".temp-upload/Topic(orders)/0/deadbeef{keys[0]}", half)
    d = keys[0].rsplit("/", 1)[0] if "/" in keys[0] else ""
    put(f"{d}/.staging-1" if d else ".staging-1", half)
    put(f"{d}/_tmp/x" if d else "_tmp/x", half)


def local_put(root) -> Callable[[str, bytes], None]:
    def put(key: str, data: bytes) -> None:
        path = root / key
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    return put


def gzip_json(p: SinkPlan) -> SinkPlan:
    return replace(p, compression_codec="GZIP")


def expected(p: SinkPlan, read: Callable[[str], bytes], keys: Iterable[str]) -> dict:
    """count, sum(id), distinct names (and keys in envelope mode) read from the files independently."""
    count, total, names, rkeys = 0, 0, set(), set()
    for key in keys:
        data = read(key)
        fmt = p.format
        if fmt == StoreFormat.PARQUET:
            rows = pq.read_table(pa.BufferReader(data)).to_pylist()
        elif fmt == StoreFormat.AVRO:
            rows = list(fastavro.reader(io.BytesIO(data)))
        elif fmt == StoreFormat.JSON:
            if data[:2] == b"\x1f\x8b":
                data = gzip.decompress(data)
            rows = [json.loads(x) for x in data.decode().splitlines() if x]
        elif fmt in (StoreFormat.CSV, StoreFormat.CSV_WITHHEADERS):
            rr = list(csv.reader(io.StringIO(data.decode())))
            if fmt == StoreFormat.CSV_WITHHEADERS:
                rows = [dict(zip(rr[0], x, strict=True)) for x in rr[1:]]
            else:
                rows = [dict(zip(("id", "name", "amount", "region"), x, strict=True)) for x in rr]
        elif fmt == StoreFormat.TEXT:
            rows = [{"name": x} for x in data.decode().splitlines()]
        else:
            rows = [json.loads(data)]
        for row in rows:
            if p.envelope is not None:
                rkeys.add(row["key"])
                row = row["value"]
            count += 1
            total += int(row.get("id", 0))
            names.add(row["name"])
    return {"count": count, "sum_id": total, "names": names, "keys": rkeys}


def sink_record(p: SinkPlan, r: Rec):
    """The SinkRecord the sink would hand the writers for ``r`` under ``p``'s format."""
    from sink.records.record import SinkRecord  # tests only: spark_reader never imports sink

    value, schema = r.value, VALUE_SCHEMA
    if p.format == StoreFormat.TEXT:
        value, schema = r.value["name"], "string"
    elif p.format == StoreFormat.BYTES:
        value, schema = json.dumps(r.value).encode(), "bytes"
    return SinkRecord(
        topic=r.topic,
        partition=r.partition,
        offset=r.offset,
        timestamp=r.timestamp,
        key=r.key,
        value=value,
        headers=(("h", f"x{r.offset % 2}"),),
        key_schema="string",
        value_schema=schema,
    )


def write_with_sink_libs(
    p: SinkPlan, recs: Iterable[Rec], put: Callable[[str, bytes], None], staging, *, per_file: int = 4
) -> list[str]:
    """Write committed files with the project's own writers: ``partitioners`` paths and names,
    ``formats`` encoders. Returns the data keys. ``staging`` is a scratch directory."""
    from formats import FormatSettings, get_format
    from partitioners import FileMeta, Partitioner, object_key

    codec = p.compression_codec or "UNCOMPRESSED"
    fmt = get_format(FormatSettings(format=p.format, codec=codec, envelope=p.envelope))
    part = Partitioner(p)
    keys = []
    for n, chunk in enumerate(group(p, recs, per_file)):
        srecs = [sink_record(p, r) for r in chunk]
        path = staging / f"{p.prefix}-{n}.tmp"
        writer = fmt.open(path)
        assert append(writer, srecs) == len(srecs)
        writer.close()
        ts = [r.timestamp for r in chunk]
        meta = FileMeta(
            topic=chunk[0].topic,
            partition=chunk[0].partition,
            path=part.path_for(srecs[0]),
            first_offset=chunk[0].offset,
            last_offset=chunk[-1].offset,
            min_timestamp=min(ts),
            max_timestamp=max(ts),
            record_count=len(chunk),
            extension=fmt.extension,
        )
        key = object_key(p, meta)
        put(key, path.read_bytes())
        path.unlink()
        keys.append(key)
    if keys:
        add_litter(put, keys)
    return keys


LAYOUTS = ("default", "default-kv", "values", "kv", "nopartition")


def _cols(p: SinkPlan) -> tuple[str, str, str]:
    """SQL expressions for (id, name, key) in the view of plan ``p``."""
    if p.envelope is not None:
        return "CAST(value.id AS BIGINT)", "value.name", "key"
    if p.format == StoreFormat.CSV:
        return "CAST(_c0 AS BIGINT)", "_c1", "NULL"
    if p.format == StoreFormat.TEXT:
        return "CAST(NULL AS BIGINT)", "value", "NULL"
    if p.format == StoreFormat.BYTES:
        js = "CAST(value AS STRING)"
        return f"CAST(get_json_object({js}, '$.id') AS BIGINT)", f"get_json_object({js}, '$.name')", "NULL"
    return "CAST(id AS BIGINT)", "name", "NULL"


def aggregate_sql(view: str, p: SinkPlan) -> str:
    i, n, k = _cols(p)
    region_check = "0"
    if p.partition_by and p.format not in (StoreFormat.TEXT, StoreFormat.BYTES, StoreFormat.CSV):
        reg = "value.region" if p.envelope is not None else "region"
        col = "part_region" if p.envelope is None else "region"
        region_check = f"SUM(CASE WHEN {col} <> {reg} THEN 1 ELSE 0 END)"
    return (
        f"SELECT '{view}' AS v, COUNT(*) AS c, COALESCE(SUM({i}), 0) AS s, "  # noqa: S608
        f"SORT_ARRAY(COLLECT_SET({n})) AS names, SORT_ARRAY(COLLECT_SET({k})) AS keys, "
        f"SUM(_partition) AS sp, COUNT(DISTINCT _topic) AS topics, {region_check} AS bad_region, "
        f"SUM(CASE WHEN _file LIKE '%.%' AND _file_last_offset IS NOT NULL THEN 0 ELSE 1 END) AS bad_meta "
        f"FROM {view}"
    )


def every_plan(prefix: str = "") -> list[SinkPlan]:
    """Every STOREAS format x every layout, envelope views, and gzipped JSON: one view each."""
    plans = [
        plan(fmt, layout, prefix=f"{prefix}{fmt.value.lower()}_{layout.replace('-', '_')}")
        for fmt in StoreFormat
        for layout in LAYOUTS
    ]
    plans += [
        plan(fmt, "kv", prefix=f"{prefix}env_{fmt.value.lower()}", envelope=True)
        for fmt in (StoreFormat.JSON, StoreFormat.AVRO, StoreFormat.PARQUET)
    ]
    plans.append(gzip_json(plan(StoreFormat.JSON, "values", prefix=f"{prefix}json_gzip")))
    return plans


def assert_views_match(spark, plans, written, read, recs) -> None:
    """Counts, sums, distinct names/keys, partition and metadata columns of every view equal
    what the files hold, read independently; all views in ONE Spark job."""
    sql = " UNION ALL ".join(aggregate_sql(p.prefix, p) for p in plans)
    rows = {r["v"]: r for r in spark.sql(sql).collect()}
    in_p1 = sum(1 for r in recs if r.partition == 1)
    for p in plans:
        exp = expected(p, read, written[p.prefix])
        row = rows[p.prefix]
        n = len(recs) if p.format != StoreFormat.BYTES else len(written[p.prefix])
        assert row["c"] == exp["count"] == n, p.prefix
        assert row["s"] == exp["sum_id"], p.prefix
        assert set(row["names"]) == exp["names"], p.prefix
        assert set(row["keys"]) == exp["keys"], p.prefix
        assert row["sp"] == in_p1 and row["topics"] == 1, p.prefix
        assert row["bad_region"] == 0 and row["bad_meta"] == 0, p.prefix
