"""quix-streams' file sink on one benchmark topic; runs inside bench/.venv-quix, never the project venv.

Driven by :func:`bench.harness.run_quix`, the way the peer figures in
``shared/reference/python-peers.md`` §4 were taken: ``LocalFileSink(format=...)`` with
``commit_every=20000``, a fresh consumer group, ``run(count=N)``. The time runs from the first
record this process sees to ``run()`` returning (its last checkpoint flushed the files and
committed). It prints one JSON line: ``{"records", "first", "end"}`` (``time.time()`` stamps).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from quixstreams import Application
from quixstreams.sinks.community.file.local import LocalFileSink


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--directory", required=True)
    parser.add_argument("--format", choices=("json", "parquet"), required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--state-dir", required=True)
    args = parser.parse_args()

    app = Application(
        broker_address=args.bootstrap,
        consumer_group=args.group,
        auto_offset_reset="earliest",
        commit_every=20000,
        state_dir=args.state_dir,
        consumer_extra_config={"session.timeout.ms": 6000, "fetch.wait.max.ms": 100},
    )
    first: list[float] = []

    def mark(value: object) -> None:
        if not first:
            first.append(time.time())

    topic = app.topic(args.topic, value_deserializer="json")
    sdf = app.dataframe(topic)
    sdf = sdf.update(mark)
    sdf.sink(LocalFileSink(directory=args.directory, format=args.format))
    app.run(count=args.count)
    end = time.time()
    print(json.dumps({"records": args.count, "first": first[0] if first else end, "end": end}))
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
