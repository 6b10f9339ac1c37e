"""Java ``Double.toString`` parity for partition values."""

from __future__ import annotations

import pytest

from partitioners.render import java_double

# (value, what Java 19+ Double.toString prints)
JAVA = [
    (200.0, "200.0"),
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (1.0, "1.0"),
    (0.1, "0.1"),
    (0.001, "0.001"),
    (0.000999, "9.99E-4"),
    (1234567.0, "1234567.0"),
    (9999999.0, "9999999.0"),
    (1e7, "1.0E7"),
    (12345678.9, "1.23456789E7"),
    (1e21, "1.0E21"),
    (-2.5e-10, "-2.5E-10"),
    (123456.789, "123456.789"),
    (float("nan"), "NaN"),
    (float("inf"), "Infinity"),
    (float("-inf"), "-Infinity"),
    (5e-324, "4.9E-324"),
    (1.7976931348623157e308, "1.7976931348623157E308"),
]


@pytest.mark.parametrize(("value", "text"), JAVA)
def test_java_double(value, text):
    assert java_double(value) == text
