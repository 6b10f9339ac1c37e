"""``kcql explain``'s ``columns``: the written value's fields after SELECT and IGNORE, by hand."""

from __future__ import annotations

import pytest

import kcql
from kcql.explain import explain_columns


@pytest.mark.parametrize(
    ("statement", "columns"),
    [
        ("INSERT INTO b SELECT * FROM t", "*"),
        ("INSERT INTO b SELECT id, amount AS total, customer.email FROM t", ["id", "total", "email"]),
        ("INSERT INTO b SELECT _key, _.topic, _.offset, _header.h FROM t", ["key", "topic", "offset", "h"]),
        ("INSERT INTO b SELECT customer.*, id FROM t", ["customer.*", "id"]),
        ("INSERT INTO b SELECT * FROM t IGNORE secret, meta.pin", ["*", "-secret", "-meta.pin"]),
        ("INSERT INTO b SELECT id, secret FROM t IGNORE secret", ["id"]),
        ("INSERT INTO b SELECT id FROM t PROPERTIES('projection.enabled'=false)", "*"),
    ],
)
def test_columns(statement: str, columns: object) -> None:
    assert explain_columns(kcql.parse_one(statement)) == columns


def test_projection_enabled_must_be_a_boolean() -> None:
    with pytest.raises(kcql.KcqlError, match=r"projection\.enabled must be true or false"):
        kcql.parse_one("INSERT INTO b SELECT id FROM t PROPERTIES('projection.enabled'='maybe')")
