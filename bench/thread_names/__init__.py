"""A ``sitecustomize`` for the sink processes of ``python -m bench.focus --threads`` (see there)."""
