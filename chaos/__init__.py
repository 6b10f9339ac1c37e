"""Reliability harness: crash chaos for ``kcql-sink run``, an S3 fault proxy, an independent reader.

``python -m chaos`` (``make chaos``) runs the full matrix and writes ``chaos/results/latest.json``;
the fast subset lives in ``tests/integration/test_reliability_*.py``. See docs/reliability.md.
"""
