"""Soak: a steady produce rate over many partitions with interval flushes; resources stay flat.

One ``kcql-sink run`` process consumes a topic of ``KCQL_SINK_SOAK_PARTITIONS`` partitions (default
1,000) for ``KCQL_SINK_SOAK_SECONDS`` (default 1,200: 20 minutes) while a producer writes
``KCQL_SINK_SOAK_RATE`` records/s (default 500) spread over every partition. Files roll on
``flush.interval`` only. Every ``KCQL_SINK_SOAK_SAMPLE`` seconds (default 10) the test samples the
sink's resident memory, open file descriptors and threads from ``/proc`` (every process of its
process group). Over the second half of the run (after warm-up: every partition has open files
and every buffer has grown) a least-squares line through each series gives its slope per hour,
which is printed; resident memory's must stay under ``KCQL_SINK_SOAK_MAX_RSS_MB_PER_HOUR``
(default 50). Descriptors swing with the flush cycle (about one per partition while files are
open), so their check is that the second half's peak is not above the first half's (plus 10);
threads may not grow at all. At the end every produced record must be in the
files exactly once. The figures are printed for ``docs/reliability.md``.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer

from chaos.crash import FAST_CONSUMER, start_sink
from chaos.reader import compare, read_local


def _env(name: str, default: float) -> float:
    return float(os.environ.get(name, default))


SECONDS = _env("KCQL_SINK_SOAK_SECONDS", 1200)
PARTITIONS = int(_env("KCQL_SINK_SOAK_PARTITIONS", 1000))
RATE = _env("KCQL_SINK_SOAK_RATE", 500)
SAMPLE = _env("KCQL_SINK_SOAK_SAMPLE", 10)
MAX_RSS_MB_PER_HOUR = _env("KCQL_SINK_SOAK_MAX_RSS_MB_PER_HOUR", 50)
MAX_FD_GROWTH = 10
"""Descriptors the second half's peak may exceed the first half's by."""


def _group(pgid: int) -> list[int]:
    """Pids of the processes in process group ``pgid`` (the runner and any task children)."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == pgid:
                    pids.append(int(entry))
            except ProcessLookupError:
                continue
    return pids


def _sample(pgid: int) -> tuple[float, int, int]:
    """(RSS in MB, open descriptors, threads) summed over the process group."""
    rss_kb = fds = threads = 0
    for pid in _group(pgid):
        try:
            status = Path(f"/proc/{pid}/status").read_text()
            fds += len(os.listdir(f"/proc/{pid}/fd"))
        except (FileNotFoundError, ProcessLookupError):
            continue
        for line in status.splitlines():
            if line.startswith("VmRSS:"):
                rss_kb += int(line.split()[1])
            elif line.startswith("Threads:"):
                threads += int(line.split()[1])
    return rss_kb / 1024, fds, threads


def _slope_per_hour(times: list[float], values: list[float]) -> float:
    """Least-squares slope of ``values`` over ``times`` (seconds), per hour."""
    n = len(times)
    mean_t, mean_v = sum(times) / n, sum(values) / n
    var = sum((t - mean_t) ** 2 for t in times)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in zip(times, values, strict=True)) / var * 3600


class _SteadyProducer:
    def __init__(self, bootstrap: str, topic: str) -> None:
        self.delivered: set[tuple[str, int, int]] = set()
        self.failed: list[str] = []
        self.topic = topic
        self._producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="soak-producer")
        self._thread.start()

    def _report(self, err, msg) -> None:
        if err is None:
            self.delivered.add((msg.topic(), msg.partition(), msg.offset()))
        else:
            self.failed.append(str(err))

    def _run(self) -> None:
        n = 0
        start = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - start) * RATE)
            while n < due:
                self._producer.produce(
                    self.topic, value=json.dumps({"id": n, "pad": "x" * 100}).encode(),
                    partition=n % PARTITIONS, on_delivery=self._report,
                )
                n += 1
            self._producer.poll(0.05)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(10)
        assert self._producer.flush(60) == 0
        assert not self.failed, self.failed[:3]


@pytest.mark.chaos
@pytest.mark.timeout(SECONDS + 600)
def test_soak_resources_stay_flat_and_every_record_is_written_once(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory("soak", partitions=PARTITIONS)
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.count'=1000000, 'flush.size'=100000000, "
            "'flush.interval'=30)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "out"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        # one open file per partition: below the partition count, each new record commits the least
        # recently used file, and round-robin traffic degrades to a file per record
        "connect.s3.max.open.writers": str(PARTITIONS + 100),
        **FAST_CONSUMER,
    }
    config = tmp_path / "connector.json"
    config.write_text(json.dumps({"name": f"soak-{uuid.uuid4().hex[:8]}", "config": props}))
    log = tmp_path / "soak.log"
    proc = start_sink(config, kafka_bootstrap, log)
    flow = _SteadyProducer(kafka_bootstrap, topic)
    samples: list[tuple[float, float, int, int]] = []
    start = time.monotonic()
    try:
        next_sample = start
        while time.monotonic() - start < SECONDS:
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            rss, fds, threads = _sample(proc.pid)
            samples.append((time.monotonic() - start, rss, fds, threads))
            next_sample += SAMPLE
            time.sleep(max(0.0, next_sample - time.monotonic()))  # the sampling period
        flow.stop()
        deadline = time.monotonic() + 120
        seen, files = read_local(tmp_path / "out", "bkt", "p")
        while time.monotonic() < deadline and not flow.delivered <= set(seen):
            assert proc.poll() is None, log.read_text(errors="replace")[-3000:]
            time.sleep(1)
            seen, files = read_local(tmp_path / "out", "bkt", "p")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = proc.wait(120)
    text = log.read_text(errors="replace")
    second = [s for s in samples if s[0] >= SECONDS / 2]
    times = [s[0] for s in second]
    slopes = {
        "rss_mb": _slope_per_hour(times, [s[1] for s in second]),
        "fds": _slope_per_hour(times, [s[2] for s in second]),
        "threads": _slope_per_hour(times, [s[3] for s in second]),
    }
    result = compare(flow.delivered, seen)
    rss, fds, threads = ([s[i] for s in samples] for i in (1, 2, 3))
    print(
        f"\nsoak: {SECONDS:.0f} s, {PARTITIONS} partitions, {RATE:.0f} records/s, "
        f"{len(flow.delivered)} records in {files} files: {result}\n"
        f"  RSS {min(rss):.0f}-{max(rss):.0f} MB, fds {min(fds)}-{max(fds)}, "
        f"threads {min(threads)}-{max(threads)} ({len(samples)} samples)\n"
        f"  slope per hour over the second half: RSS {slopes['rss_mb']:+.1f} MB, fds {slopes['fds']:+.1f}, "
        f"threads {slopes['threads']:+.1f}"
    )
    (tmp_path / "samples.json").write_text(json.dumps(samples))
    assert rc == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    assert result["lost"] == 0 and result["duplicated"] == 0 and result["unexpected"] == 0, result
    assert len(second) >= 3, "too few samples in the second half for a slope"
    assert slopes["rss_mb"] <= MAX_RSS_MB_PER_HOUR, slopes
    # descriptors swing with the flush cycle (a file per partition open, then committed), so a leak
    # shows as a higher ceiling rather than in a short fit; threads must not change at all
    first = [s for s in samples[1:] if s[0] < SECONDS / 2]
    assert max(s[2] for s in second) <= max(s[2] for s in first) + MAX_FD_GROWTH, (first, second)
    assert max(s[3] for s in second) <= max(s[3] for s in first), (first, second)
