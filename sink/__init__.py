"""The sink: runtime, task, commit, storage, config, REST worker and command line.

Importing it chooses Arrow's allocator before pyarrow is loaded (:mod:`sink.arrow_allocator`).
"""

from sink.arrow_allocator import prefer_jemalloc

prefer_jemalloc()
