"""Escaping: table tests, Spark compatibility, and hypothesis properties."""

from __future__ import annotations

import string

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitioners import EMPTY, MISSING, escape, unescape
from partitioners.escaping import is_hidden_segment

# every code point, lone surrogates included (they can appear in JSON text)
ANY_TEXT = st.text(alphabet=st.characters(codec=None, categories=None))


@pytest.mark.parametrize(
    ("value", "segment"),
    [
        ("first", "first"),
        ("the killers", "the killers"),
        ("+44", "+44"),
        ("200.0", "200.0"),
        ("a-b.c", "a-b.c"),
        ("été 東京", "été 東京"),
        ("a/b", "a%2Fb"),
        ("a\\b", "a%5Cb"),
        ("..", "%2E."),
        (".", "%2E"),
        ("../x", "%2E.%2Fx"),
        ("a..b", "a..b"),
        (".hidden", "%2Ehidden"),
        ("_tmp", "%5Ftmp"),
        ("a_b", "a_b"),
        ("k=v", "k%3Dv"),
        ("100%", "100%25"),
        ("%2F", "%252F"),
        ("12:30", "12%3A30"),
        ("[missing]", "%5Bmissing%5D"),
        ("tab\there\nnl\x00\x7f", "tab%09here%0Anl%00%7F"),
        ("\x85", "%85"),
        ("\ud800x", "%uD800x"),
        ("", EMPTY),
        ('"', "%22"),
        ("a*b?c#d'e{f}g^h", "a%2Ab%3Fc%23d%27e%7Bf}g%5Eh"),
    ],
)
def test_escape_table(value, segment):
    assert escape(value) == segment
    assert unescape(segment) == value


def test_empty_token_and_missing_marker_do_not_collide_with_values():
    assert unescape(EMPTY) == ""
    assert escape('""') != EMPTY
    assert escape(MISSING) != MISSING
    assert unescape(MISSING) == MISSING


def spark_unescape(path: str) -> str:
    """Spark's ExternalCatalogUtils.unescapePathName, transcribed (for the compatibility check)."""
    out, i = [], 0
    while i < len(path):
        c = path[i]
        if c == "%" and i + 2 < len(path):
            try:
                code = int(path[i + 1 : i + 3], 16)
            except ValueError:
                code = -1
            if code >= 0:
                out.append(chr(code))
                i += 3
                continue
        out.append(c)
        i += 1
    return "".join(out)


@given(st.text(alphabet=st.characters(max_codepoint=0xFFFF, exclude_categories=("Cs",)), min_size=1))
def test_spark_decodes_our_segments_natively(value):
    # what Spark's partition discovery shows for a "name=<segment>" directory
    assert spark_unescape(escape(value)) == value


@given(ANY_TEXT)
def test_escape_roundtrip_and_safety(value):
    segment = escape(value)
    assert unescape(segment) == value
    assert segment
    assert "/" not in segment
    assert "\\" not in segment
    assert segment not in (".", "..")
    assert not is_hidden_segment(segment)
    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in segment)
    segment.encode("utf-8")  # always a valid object-key segment


@given(ANY_TEXT)
def test_escape_is_idempotent_only_on_safe_text(value):
    once = escape(value)
    safe = set(string.ascii_letters + string.digits + " +-,")
    if value and set(value) <= safe:
        assert once == value
