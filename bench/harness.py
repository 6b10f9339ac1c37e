"""Pieces of the benchmark: data, bare consume, timed ``kcql-sink run`` processes, RSS polling, quix, Spark.

Each piece is a plain function so ``tests/integration/test_bench_smoke.py`` can run it on a few
hundred records and the benchmark cannot rot silently. :mod:`bench.run` strings them together.

Timing rule (the same for every contender): a run starts when its consumer is assigned its
partitions (the ``assigned`` log line of ``kcql-sink run -v``, ``on_assign`` for bare consume), so
Tansu's group-join delay is left out, and ends when the last record is in storage (``kcql-sink``:
a committed file whose name carries each partition's last offset; bare consume: the last record
polled; quix: ``run(count=N)`` returning, its final checkpoint flushed).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import re
import signal
import struct
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "AVRO_SCHEMA",
    "Dataset",
    "RssPoller",
    "SinkRun",
    "bare_consume",
    "idle_visibility",
    "produce",
    "rss_with_open_partitions",
    "run_quix",
    "run_sink",
    "spark_run_timing",
    "spark_timing",
    "start_registry",
]

REPO = Path(__file__).resolve().parent.parent
COUNTRIES = ("DE", "FR", "GB", "NL", "PL", "SE")
AVRO_SCHEMA: dict[str, Any] = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "country", "type": "string"},
        {"name": "amount", "type": "double"},
        {"name": "ts", "type": "string"},
        {"name": "pad", "type": "string"},
    ],
}
PARTITIONS = 3


@dataclass
class Dataset:
    """One produced topic: its end offsets (taken from delivery reports, not Tansu's watermarks)."""

    topic: str
    records: int
    value_bytes: int
    ends: dict[int, int]
    kind: str  # json | avro

    @property
    def mb(self) -> float:
        return self.value_bytes / 1e6


def _order(i: int, rng: random.Random, pad: int, customers: int) -> dict[str, Any]:
    cycle = -customers or 1000
    return {
        "id": i,
        "customer": f"c{rng.randrange(customers):05d}" if customers > 0 else f"c{i % cycle:05d}",
        "country": COUNTRIES[i % len(COUNTRIES)],
        "amount": round(rng.uniform(5, 500), 2),
        "ts": f"2026-11-{20 + i % 3:02d}T{i % 24:02d}:{i % 60:02d}:{i % 60:02d}+00:00",
        "pad": f"{rng.getrandbits(4 * pad):0{pad}x}" if pad else "",
    }


def produce(
    bootstrap: str,
    topic: str,
    records: int,
    *,
    pad: int = 60,
    kind: str = "json",
    registry_url: str | None = None,
    partitions: int = PARTITIONS,
    customers: int = 2000,
    seed: int = 7,
) -> Dataset:
    """Create ``topic`` and produce ``records`` orders round-robin over its partitions.

    ``pad`` hex characters of padding set the record size (60 → ~170 B JSON, 900 → ~1 KB).
    ``kind="avro"`` registers :data:`AVRO_SCHEMA` under ``<topic>-value`` and writes the
    Confluent wire format (magic byte, schema id, fastavro body). ``customers=0`` cycles through
    exactly 1,000 customers (the high-cardinality PARTITIONBY field of the RSS run), ``-N``
    through exactly ``N``.
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions)])[topic].result(15)
    encode: Callable[[dict[str, Any]], bytes]
    if kind == "avro":
        import fastavro
        import requests

        if not registry_url:
            raise ValueError("Avro needs a Schema Registry")
        resp = requests.post(
            f"{registry_url}/subjects/{topic}-value/versions",
            json={"schema": json.dumps(AVRO_SCHEMA)},
            timeout=10,
        )
        resp.raise_for_status()
        header = b"\x00" + struct.pack(">I", resp.json()["id"])
        parsed = fastavro.parse_schema(AVRO_SCHEMA)

        def encode(value: dict[str, Any]) -> bytes:
            buf = io.BytesIO()
            buf.write(header)
            fastavro.schemaless_writer(buf, parsed, value)
            return buf.getvalue()
    else:

        def encode(value: dict[str, Any]) -> bytes:
            return json.dumps(value, separators=(",", ":")).encode()

    rng = random.Random(seed)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 5000,
                         "queue.buffering.max.messages": 500000})
    ends: dict[int, int] = {}
    failures: list[str] = []

    def delivered(err: Any, msg: Any) -> None:
        if err is not None:
            failures.append(str(err))
        else:
            ends[msg.partition()] = max(ends.get(msg.partition(), 0), msg.offset() + 1)

    total = 0
    for i in range(records):
        value = _order(i, rng, pad, customers)
        payload = encode(value)
        total += len(payload)
        while True:
            try:
                producer.produce(topic, value=payload, key=value["customer"].encode(),
                                 partition=i % partitions, on_delivery=delivered)
                break
            except BufferError:
                producer.poll(0.05)
        if i % 5000 == 0:
            producer.poll(0)
    producer.flush(120)
    if failures or sum(ends.values()) != records:
        raise RuntimeError(f"produce to {topic}: {len(failures)} failures, ends {ends}: {failures[:1]}")
    return Dataset(topic, records, total, ends, kind)


# --- bare consume -------------------------------------------------------------------------------


def bare_consume(bootstrap: str, data: Dataset) -> dict[str, float]:
    """Bare confluent-kafka consume of ``data`` in a fresh process (:mod:`bench.bare`).

    Returns ``{"rps", "seconds", "first_record_s"}`` (time from assignment to the first record).
    """
    got = subprocess.run(
        [sys.executable, "-m", "bench.bare", bootstrap, data.topic, str(data.records)],
        cwd=REPO, capture_output=True, text=True, timeout=330, check=False,
    )
    if got.returncode != 0:
        raise RuntimeError(f"bare consume of {data.topic} exited {got.returncode}:\n{got.stderr[-3000:]}")
    result: dict[str, float] = json.loads(got.stdout.strip().splitlines()[-1])
    return result


# --- process RSS --------------------------------------------------------------------------------


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    with contextlib.suppress(OSError):
        for task in Path(f"/proc/{pid}/task").iterdir():
            with contextlib.suppress(OSError):
                kids += [int(c) for c in (task / "children").read_text().split()]
    return kids


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, in MB (from /proc)."""
    total = 0
    stack = [pid]
    while stack:
        p = stack.pop()
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
                    break
        stack += _children(p)
    return total / 1024


class RssPoller:
    """Polls a process tree's RSS every ``interval`` seconds in a thread; ``peak_mb`` is the maximum."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self.pid))
            self._stop.wait(self.interval)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


# --- kcql-sink runs -----------------------------------------------------------------------------

JSON_CONVERTERS = {
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}


def avro_converters(registry_url: str) -> dict[str, str]:
    return {
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.schema.registry.url": registry_url,
    }


def local_storage(root: Path) -> dict[str, str]:
    return {"connect.storage": "local", "connect.local.root": str(root)}


@dataclass
class SinkRun:
    """A running ``kcql-sink run`` process, its log, when it was assigned and its RSS poller."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    rss: RssPoller
    assigned_at: float | None = None
    lines: list[str] = field(default_factory=list)

    def log_tail(self, chars: int = 3000) -> str:
        return self.log_path.read_text(errors="replace")[-chars:]

    def stop(self, timeout: float = 60) -> float:
        """SIGTERM (graceful: open files are committed), wait, return the peak RSS in MB."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.rss.stop()


def start_sink(
    name: str,
    kcql: str,
    topic: str,
    props: dict[str, str],
    bootstrap: str,
    workdir: Path,
    *,
    profile: Path | None = None,
) -> SinkRun:
    """Write a Connect JSON config and start ``kcql-sink -v run`` on it (a fresh connector/group)."""
    workdir.mkdir(parents=True, exist_ok=True)
    connector = f"bench-{name}-{uuid.uuid4().hex[:6]}"
    config = {
        "name": connector,
        "config": {
            "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
            "tasks.max": "1",
            "topics": topic,
            "connect.s3.kcql": kcql,
            "consumer.override.session.timeout.ms": "6000",
            **props,
        },
    }
    config_path = workdir / f"{name}.json"
    config_path.write_text(json.dumps(config, indent=2))
    log_path = workdir / f"{name}.log"
    prefix = [sys.executable]
    if profile is not None:
        prefix += ["-m", "cProfile", "-o", str(profile)]
    cmd = [*prefix, "-m", "sink.cli", "-v", "run", str(config_path), "--bootstrap-servers", bootstrap]
    log_file = log_path.open("wb")
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=REPO)
    run = SinkRun(name, proc, log_path, RssPoller(proc.pid))

    def pump() -> None:
        for raw in proc.stderr or ():
            log_file.write(raw)
            log_file.flush()
            if run.assigned_at is None and b" assigned " in raw:
                run.assigned_at = time.monotonic()
        log_file.close()

    threading.Thread(target=pump, daemon=True).start()
    return run


_LAST_OFFSET = re.compile(r"^(\d+)_")


def committed_lasts(keys: Iterator[str]) -> dict[int, int]:
    """Per Kafka partition, the highest last offset among committed data files of the default layout.

    The default layout is ``<prefix>/<topic>/<partition>/<lastOffset>_<minTs>_<maxTs>.<ext>``
    (Lenses naming); hidden index/staging entries are skipped.
    """
    lasts: dict[int, int] = {}
    for key in keys:
        parts = key.split("/")
        if len(parts) < 2 or any(p.startswith((".", "_")) for p in parts):
            continue
        match = _LAST_OFFSET.match(parts[-1])
        if match and parts[-2].isdigit():
            partition = int(parts[-2])
            lasts[partition] = max(lasts.get(partition, -1), int(match.group(1)))
    return lasts


def local_keys(root: Path) -> Iterator[str]:
    for dirpath, _dirs, files in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        for f in files:
            yield f"{rel}/{f}"


def s3_keys(client: Any, bucket: str, prefix: str) -> Iterator[str]:
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for obj in page.get("Contents", []):
            yield obj["Key"]


LOCAL_POLL_S = 0.005
"""How often a local directory is listed while a timed run waits for its last file. The end of a
run is the first listing that shows it, so the listing interval adds half of itself to every
measured time on average: 25 ms at 50 ms, a twentieth of a 0.5 s run, which bare consume (timed in
its own loop) does not pay. A local listing costs ~0.2 ms of CPU, so 5 ms keeps the error and the
CPU taken from the sink both small."""
S3_POLL_S = 0.05
"""An S3 listing is an HTTP request (a few ms of CPU on each side): listed less often."""


def wait_all_committed(
    run: SinkRun, data: Dataset, list_keys: Callable[[], Iterator[str]], timeout: float = 600,
    interval: float = LOCAL_POLL_S,
) -> float:
    """Poll the storage listing every ``interval`` s until every partition's last offset is in a
    committed file.

    Returns the monotonic time it was first seen.
    """
    deadline = time.monotonic() + timeout
    while True:
        if run.proc.poll() is not None:
            raise RuntimeError(f"{run.name}: kcql-sink exited {run.proc.returncode}:\n{run.log_tail()}")
        lasts = committed_lasts(list_keys())
        if all(lasts.get(p, -1) >= end - 1 for p, end in data.ends.items()):
            return time.monotonic()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{run.name}: only {lasts} of {data.ends} committed:\n{run.log_tail()}")
        time.sleep(interval)


def run_sink(
    name: str,
    data: Dataset,
    store_as: str,
    converters: dict[str, str],
    storage: dict[str, str],
    list_keys: Callable[[], Iterator[str]],
    bootstrap: str,
    workdir: Path,
    *,
    profile: Path | None = None,
    poll_s: float = LOCAL_POLL_S,
    select: str = "*",
    props: dict[str, str] | None = None,
) -> dict[str, Any]:
    """One timed ``kcql-sink run``: ``data`` → ``bench:<name>`` as ``store_as``; stopped afterwards.

    ``flush.count`` is half a partition, so each partition's last file closes on count exactly
    when its last record arrives (no interval wait inside the measurement). ``poll_s``: how often
    ``list_keys`` is called (:data:`LOCAL_POLL_S`, :data:`S3_POLL_S`). ``select`` is the KCQL
    projection and ``props`` more connector settings (transforms), for the reshaping runs.
    """
    per_partition = max(data.ends.values())
    flush_count = max(1, (per_partition + 1) // 2)
    kcql = (
        f"INSERT INTO bench:{name} SELECT {select} FROM {data.topic} STOREAS `{store_as}` "
        f"PROPERTIES('flush.count'={flush_count}, 'flush.interval'=600, 'flush.size'=2000000000)"
    )
    settings = {**converters, **storage, **(props or {})}
    run = start_sink(name, kcql, data.topic, settings, bootstrap, workdir, profile=profile)
    try:
        end = wait_all_committed(run, data, list_keys, interval=poll_s)
        if run.assigned_at is None:
            raise RuntimeError(f"{name}: no 'assigned' log line from kcql-sink -v run")
        seconds = end - run.assigned_at
    finally:
        peak = run.stop()
    if run.proc.returncode not in (0, -signal.SIGTERM):
        raise RuntimeError(f"{name}: kcql-sink exited {run.proc.returncode}:\n{run.log_tail()}")
    return {"name": name, "records": data.records, "seconds": seconds, "rps": data.records / seconds,
            "mb_s": data.mb / seconds, "peak_rss_mb": peak}


# --- memory with 1,000 open partitions, idle-partition latency -----------------------------------


def rss_with_open_partitions(
    data: Dataset, bootstrap: str, root: Path, workdir: Path, *, distinct: int = 1000, settle: float = 120.0
) -> dict[str, float]:
    """Peak RSS of the sink while ``data`` (``distinct`` topic-partition-paths: ``customer`` values
    each in one partition) keeps that many writers open.

    Nothing flushes on count/size/interval, so every PARTITIONBY value keeps an open Parquet
    writer until SIGTERM commits them all. The sink is stopped once ``distinct`` staging files
    are open (or after ``settle`` seconds); that count proves how many were open at once. The
    committed directories are counted too, but a stop commits only what its grace period allows.
    Returns ``{"peak_rss_mb", "open_files", "directories"}``.
    """
    name = f"wide{distinct}"
    staging = workdir / f"staging-{name}"
    kcql = (
        f"INSERT INTO bench:{name} SELECT * FROM {data.topic} PARTITIONBY customer STOREAS `PARQUET` "
        "PROPERTIES('flush.count'=100000000, 'flush.interval'=3600, 'flush.size'=2000000000)"
    )
    props = {**JSON_CONVERTERS, **local_storage(root), "connect.s3.max.open.writers": str(distinct + 1000),
             "connect.s3.local.tmp.directory": str(staging)}
    run = start_sink(name, kcql, data.topic, props, bootstrap, workdir)
    deadline = time.monotonic() + 120
    while run.assigned_at is None and time.monotonic() < deadline and run.proc.poll() is None:
        time.sleep(0.05)
    open_files = 0
    deadline = time.monotonic() + settle
    while time.monotonic() < deadline and run.proc.poll() is None:
        open_files = sum(1 for _ in staging.rglob("*.parquet"))
        if open_files >= distinct:  # every value has its writer open; nothing flushes them
            break
        time.sleep(0.2)
    peak = run.stop(timeout=180)
    dirs = {p.parent for p in (root / "bench" / name).rglob("*.parquet")}
    return {"peak_rss_mb": peak, "open_files": float(open_files), "directories": float(len(dirs))}


def idle_visibility(
    bootstrap: str, root: Path, workdir: Path, flush_interval: int = 2, records: int = 5
) -> float:
    """Seconds from producing a few records into an otherwise idle topic to seeing their file.

    The sink runs with ``flush.interval`` = ``flush_interval`` seconds and a huge count, so only
    the interval can commit the file; target: within ``flush_interval`` + 2 s.
    """
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = f"bench-idle-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1)])[topic].result(15)
    kcql = (
        f"INSERT INTO bench:idle SELECT * FROM {topic} STOREAS `JSON` "
        f"PROPERTIES('flush.count'=100000000, 'flush.interval'={flush_interval})"
    )
    run = start_sink("idle", kcql, topic, {**JSON_CONVERTERS, **local_storage(root)}, bootstrap, workdir)
    try:
        deadline = time.monotonic() + 120
        while run.assigned_at is None:
            if time.monotonic() > deadline or run.proc.poll() is not None:
                raise RuntimeError(f"idle: the sink was not assigned:\n{run.log_tail()}")
            time.sleep(0.05)
        time.sleep(1.0)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i in range(records):
            producer.produce(topic, value=json.dumps({"id": i}).encode())
        producer.flush(10)
        produced = time.monotonic()
        target = root / "bench" / "idle"
        while time.monotonic() < produced + 60:
            if committed_lasts(local_keys(target)).get(0, -1) >= records - 1:
                return time.monotonic() - produced
            time.sleep(0.02)
        raise RuntimeError(f"idle: records not visible after 60 s:\n{run.log_tail()}")
    finally:
        run.stop()


# --- quix-streams -------------------------------------------------------------------------------

QUIX_VENV = REPO / "bench" / ".venv-quix"


def ensure_quix_venv() -> Path:
    """Create ``bench/.venv-quix`` with quixstreams from PyPI (once); returns its python."""
    python = QUIX_VENV / "bin" / "python"
    probe = [str(python), "-c", "import quixstreams, pyarrow"]
    if python.exists() and subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return python
    subprocess.run([sys.executable, "-m", "venv", str(QUIX_VENV)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", "quixstreams", "pyarrow"], check=True)
    return python


def run_quix(name: str, data: Dataset, fmt: str, bootstrap: str, workdir: Path) -> dict[str, Any]:
    """quix-streams ``LocalFileSink(format=fmt)`` over ``data`` in its own venv, timed inside it."""
    python = ensure_quix_venv()
    # quix accepts only [a-zA-Z0-9 ._/] in the directory, so it gets a relative one under cwd=workdir
    workdir.mkdir(parents=True, exist_ok=True)
    cmd = [str(python), str(REPO / "bench" / "quix_sink.py"), "--bootstrap", bootstrap, "--topic", data.topic,
           "--group", f"bench-{name}-{uuid.uuid4().hex[:6]}", "--directory", name, "--format", fmt,
           "--count", str(data.records), "--state-dir", str(workdir / f"{name}-state")]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=workdir)
    rss = RssPoller(proc.pid)
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        peak = rss.stop()
    if proc.returncode != 0:
        tail = stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"{name}: quix exited {proc.returncode}: {tail}")
    result = json.loads(stdout.decode().strip().splitlines()[-1])
    seconds = result["end"] - result["first"]
    return {"name": name, "records": data.records, "seconds": seconds, "rps": data.records / seconds,
            "mb_s": data.mb / seconds, "peak_rss_mb": peak}


# --- Spark --------------------------------------------------------------------------------------


@contextlib.contextmanager
def spark_session() -> Iterator[Any]:
    """A local[2] session configured like the test fixture (Java 17, loopback, no UI)."""
    import tempfile

    from pyspark.sql import SparkSession

    if not os.environ.get("JAVA_HOME"):
        for home in ("/usr/lib/jvm/java-17-openjdk-amd64", "/usr/lib/jvm/java-1.17.0-openjdk-amd64"):
            if Path(home, "bin", "java").exists():
                os.environ["JAVA_HOME"] = home
                break
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.pop("SPARK_REMOTE", None)
    tmp = Path(tempfile.mkdtemp(prefix="kcql-bench-spark-"))
    session = (
        SparkSession.builder.master("local[2]").appName("kcql-sink-bench")
        .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2").config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.memory", "1g")
        .config("spark.sql.warehouse.dir", str(tmp / "wh")).config("spark.local.dir", str(tmp / "scratch"))
        .config("spark.driver.extraJavaOptions", f"-Dderby.system.home={tmp / 'derby'}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)


AGGREGATE = ("SELECT country, count(*) AS n, round(sum(amount), 2) AS revenue, "
             "count(DISTINCT customer) AS customers FROM {view} GROUP BY country ORDER BY country")


def spark_run_timing(spark: Any, bootstrap: str, data: Dataset, root: Path, name: str) -> dict[str, Any]:
    """``spark-run --once`` (``sink.spark.pipeline.spark_run`` in this session) of ``data`` →
    ``bench:<name>`` as PARQUET with :func:`run_sink`'s plan; timed from the call (planning
    included) to the end of the job, the session's start-up left out as :func:`run_sink` leaves
    out the group join. The same records must be committed."""
    from sink.config.files import parse_connector_config
    from sink.spark.pipeline import spark_run

    per_partition = max(data.ends.values())
    flush_count = max(1, (per_partition + 1) // 2)
    kcql = (
        f"INSERT INTO bench:{name} SELECT * FROM {data.topic} STOREAS `PARQUET` "
        f"PROPERTIES('flush.count'={flush_count}, 'flush.interval'=600, 'flush.size'=2000000000)"
    )
    cfg = parse_connector_config({"name": f"bench-{name}-{uuid.uuid4().hex[:6]}", "config": {
        "topics": data.topic, "connect.s3.kcql": kcql, **JSON_CONVERTERS, **local_storage(root)}})
    started = time.monotonic()
    spark_run(spark, cfg, bootstrap)
    seconds = time.monotonic() - started
    lasts = committed_lasts(local_keys(root / "bench" / name))
    missing = {p: end for p, end in data.ends.items() if lasts.get(p, -1) < end - 1}
    if missing:
        raise RuntimeError(f"{name}: spark-run left partitions short of their end: {missing}")
    return {"rps": data.records / seconds, "seconds": seconds}


def spark_timing(
    spark: Any, root: Path, name: str, topic: str, repeats: int = 5, warm_ups: int = 3
) -> dict[str, Any]:
    """One aggregate through ``spark_reader`` vs ``spark.read.parquet`` on the same committed files.

    ``warm_ups`` queries per path first, interleaved: the benchmark times this right after its
    Spark session starts, and a young JVM's queries speed up as it compiles them. With one warm-up
    and the best of three, the same code gave 1.09 and 1.25 in two runs, and 0.88-1.16 in four
    calls of one session (2026-12-07).

    Two timings per path, best of ``repeats`` (interleaved, after the warm-ups): the query on a view
    registered once (``ratio``: what a user querying a registered view pays), and registration +
    query (``total_ratio``: ``spark_reader.register`` lists the committed files, the plain path
    lists the directory and reads Parquet footers). Both answers must agree.
    """
    import spark_reader

    kcql = f"INSERT INTO bench:{name} SELECT * FROM {topic} STOREAS `PARQUET`"
    config = {"connect.s3.kcql": kcql, **local_storage(root)}
    files = [str(p) for p in (root / "bench" / name).rglob("*.parquet")
             if not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)]

    def register_reader() -> str:
        return next(iter(spark_reader.register(spark, config)))

    def register_plain() -> str:
        spark.read.parquet(*files).createOrReplaceTempView("bench_plain")
        return "bench_plain"

    def query(view: str) -> list[Any]:
        return spark.sql(AGGREGATE.format(view=view)).collect()

    paths = {"parquet": register_plain, "reader": register_reader}
    views = {label: register() for label, register in paths.items()}
    answers = {label: query(view) for label, view in views.items()}
    for _ in range(warm_ups - 1):
        for view in views.values():
            query(view)
    best = {f"{label}_{kind}": float("inf") for label in paths for kind in ("query", "total")}
    for _ in range(repeats):
        for label, register in paths.items():
            started = time.monotonic()
            answers[label] = query(views[label])
            best[f"{label}_query"] = min(best[f"{label}_query"], time.monotonic() - started)
            started = time.monotonic()
            query(register())
            best[f"{label}_total"] = min(best[f"{label}_total"], time.monotonic() - started)
    if [tuple(r) for r in answers["reader"]] != [tuple(r) for r in answers["parquet"]]:
        raise RuntimeError(f"spark_reader and spark.read.parquet disagree: {answers}")
    return {"reader_s": best["reader_query"], "parquet_s": best["parquet_query"],
            "ratio": best["reader_query"] / best["parquet_query"],
            "reader_total_s": best["reader_total"], "parquet_total_s": best["parquet_total"],
            "total_ratio": best["reader_total"] / best["parquet_total"],
            "files": len(files), "rows": sum(r["n"] for r in answers["reader"])}


# --- Schema Registry ----------------------------------------------------------------------------


@contextlib.contextmanager
def start_registry() -> Iterator[str]:
    """The test suite's small HTTP Schema Registry on a free loopback port; yields its URL."""
    from tests.fixtures.schema_registry import serve_registry

    with serve_registry("bench-schema-registry") as registry:
        yield registry.url
