"""The language package stands alone: kcql imports nothing from formats, partitioners or sink.

What the language validates (codecs per STOREAS format, ``_date`` pattern letters) lives in
``kcql.codecs`` and ``kcql.dates``; ``formats`` and ``partitioners`` read those tables, never the
other way round (an import inside a function is still an import cycle, only a hidden one).
"""

from __future__ import annotations

import ast
import itertools
import subprocess
import sys
from pathlib import Path

import pytest

import formats.codecs
import kcql.codecs
import kcql.dates
import partitioners.dates
from formats.base import FormatError
from kcql.model import StoreFormat

KCQL_DIR = Path(kcql.__file__).parent
FOREIGN = ("formats", "partitioners", "sink", "spark_reader")


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return names


@pytest.mark.parametrize("path", sorted(KCQL_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_kcql_module_imports_another_package(path: Path) -> None:
    foreign = {m for m in _imported_modules(path) if m.split(".")[0] in FOREIGN}
    assert not foreign, f"{path.name} imports {sorted(foreign)}"


_SCRIPT = """
import sys, kcql
kcql.parse(sys.argv[1])
for bad in sys.argv[2:]:
    try:
        kcql.parse(bad)
    except kcql.KcqlSemanticError:
        pass
foreign = ("formats", "partitioners", "sink", "spark_reader")
print(sorted(m for m in sys.modules if m.split(".")[0] in foreign))
"""


def test_compiling_codecs_and_date_patterns_loads_no_other_package() -> None:
    statements = [
        (
            "INSERT INTO b SELECT * FROM t PARTITIONBY _date.`uuuu/MM` STOREAS AVRO "
            "PROPERTIES('compression.codec'='zstd', 'compression.level'=3)"
        ),
        "INSERT INTO b SELECT * FROM t PARTITIONBY _date.ww",
        "INSERT INTO b SELECT * FROM t STOREAS CSV PROPERTIES('compression.codec'='gzip')",
    ]
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, *statements], capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "[]"


def test_formats_encodes_exactly_the_codecs_the_language_accepts() -> None:
    """formats.codecs checks with kcql.codecs' rule and has an encoder name for each legal codec."""
    assert set(formats.codecs.AVRO_CODECS) == set(kcql.codecs.supported_codecs(StoreFormat.AVRO))
    assert set(formats.codecs.PARQUET_CODECS) == set(kcql.codecs.supported_codecs(StoreFormat.PARQUET))
    assert set(formats.codecs.DEFAULT_LEVELS) == set(kcql.codecs.LEVEL_RANGES)
    for codec, level in formats.codecs.DEFAULT_LEVELS.items():
        low, high = kcql.codecs.LEVEL_RANGES[codec]
        assert low <= level <= high, codec
    names = (*kcql.codecs.CODEC_NAMES, "none", "zstandard", "gz", "null", "rar", None)
    for fmt, codec, level in itertools.product(StoreFormat, names, (None, -1, 0, 3, 9, 11, 22, 23)):
        try:
            expected: object = formats.codecs.check_codec(fmt, codec, level)
        except FormatError as exc:
            expected = str(exc)
        try:
            got: object = kcql.codecs.check_codec(fmt, codec, level)
        except kcql.codecs.CodecError as exc:
            got = str(exc)
        assert got == expected, (fmt, codec, level)


def test_partitioners_format_exactly_what_kcql_accepts() -> None:
    assert partitioners.dates.validate_date_pattern is kcql.dates.validate_date_pattern
    assert partitioners.dates.DatePatternError is kcql.dates.DatePatternError
    assert partitioners.dates.split_directories is kcql.dates.split_directories
    assert kcql.dates.tokenize("uuuu-MM'T'") == [
        kcql.dates.DateField("u", 4),
        "-",
        kcql.dates.DateField("M", 2),
        "T",
    ]
