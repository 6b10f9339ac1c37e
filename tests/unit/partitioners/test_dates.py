"""``_date`` patterns: the Java DateTimeFormatter letters Lenses docs use, in UTC."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from partitioners import DatePattern, DatePatternError, validate_date_pattern

TS = int(dt.datetime(2010, 4, 2, 3, 4, 5, 678_000, tzinfo=dt.UTC).timestamp() * 1000)


@pytest.mark.parametrize(
    ("pattern", "text"),
    [
        ("uuuu", "2010"),
        ("yyyy", "2010"),
        ("u", "2010"),
        ("y", "2010"),
        ("uu", "10"),
        ("yy", "10"),
        ("MM", "04"),
        ("M", "4"),
        ("LL", "04"),
        ("L", "4"),
        ("dd", "02"),
        ("d", "2"),
        ("HH", "03"),
        ("H", "3"),
        ("mm", "04"),
        ("m", "4"),
        ("ss", "05"),
        ("s", "5"),
        ("S", "6"),
        ("SSS", "678"),
        ("SSSSSS", "678000"),
        ("uuuu-MM-dd", "2010-04-02"),
        ("uuuu/MM/dd", "2010/04/02"),
        ("uuuu_MM_dd HH:mm:ss.SSS", "2010_04_02 03:04:05.678"),
        ("'year='uuuu", "year=2010"),
        ("'T'HH", "T03"),
        ("HH''mm", "03'04"),
        ("'it''s' uuuu", "it's 2010"),
    ],
)
def test_patterns(pattern, text):
    assert DatePattern(pattern).format(TS) == text


def test_before_epoch_and_far_future():
    assert DatePattern("uuuu-MM-dd HH:mm:ss.SSS").format(-1) == "1969-12-31 23:59:59.999"
    assert DatePattern("uuuu").format(253_402_300_799_999) == "9999"


@pytest.mark.parametrize("pattern", ["", "EEE", "MMM", "uuuu[MM]", "'open", "hh", "a", "Q", "uuuu,MM", "dd#"])
def test_unsupported_patterns_are_rejected_with_position(pattern):
    with pytest.raises(DatePatternError) as info:
        validate_date_pattern(pattern)
    assert repr(pattern) in str(info.value) or not pattern


@given(st.integers(-62_135_596_800_000, 253_402_300_799_999))
def test_matches_strftime_in_utc(ts):
    moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ts)
    expected = f"{moment.year:04d}-{moment:%m-%d %H:%M:%S}.{moment.microsecond // 1000:03d}"
    assert DatePattern("uuuu-MM-dd HH:mm:ss.SSS").format(ts) == expected


def test_split_directories_and_empty_pieces():
    from partitioners.dates import split_directories

    assert split_directories("uuuu/MM/dd") == ["uuuu", "MM", "dd"]
    assert split_directories("uuuu'/'MM") == ["uuuu'/'MM"]
    for bad in ("uuuu//MM", "/uuuu", "uuuu/"):
        with pytest.raises(DatePatternError, match="empty directory"):
            validate_date_pattern(bad)
