"""Bare confluent-kafka consume of one topic, in a process of its own: the ceiling of the ratios.

``python -m bench.bare BOOTSTRAP TOPIC RECORDS`` prints one JSON object
``{"rps", "seconds", "first_record_s", "cpu_s"}`` (``cpu_s``: the process's CPU seconds, all threads,
from the assignment to the last record). It runs in a fresh process, as every ``kcql-sink run`` it
is compared with does, so neither side carries the benchmark's own heap, threads (the test Schema
Registry serves from one) or garbage collections: timed in the benchmark's process, bare consume
of 300,000 records took 0.48-1.07 s within one run while the sink on the same topic held
0.61-0.63 s.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

__all__ = ["consume", "main"]


def consume(bootstrap: str, topic: str, records: int, batch_size: int = 2000) -> dict[str, float]:
    """Consume ``records`` messages of ``topic`` the way the sink's consumer does, touching nothing.

    Messages are counted with ``len()`` and checked for errors with one C-level ``map`` per
    ``consume()``, not a Python loop: the ceiling the sink is compared with is what the client
    alone can do.

    The librdkafka settings are :func:`sink.runtime.consumer.consumer_config`'s (with the session
    timeout the bench gives the sink), the loop the sink's ``consume(num_messages=2000,
    timeout=0.2)``, the group a fresh one, and the garbage-collector set-up ``kcql-sink run``'s
    (:func:`sink.runtime.collector.settle_heap`). Timed from the assignment, as the sink is.
    """
    from confluent_kafka import Consumer, Message

    from sink.config.files import ConnectorConfig
    from sink.runtime.collector import settle_heap
    from sink.runtime.consumer import consumer_config

    message_error = Message.error  # a C method: map() calls it without a Python frame
    # the sink's own settings, built by its own function (a fresh connector name: a fresh group)
    # with the override the benchmark gives every sink run
    cfg = ConnectorConfig(
        f"bench-bare-{uuid.uuid4().hex[:8]}", {"consumer.override.session.timeout.ms": "6000"}
    )
    conf = consumer_config(cfg, bootstrap)
    consumer = Consumer(conf)
    assigned: list[float] = []
    cpu_at_assignment: list[float] = []

    def on_assign(_consumer: Consumer, _partitions: list[object]) -> None:
        assigned.append(time.monotonic())
        cpu_at_assignment.append(time.process_time())

    consumer.subscribe([topic], on_assign=on_assign)
    settle_heap()
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
        cpu = time.process_time() - cpu_at_assignment[0]
    finally:
        consumer.close()
    start = assigned[0]
    return {
        "rps": seen / (end - start), "seconds": end - start, "first_record_s": first - start, "cpu_s": cpu,
    }


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
