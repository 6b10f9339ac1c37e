"""The C loops against their Python versions, in-process: ``python -m bench.loops``.

Times, in ns per record (best of ``--rounds``), the consuming thread's per-message steps for
Confluent Avro values (error check, partition runs, the values, their common header, timestamp
range, pass-through bodies) one batch after another as the sink runs them, with the
C module (:mod:`sink.records.scan`, :mod:`formats.avro_wire`) and with each step's Python
version; and a block of the bench's JSON orders parsed into an Arrow table by the C parser and
by Arrow's reader (:class:`formats.json_lines_arrow.LineParser`). No broker: the Messages are
built in Python, with the sizes the bench produces. docs/benchmarks.md, "One pass in C", has
figures from this machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import Message

from bench.harness import _order
from formats import avro_wire
from formats.json_lines_arrow import LineParser, line_parse_options
from sink.records import scan

BATCH = 2000


def _best(rounds: int, records: int, step: Callable[[], Any]) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    return best / records * 1e9


def _avro_steps(batches: list[list[Message]], native: bool) -> Callable[[], None]:
    first_error = scan.first_error if native else scan.first_error_py
    cuts = scan.partition_cuts if native else scan.partition_cuts_py
    values_of = scan.values if native else scan.values_py
    same_header = scan.same_header if native else scan.same_header_py
    stamps = scan.timestamp_range if native else scan.timestamp_range_py
    bodies = avro_wire._joined_bodies_c if native else avro_wire._joined_bodies_py

    def run() -> None:
        for batch in batches:
            first_error(batch)
            cuts(batch)
            values = values_of(batch)
            same_header(values, 5)
            stamps(batch, 0, len(batch))
            bodies(values, 0, len(values))  # type: ignore[arg-type]

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.loops", description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    if not (scan.NATIVE and avro_wire._joined_bodies is avro_wire._joined_bodies_c):
        sys.stderr.write("the C modules are not built (pip install -e . builds them)\n")
        return 1
    count = args.records // BATCH * BATCH
    batches = [
        [
            Message(topic="t", partition=0, offset=i, key=b"k%d" % i,
                    value=b"\x00\x00\x00\x00\x01" + os.urandom(105), timestamp=(1, 1_790_000_000_000 + i))
            for i in range(start, start + BATCH)
        ]
        for start in range(0, count, BATCH)
    ]
    out = sys.stdout
    out.write(f"timestamps read in place: {scan.TIMESTAMPS_IN_PLACE}\n")
    for native in (False, True, False, True):
        took = _best(args.rounds, count, _avro_steps(batches, native))
        out.write(f"Avro per-message steps, {'C     ' if native else 'Python'}: {took:6.1f} ns/record\n")

    rng = random.Random(7)
    lines = [json.dumps(_order(i, rng, 60, 2000)).encode() for i in range(count)]
    blocks = [b"\n".join(lines[i : i + BATCH]) for i in range(0, count, BATCH)]
    avro = {"type": "record", "name": "Order", "fields": [
        {"name": name, "type": ["null", kind], "default": None}
        for name, kind in (("id", "long"), ("customer", "string"), ("country", "string"),
                           ("amount", "double"), ("ts", "string"), ("pad", "string"))
    ]}
    options = line_parse_options(avro)
    assert options is not None  # noqa: S101 - a flat record
    line_parser = LineParser(options, options.explicit_schema)
    ours, theirs = line_parser(blocks[0]), line_parser.arrow(blocks[0])
    if ours is None or theirs is None or not ours.equals(theirs):
        sys.stderr.write("the C parser and Arrow's reader disagree\n")
        return 1
    for name, parse in (("Arrow's reader", line_parser.arrow), ("C parser      ", line_parser)) * 2:
        took = _best(args.rounds, count, lambda parse=parse: [parse(b) for b in blocks])
        out.write(f"JSON lines, {BATCH}-line blocks, {name}: {took:6.1f} ns/record\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
