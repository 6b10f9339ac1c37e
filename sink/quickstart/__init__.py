"""``make demo`` and the embedded servers (Tansu, SeaweedFS) it, the tests and the bench start."""

from __future__ import annotations
