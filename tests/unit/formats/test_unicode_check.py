"""formats._unicode.lone_surrogate: the C-level check and the walk it falls back to agree."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from formats._unicode import lone_surrogate


class Opaque:
    """A type msgspec cannot encode: the walk decides."""


@pytest.mark.parametrize(
    ("value", "bad"),
    [
        ({"a": "é", "b": [1, "x"], "c": {"d": None}}, None),
        ({"a": "\ud800"}, "\ud800"),
        ({"\udc00": 1}, "\udc00"),
        ({"a": [{"b": ("ok", "\ud83d")}]}, "\ud83d"),
        ({"when": dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "n": float("nan"), "raw": b"\xff"}, None),
        ({"o": Opaque(), "t": "\ud800"}, "\ud800"),
        ({"o": Opaque(), "t": "fine"}, None),
        ("\ud800", "\ud800"),
        (42, None),
    ],
)
def test_lone_surrogate(value: Any, bad: str | None) -> None:
    assert lone_surrogate(value) == bad
