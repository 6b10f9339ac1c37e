"""Data flows one way, and so do imports: kcql -> formats/partitioners -> sink's layers -> cli.

Every import counts, wherever it is: at the top, inside a function (a hidden cycle is still a
cycle) and under ``TYPE_CHECKING`` (a type a package reads belongs in its own base module, as a
Protocol). A module may import its own unit and the units of the layers below it; nothing else.
The layers are README's architecture picture:

    kcql                                    the language: grammar, plan, what it validates
    formats, partitioners                   one writer per STOREAS; record -> path, the layout
    spark_reader                            reads the committed layout (plan + layout contract)
    sink.records, sink._logging,            records and batches, converters; logging set-up;
      sink.arrow_allocator                  Arrow's allocator (chosen when ``sink`` is imported)
    sink.transforms                         Connect SMTs and predicates, Python mappers
    sink.events, sink.config                the observer; settings, secrets, validate()
    sink.storage                            the storage backends (local directory, S3)
    sink.commit                             staging, the index, the committer, background commits
    sink.task                               the task: writers, flush policy, timer
    sink.runtime                            the consumer loop, the error policy, the DLQ
    sink.spark                              the same pipeline inside Spark executors
    sink.replay                             committed files back into Kafka (kcql-sink replay)
    sink.rest, sink.quickstart              the Connect REST worker; demo and embedded servers
    sink.cli                                the command line
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LAYERS: tuple[tuple[str, ...], ...] = (
    ("kcql",),
    ("formats", "partitioners"),
    ("spark_reader",),
    ("sink.records", "sink._logging", "sink.arrow_allocator"),
    ("sink.transforms",),
    ("sink.events", "sink.config"),
    ("sink.storage",),
    ("sink.commit",),
    ("sink.task",),
    ("sink.runtime",),
    ("sink.spark",),
    ("sink.replay",),
    ("sink.rest", "sink.quickstart"),
    ("sink.cli",),
)
PACKAGES = ("kcql", "formats", "partitioners", "spark_reader", "sink")


def unit_of(module: str) -> str | None:
    """The longest unit of :data:`LAYERS` that ``module`` belongs to (None: not ours, or ``sink``)."""
    units = [u for layer in LAYERS for u in layer if module == u or module.startswith(u + ".")]
    return max(units, key=len) if units else None


def layer_of(unit: str) -> int:
    """The unit's layer; ``sink`` itself (or a module of it outside every unit) is above them all."""
    return next((i for i, layer in enumerate(LAYERS) if unit in layer), len(LAYERS))


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path, text: str | None = None) -> list[tuple[int, str]]:
    """``(line, imported module)`` for every import in the file (or ``text`` as if it were that
    file), wherever it sits."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8") if text is None else text)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from sink import runtime`` imports the submodule sink.runtime
            found.extend(
                (node.lineno, f"{target}.{alias.name}")
                for alias in node.names
                if alias.name != "*" and unit_of(f"{target}.{alias.name}") != unit_of(target)
            )
    return found


def product_files() -> list[Path]:
    return sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))


def test_every_product_module_has_a_layer() -> None:
    orphans = [module_name(p) for p in product_files() if unit_of(module_name(p)) is None]
    assert orphans in ([], ["sink"]), f"modules outside every layer: {orphans}"


@pytest.mark.parametrize("path", product_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_imports_point_down_the_layers(path: Path) -> None:
    source = unit_of(module_name(path))
    if source is None:
        return  # sink/__init__.py
    wrong = []
    for line, target in imports_of(path):
        unit = unit_of(target)
        if unit is None and target.split(".")[0] == "sink":
            unit = "sink"
        if unit is None or unit == source:
            continue
        if layer_of(unit) >= layer_of(source):
            wrong.append(f"line {line}: {source} -> {target}")
    assert not wrong, "imports against the data flow:\n" + "\n".join(wrong)


def test_the_check_sees_hidden_imports() -> None:
    """The walk finds function-level and TYPE_CHECKING imports (the cycles that hid before)."""
    probe = ROOT / "formats" / "probe.py"
    text = (
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from sink.records.record import SinkRecord\n"
        "def f():\n    from partitioners import escape\n    from . import base\n"
    )
    found = [target for _, target in imports_of(probe, text)]
    assert {"sink.records.record", "partitioners", "formats"} <= set(found)
    assert {unit_of(t) for t in found} >= {"sink.records", "partitioners", "formats"}
