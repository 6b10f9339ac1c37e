"""Converted record values → the text a JVM sink would put in a partition directory.

Lenses builds partition values with Java's ``toString`` of the Connect value, so we print numbers
the way Java does (``200.0`` not ``200``, ``1.0E7`` not ``10000000.0``) to keep directory names
identical for users who switch. Rules (documented in ``docs/layout.md``):

* ``str`` as is; ``bool`` → ``true``/``false``; ``int`` → decimal digits;
* ``float`` → Java ``Double.toString`` (shortest round-trip digits, ``NaN``, ``Infinity``);
* ``Decimal`` → ``str()`` (Java ``BigDecimal.toString`` agrees for the usual scales);
* ``bytes`` → decoded as UTF-8; bytes that are not valid UTF-8 → ``0x`` + lower-case hex;
* ``dict``/``list`` → compact JSON (``{"a":1}``), non-ASCII kept;
* dates and times → ISO-8601; anything else → ``str()``.

``None`` never reaches these functions: a null field renders as ``[missing]`` (see
:data:`partitioners.escaping.MISSING`).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from decimal import Decimal
from typing import Any

__all__ = ["java_double", "to_text"]


def java_double(number: float) -> str:
    """Format ``number`` exactly like Java's ``Double.toString`` (JDK 19+, shortest digits)."""
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == 0:
        return "-0.0" if math.copysign(1.0, number) < 0 else "0.0"
    sign = "-" if number < 0 else ""
    digits_tuple = Decimal(repr(abs(number))).normalize().as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = int(digits_tuple.exponent)
    # value = 0.digits * 10**point  (scientific exponent is point - 1)
    point = len(digits) + exponent
    if 1e-3 <= abs(number) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if len(digits) == 1:
        # Java prints at least two significant digits (d.dEn) and picks the two-digit decimal
        # closest to the exact value: 1.0E7, but 4.9E-324 for the smallest subnormal.
        mantissa, exp_text = f"{abs(number):.1e}".split("e")
        return f"{sign}{mantissa}E{int(exp_text)}"
    mantissa = digits[0] + "." + digits[1:]
    return f"{sign}{mantissa}E{point - 1}"


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(raw).decode("ascii")
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)


def to_text(value: Any) -> str:
    """Render one non-null partition value as text (see the module docstring for the rules)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, bytes | bytearray | memoryview):
        raw = bytes(value)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            return "0x" + raw.hex()
    if isinstance(value, dict | list | tuple):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=_json_default)
    if isinstance(value, dt.date | dt.time):
        return value.isoformat()
    return str(value)
