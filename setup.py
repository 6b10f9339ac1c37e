"""Six small C modules, built with the package (docs/benchmarks.md, "One pass in C"): the
consuming thread's per-message loops, the Avro pass-through's bodies, flat JSON lines parsed
into Arrow buffers, flat Avro bodies checked and decoded, one-line JSON values joined and
checked, and the write-behind thread for staging files. All are optional: when no C compiler is
at hand the build goes on without them, and the Python versions in sink/records/scan.py,
sink/records/json_text.py, formats/avro_wire.py and formats/avro_columns.py and Arrow's JSON
reader (formats/json_lines_arrow.py) run instead; staging files are then written in place."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension("sink.records._scan", ["sink/records/_scan.c"], optional=True),
        Extension("formats._wire", ["formats/_wire.c"], optional=True),
        Extension("formats._json_lines", ["formats/_json_lines.c"], optional=True),
        Extension("formats._avro_flat", ["formats/_avro_flat.c"], optional=True),
        Extension("sink.records._json_text", ["sink/records/_json_text.c"], optional=True),
        Extension("formats._write_thread", ["formats/_write_thread.c"], optional=True),
    ]
)
