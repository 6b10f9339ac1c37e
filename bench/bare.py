"""Bare confluent-kafka consume of one topic, in a process of its own: the ceiling of the ratios.

``python -m bench.bare BOOTSTRAP TOPIC RECORDS`` prints one JSON object
``{"rps", "seconds", "first_record_s"}``. It runs in a fresh process, as every ``kcql-sink run`` it
is compared with does, so neither side carries the benchmark's own heap, threads (the test Schema
Registry serves from one) or garbage collections: timed in the benchmark's process, bare consume
of 300,000 records took 0.48-1.07 s within one run while the sink on the same topic held
0.61-0.63 s.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import uuid
from typing import Any

__all__ = ["consume", "main"]


def consume(bootstrap: str, topic: str, records: int, batch_size: int = 2000) -> dict[str, float]:
    """Consume ``records`` messages of ``topic`` the way the sink's consumer does, touching nothing.

    Messages are counted with ``len()`` and checked for errors with one C-level ``map`` per
    ``consume()``, not a Python loop: the ceiling the sink is compared with is what the client
    alone can do.

    Same librdkafka settings as :func:`sink.runtime.consumer.consumer_config` (plus the session
    timeout the bench gives the sink), same ``consume(num_messages=2000, timeout=0.2)`` loop, a
    fresh group, and the same garbage-collector set-up as ``kcql-sink run`` (collect, then freeze
    what start-up made). Timed from the assignment, as the sink is.
    """
    from confluent_kafka import Consumer, Message

    message_error = Message.error  # a C method: map() calls it without a Python frame
    conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": f"bench-bare-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": "earliest",
        "group.protocol": "classic",
        "partition.assignment.strategy": "range",
        "fetch.wait.max.ms": 100,
        "fetch.queue.backoff.ms": 10,
        "topic.metadata.refresh.interval.ms": 5000,
        "session.timeout.ms": 6000,
    }
    consumer = Consumer(conf)
    assigned: list[float] = []
    consumer.subscribe([topic], on_assign=lambda c, p: assigned.append(time.monotonic()))
    gc.collect()
    gc.freeze()
    seen = 0
    first = 0.0
    deadline = time.monotonic() + 300
    try:
        while seen < records:
            if time.monotonic() > deadline:
                raise RuntimeError(f"bare consume of {topic}: {seen}/{records} records")
            messages = consumer.consume(num_messages=batch_size, timeout=0.2)
            if not messages:
                continue
            if not seen:
                first = time.monotonic()
            # no Python loop over the messages: the sink's batch path has none either (issue 24)
            if any(map(message_error, messages)):
                seen += sum(1 for msg in messages if msg.error() is None)
            else:
                seen += len(messages)
        end = time.monotonic()
    finally:
        consumer.close()
    start = assigned[0]
    return {"rps": seen / (end - start), "seconds": end - start, "first_record_s": first - start}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 3:
        sys.stderr.write("usage: python -m bench.bare BOOTSTRAP TOPIC RECORDS\n")
        return 2
    bootstrap, topic, records = args
    sys.stdout.write(json.dumps(consume(bootstrap, topic, int(records))) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
