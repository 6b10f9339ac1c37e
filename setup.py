"""Two small C loops (the consuming thread's per-message steps, see docs/benchmarks.md), built
with the package. Both are optional: when no C compiler is at hand the build goes on without
them and the pure-Python versions in sink/records/scan.py and formats/avro_wire.py run instead."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("sink.records._scan", ["sink/records/_scan.c"], optional=True),
        Extension("formats._wire", ["formats/_wire.c"], optional=True),
    ]
)
