"""Making files visible exactly once: staging files, the storage index, the committer."""

from __future__ import annotations
