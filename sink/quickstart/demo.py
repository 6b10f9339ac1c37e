"""``make demo``: see the whole product work on one machine, with no cluster, in a few minutes.

It starts an embedded Tansu broker on a free loopback port, produces sample orders (JSON, with a
customer, country, amount and timestamp) into a 3-partition topic, runs ``kcql-sink run`` with a
KCQL statement that partitions by country and date into Parquet on local storage under
``./demo-data/``, waits until every record is committed (the connector's committed Kafka offsets
reach the end of every partition), prints the layout it wrote as a short tree, and answers a
Spark SQL aggregate through ``kcql-sink sql``. Everything it starts is stopped by PID, also on
Ctrl-C. ``--s3`` (``make demo S3=1``) does the same against an embedded SeaweedFS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

from confluent_kafka import KafkaException

from kcql.errors import SinkError

__all__ = ["KCQL", "main"]

TOPIC = "orders"
KCQL = (
    "INSERT INTO demo:orders SELECT * FROM orders "
    "PARTITIONBY country, _date.`uuuu-MM-dd` STOREAS PARQUET "
    "PROPERTIES('flush.count'=10000, 'flush.interval'=5, 'partition.include.keys'=true)"
)
QUERY = (
    "SELECT country, count(*) AS orders, round(sum(amount), 2) AS revenue, "
    "count(DISTINCT customer) AS customers FROM orders GROUP BY country ORDER BY revenue DESC"
)
COUNTRIES = ("DE", "FR", "GB", "NL", "PL", "SE")


def _say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def _progress(done: int, total: int, label: str) -> None:
    width = 30
    filled = width * done // total
    sys.stderr.write(f"\r  {label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total}")
    if done >= total:
        sys.stderr.write("\n")
    sys.stderr.flush()


def produce_orders(bootstrap: str, count: int, seed: int = 7) -> dict[int, int]:
    """Produce ``count`` orders; returns the end offset (last + 1) of each partition."""
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept alive until the future resolves
    admin.create_topics([NewTopic(TOPIC, 3)])[TOPIC].result(15)
    rng = random.Random(seed)  # noqa: S311 - sample data, not security
    start = datetime(2026, 11, 20, tzinfo=UTC)
    ends: dict[int, int] = {}
    failures: list[str] = []

    def delivered(err: object, msg: object) -> None:
        if err is not None:
            failures.append(str(err))
            return
        partition, offset = msg.partition(), msg.offset()  # type: ignore[attr-defined]
        ends[partition] = max(ends.get(partition, 0), offset + 1)

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.num.messages": 2000})
    for i in range(count):
        customer = f"c{rng.randrange(2000):04d}"
        ts = start + timedelta(seconds=rng.randrange(3 * 86400))
        order = {
            "order_id": i,
            "customer": customer,
            "country": rng.choice(COUNTRIES),
            "amount": round(rng.uniform(5, 500), 2),
            "ts": ts.isoformat(),
        }
        while True:
            try:
                producer.produce(
                    TOPIC,
                    key=customer,
                    value=json.dumps(order),
                    timestamp=int(ts.timestamp() * 1000),
                    on_delivery=delivered,
                )
                break
            except BufferError:
                producer.poll(0.1)
        if i % 2500 == 0:
            producer.poll(0)
            _progress(i, count, "producing")
    producer.flush(60)
    _progress(count, count, "producing")
    if failures:
        raise SinkError(f"{len(failures)} orders were not delivered: {failures[0]}")
    return ends


def wait_committed(
    bootstrap: str, group: str, ends: dict[int, int], proc: subprocess.Popen[bytes], timeout: float
) -> None:
    """Wait until the connector's committed offsets reach ``ends`` (every record is in storage)."""
    from confluent_kafka import Consumer, TopicPartition

    total = sum(ends.values())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    deadline = time.monotonic() + timeout
    shown = -1
    try:
        while True:
            if proc.poll() is not None:
                raise SinkError(f"the connector stopped early with exit code {proc.returncode}")
            committed = consumer.committed([TopicPartition(TOPIC, p) for p in ends], timeout=10)
            done = sum(max(tp.offset, 0) for tp in committed)
            if done != shown:
                _progress(min(done, total), total, "committed")
                shown = done
            if all(tp.offset >= ends[tp.partition] for tp in committed):
                return
            if time.monotonic() > deadline:
                raise SinkError(f"only {done} of {total} records were committed within {timeout:.0f} s")
            time.sleep(0.5)
    finally:
        consumer.close()


def print_tree(root: Path, max_lines: int = 14) -> None:
    """A short tree of the committed layout (hidden index/temp folders left out)."""
    lines: list[str] = []
    files = sorted(
        p
        for p in root.rglob("*")
        if p.is_file() and not any(part.startswith((".", "_")) for part in p.relative_to(root).parts)
    )
    dirs: dict[Path, list[Path]] = {}
    for f in files:
        dirs.setdefault(f.parent, []).append(f)
    for directory, entries in dirs.items():
        lines.append(f"  {directory.relative_to(root.parent)}/  ({len(entries)} file(s))")
        lines += [f"      {e.name}" for e in entries[:2]]
        if len(entries) > 2:
            lines.append(f"      ... {len(entries) - 2} more")
    shown = lines[:max_lines]
    if len(lines) > max_lines:
        shown.append(f"  ... {len(dirs)} directories, {len(files)} files in all")
    _say("\n".join(shown))


@contextlib.contextmanager
def _stopped_on_exit(procs: list[subprocess.Popen[bytes]]) -> Iterator[None]:
    try:
        yield
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()


def run_demo(data_dir: Path, records: int, use_s3: bool) -> int:
    from sink.quickstart.embedded import TANSU_CONSUMER_OVERRIDES, start_tansu

    cli = [sys.executable, "-m", "sink.cli"]
    shutil.rmtree(data_dir, ignore_errors=True)
    data_dir.mkdir(parents=True)
    started = time.monotonic()
    procs: list[subprocess.Popen[bytes]] = []
    with start_tansu() as broker, contextlib.ExitStack() as stack:
        _say(f"1. Kafka: embedded Tansu broker, pid {broker.pid}, on {broker.bootstrap}")
        storage = {"connect.storage": "local", "connect.local.root": str(data_dir.resolve())}
        if use_s3:
            from sink.quickstart.embedded import make_client, start_seaweedfs

            s3 = start_seaweedfs()
            stack.callback(s3.stop)
            _say(f"   S3: embedded SeaweedFS, pid {s3.process.pid}, on {s3.endpoint.url}")
            storage = s3.endpoint.connect_config()
            make_client(s3.endpoint).create_bucket(Bucket="demo")
        _say(f"2. Producing {records:,} orders as JSON into topic '{TOPIC}' (3 partitions)")
        ends = produce_orders(broker.bootstrap, records)
        config = {
            "name": "demo-orders",
            "config": {
                "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
                "tasks.max": "1",
                "topics": TOPIC,
                "connect.s3.kcql": KCQL,
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                **TANSU_CONSUMER_OVERRIDES,  # the first join in 3 s, not 23 s
                **storage,
            },
        }
        config_path = data_dir / "connector.json"
        config_path.write_text(json.dumps(config, indent=2))
        _say(f"3. Running the sink: kcql-sink run {config_path}\n   KCQL: {KCQL}")
        log_path = data_dir / "sink.log"
        with log_path.open("wb") as log_file:
            sink_proc = subprocess.Popen(
                [*cli, "run", str(config_path), "--bootstrap-servers", broker.bootstrap],
                stdout=log_file,
                stderr=subprocess.STDOUT,
            )
        procs.append(sink_proc)
        with _stopped_on_exit(procs):
            try:
                wait_committed(broker.bootstrap, "connect-demo-orders", ends, sink_proc, timeout=240)
            except SinkError:
                _say(f"   sink log ({log_path}):\n" + log_path.read_text(errors="replace")[-3000:])
                raise
        if use_s3:
            _say("4. Committed on S3 under s3://demo/orders/ (kcql-sink cat --config ... streams it back)")
        else:
            _say(f"4. Committed layout under {data_dir}/demo:")
            print_tree(data_dir / "demo")
        _say(f'5. Spark SQL: kcql-sink sql "{QUERY}" --config {config_path}')
        result = subprocess.run([*cli, "sql", QUERY, "--config", str(config_path)], check=False)
        if result.returncode != 0:
            return result.returncode
    _say(
        f"Done in {time.monotonic() - started:.0f} s. Everything started was stopped; "
        + (
            "the S3 data went with SeaweedFS."
            if use_s3
            else f"output stays in {data_dir}/ (make clean removes it)."
        )
    )
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sink.quickstart.demo", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--dir", default="demo-data", type=Path, help="where output goes (default ./demo-data)"
    )
    parser.add_argument("--records", type=int, default=int(os.environ.get("DEMO_RECORDS", "50000")))
    parser.add_argument("--s3", action="store_true", help="write to an embedded SeaweedFS instead of disk")
    args = parser.parse_args(argv)
    try:
        return run_demo(args.dir, args.records, args.s3)
    except (SinkError, KafkaException) as exc:
        sys.stderr.write(f"\ndemo failed: {exc}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted: everything the demo started has been stopped\n")
        return 130


if __name__ == "__main__":
    sys.exit(main())
