"""The reverse KCQL form read by ``kcql-sink replay``: ``INSERT INTO topic SELECT * FROM bucket:prefix``.

This is the statement shape of the Lenses S3 *source* connector (``CloudSourceBucketOptions``:
the KCQL target is the Kafka topic, the source is ``bucket[:prefix]``, ``STOREAS`` names the
format of the stored files, ``LIMIT`` caps the records per poll). The same grammar parses it
(``kcql/grammar.lark``); only the meaning of INTO and FROM is swapped. Because replay reads files
the sink wrote, the statement describes that layout with the sink's own words: ``PARTITIONBY`` /
``NOPARTITION`` and ``PROPERTIES`` such as ``store.envelope``, ``partition.include.keys``,
``padding.*`` and ``file.naming``. The layout is compiled by the sink's compiler, as a statement
``INSERT INTO bucket:prefix SELECT * FROM `*` ...`` (every topic under the prefix), so a path
parses identically for the sink and for replay; errors keep their line, column and caret in the
text as written.
"""

from __future__ import annotations

from dataclasses import dataclass

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from kcql import _semantics
from kcql.errors import KcqlSemanticError, KcqlSyntaxError
from kcql.model import SinkPlan, StoreFormat
from kcql.parser import Name, _parser, _raw_statement, _syntax_error

__all__ = ["ReplayPlan", "parse_replay"]

REPLAY_PROPERTIES = ("source.topic",)
"""Properties only replay reads (the rest describe the layout and go to the sink's compiler)."""


@dataclass(frozen=True, slots=True)
class ReplayPlan:
    """One reverse statement: which files to read (``layout``) and where their records go."""

    topic: str
    """The Kafka topic records are produced to (the statement's INTO)."""
    layout: SinkPlan
    """The sink statement that wrote the files: bucket, prefix, format, PARTITIONBY, envelope..."""
    source_topic: str | None = None
    """Only files of this archived topic (``'source.topic'`` property); ``None``: every topic."""
    limit: int | None = None
    """LIMIT n: records per transaction (Lenses: records per poll)."""
    statement: str = ""
    line: int = 1

    @property
    def bucket(self) -> str:
        return self.layout.bucket

    @property
    def prefix(self) -> str:
        return self.layout.prefix


def parse_replay(text: str) -> tuple[ReplayPlan, ...]:
    """Compile one or more ``;``-separated reverse statements.

    Raises:
        KcqlSyntaxError: the text does not parse.
        KcqlSemanticError: a statement is a sink statement (INTO bucket:prefix), or its layout is wrong.
    """
    if not isinstance(text, str):
        raise TypeError(f"KCQL must be a str, not {type(text).__name__}")
    if not text.replace(";", "").strip():
        raise KcqlSyntaxError(
            "no KCQL statement found; expected INSERT INTO topic SELECT * FROM bucket:prefix",
            text,
            1,
            1,
            ("INSERT",),
        )
    try:
        tree = _parser().parse(text)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text) from None
    return tuple(_statement(node, text) for node in tree.children if isinstance(node, Tree))


def _statement(node: Tree, text: str) -> ReplayPlan:
    raw = _raw_statement(node, text)
    into, source = raw.target, raw.topic  # reversed: INTO names the topic, FROM the bucket:prefix
    if into is None or source is None:  # pragma: no cover - the grammar requires both
        raise KcqlSemanticError("INSERT INTO and FROM are required", text, raw.line, 1)
    topic = into.value.strip()
    if ":" in topic:
        raise _error(
            raw,
            into.first,
            f"replay writes to a Kafka topic, but INTO names {topic!r}, which looks like bucket:prefix; the "  # noqa: S608
            "replay form is INSERT INTO topic SELECT * FROM bucket:prefix (the sink's statement reversed)",
        )
    if not topic:
        raise _error(raw, into.first, "the target topic name is empty")
    if raw.fields and any(f.name is not None for f in raw.fields):
        bad = next(f.name for f in raw.fields if f.name is not None)
        raise _error(raw, bad.first, "replay restores whole records: only SELECT * is supported")
    if raw.ignore:
        first = raw.ignore[0]
        at = first.name.first if first.name is not None else (first.star or into.first)
        raise _error(raw, at, "replay restores whole records: IGNORE is not supported")
    replay_props: dict[str, Name] = {}
    layout_props: list[tuple[Name, Name]] = []
    for key, value in raw.properties:
        name = key.value.strip().lower()
        if name in REPLAY_PROPERTIES:
            replay_props[name] = value
        else:
            layout_props.append((key, value))
    raw.properties = layout_props
    fmt_name = raw.storeas.value.strip().upper() if raw.storeas is not None else ""
    if fmt_name == StoreFormat.BYTES.value and not any(
        k.value.strip().lower() == "flush.count" for k, _ in layout_props
    ):
        # a BYTES file holds one record; the sink insists on flush.count=1, replay need not
        raw.properties.append((_synthetic(source, "flush.count"), _synthetic(source, "1")))
    raw.target = source
    raw.topic = _synthetic(source, "`*`", "BQ")
    layout = _semantics.compile_statement(raw)
    source_topic = replay_props["source.topic"].value.strip() if "source.topic" in replay_props else None
    return ReplayPlan(
        topic=topic,
        layout=layout,
        source_topic=source_topic or None,
        limit=layout.limit,
        statement=raw.statement,
        line=raw.line,
    )


def _synthetic(at: Name, text: str, kind: str = "NAME") -> Name:
    """A name the user did not write, positioned at ``at`` (errors about it point there)."""
    return Name((Token.new_borrow_pos(kind, text, at.first),))


def _error(raw: _semantics.RawStatement, at: Token, message: str) -> KcqlSemanticError:
    return KcqlSemanticError(message, raw.text, at.line or 1, at.column or 1)
