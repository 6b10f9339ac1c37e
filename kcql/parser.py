"""KCQL text -> :class:`~kcql.model.SinkPlan`: the lark grammar, the tree walk and the error mapping.

The grammar (``grammar.lark``, loaded with :mod:`importlib.resources`) is parsed with lark's LALR
parser over the whole text at once, so every token and every error carries a position relative
to the whole text, even in the third of several ``;``-separated statements. Lark's exceptions are
translated here into :class:`KcqlSyntaxError` with user words ("expected one of: FROM, ','"), never
terminal names; a lark traceback must never reach a terminal. Meaning (formats, PARTITIONBY specs,
PROPERTIES) is checked by :mod:`kcql._semantics`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from kcql import _semantics
from kcql.errors import KcqlSyntaxError
from kcql.model import SinkPlan

__all__ = ["OTHER_CONNECTOR_KEYWORDS", "parse", "parse_one"]

OTHER_CONNECTOR_KEYWORDS: dict[str, str] = {
    **dict.fromkeys(
        (
            "UPSERT",
            "AUTOCREATE",
            "AUTOEVOLVE",
            "BATCH",
            "PK",
            "WITHTIMESTAMP",
            "SYS_TIME",
            "TIMESTAMPUNIT",
            "WITHTAG",
            "WITHKEY",
            "KEYDELIMITER",
            "WITHSTRUCTURE",
            "WITHTYPE",
            "WITHFORMAT",
            "WITHUNWRAP",
            "INCREMENTALMODE",
            "WITHDOCTYPE",
            "WITHINDEXSUFFIX",
            "WITHCONVERTER",
            "WITHJMSSELECTOR",
            "WITHTARGET",
            "WITHSUBSCRIPTION",
            "WITHPIPELINE",
            "WITHREGEX",
            "TTL",
        ),
        "current",
    ),
    **dict.fromkeys(
        (
            "UPDATE",
            "CAPITALIZE",
            "INITIALIZE",
            "PROJECTTO",
            "DISTRIBUTEBY",
            "CLUSTERBY",
            "BUCKETS",
            "WITHGROUP",
            "WITHOFFSET",
            "SAMPLE",
            "EVERY",
            "WITHCOMPRESSION",
            "WITHDELAY",
            "WITH_SCHEMA_EVOLUTION",
            "WITH_TABLE_LOCATION",
            "WITH_OVERWRITE",
            "WITH_PARTITIONING",
            "WITH_SESSION",
            "WITH_ACK",
            "WITH_ENCODE_BASE64",
            "WITH_LOCK_TIME",
        ),
        "legacy",
    ),
}
"""Keywords of Lenses' KCQL lexer that belong to other connectors (JDBC, Cassandra, Elastic, MQTT,
JMS, ...), never to an S3 sink: ``current`` ones are in ``ConnectorLexer.g4`` of 11.x, ``legacy``
ones only in the <= 6.x grammar (removed by stream-reactor #1040 and later). Lenses' parser accepts
them and its S3 sink ignores them silently; kcql-sink rejects them, positioned at the keyword, so a
statement copied from another connector does not silently lose its meaning."""

_KEYWORDS = (
    "INSERT",
    "INTO",
    "SELECT",
    "FROM",
    "AS",
    "IGNORE",
    "PARTITIONBY",
    "NOPARTITION",
    "STOREAS",
    "WITHPARTITIONER",
    "WITH_FLUSH_SIZE",
    "WITH_FLUSH_INTERVAL",
    "WITH_FLUSH_COUNT",
    "LIMIT",
    "PROPERTIES",
)
_PUNCTUATION = {
    "STAR": "'*'",
    "COMMA": "','",
    "LPAR": "'('",
    "RPAR": "')'",
    "EQUAL": "'='",
    "_SEMI": "';'",
    "SEMICOLON": "';'",
    "$END": "end of input",
}
_NAME_TERMINALS = ("NAME", "BQ", "STRING", "GNAME", "GBQ", "GSTRING")
_FIRST_PIECES = ("NAME", "BQ", "STRING")


class _GluePieces:
    """Post-lexer: a name piece that touches the previous piece (no whitespace) continues its name.

    ``_key.`cost.centre.id``` is NAME + BQ glued into one name, while ``FROM my topic`` is two
    names, which the grammar rejects at ``topic`` with a proper "expected one of" list.
    """

    always_accept: tuple[str, ...] = ()

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        previous: Token | None = None
        for tok in stream:
            if (
                previous is not None
                and tok.type in _FIRST_PIECES
                and previous.type in _NAME_TERMINALS
                and tok.start_pos == previous.end_pos
                # like our own keywords, another connector's keyword right after a closing quote
                # is that keyword (`AVRO`BATCH=5), so it gets its own error
                and not (previous.type not in ("NAME", "GNAME") and _other_keyword(tok))
            ):
                tok.type = "G" + tok.type
            previous = tok
            yield tok


def _other_keyword(tok: Token) -> bool:
    return str(tok).upper() in OTHER_CONNECTOR_KEYWORDS


@functools.cache
def _parser() -> Lark:
    grammar = resources.files("kcql").joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="basic", postlex=_GluePieces(), propagate_positions=True)


def parse(text: str) -> tuple[SinkPlan, ...]:
    """Compile one or more ``;``-separated KCQL statements into plans, in statement order.

    Raises:
        KcqlSyntaxError: the text does not parse (or holds no statement at all).
        KcqlSemanticError: a statement parses but asks for something the sink cannot do.
    """
    if not isinstance(text, str):
        raise TypeError(f"KCQL must be a str, not {type(text).__name__}")
    if not re.sub(r"(?m)^\s*--[^\n]*", "", text).replace(";", "").strip():
        raise KcqlSyntaxError(
            "no KCQL statement found; expected INSERT INTO bucket[:prefix] SELECT * FROM topic",
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


def parse_one(text: str) -> SinkPlan:
    """Compile exactly one statement (a trailing ``;`` is fine).

    Raises:
        KcqlSyntaxError: the text does not parse, or holds more than one statement.
        KcqlSemanticError: see :func:`parse`.
    """
    plans = parse(text)
    if len(plans) != 1:
        second = plans[1]
        raise KcqlSyntaxError(
            f"expected exactly one KCQL statement, found {len(plans)}", text, second.line, 1
        )
    return plans[0]


# --------------------------------------------------------------------------- tree walk


@dataclass(frozen=True, slots=True)
class Name:
    """A name as written: adjacent pieces (bare, `backticked`, 'quoted'), with its position."""

    tokens: tuple[Token, ...]

    @property
    def first(self) -> Token:
        return self.tokens[0]

    @property
    def value(self) -> str:
        """The name with one pair of quotes removed from each quoted piece."""
        return "".join(_unquote(t) for t in self.tokens)

    @property
    def quoted(self) -> bool:
        return any(t.type != "NAME" for t in self.tokens)


def _unquote(tok: Token) -> str:
    return str(tok)[1:-1] if tok.type in ("BQ", "STRING") else str(tok)


def _name(node: Tree) -> Name:
    tokens = (t for t in node.children if isinstance(t, Token))
    # glued pieces (GNAME, ...) are plain pieces again once they are part of a name
    return Name(tuple(Token.new_borrow_pos(t.type.removeprefix("G"), t.value, t) for t in tokens))


def _only_tree(node: Tree) -> Tree:
    (child,) = (c for c in node.children if isinstance(c, Tree))
    return child


def _select_item(node: Tree) -> _semantics.RawField:
    """``*``, or a name with an optional touching ``*`` (``f.*``) and an optional ``AS alias``."""
    tokens = [t for t in node.children if isinstance(t, Token)]
    star = next((t for t in tokens if t.type == "STAR"), None)
    if node.data == "select_star":
        return _semantics.RawField(None, star, None)
    names = [_name(n) for n in node.children if isinstance(n, Tree)]
    return _semantics.RawField(names[0], star, names[1] if len(names) > 1 else None)


def _raw_statement(node: Tree, text: str) -> _semantics.RawStatement:
    """One statement's parse tree as written: its clauses, not yet checked (``kcql.replay`` reads
    the same tree with INTO and FROM swapped)."""
    raw = _semantics.RawStatement(
        text=text,
        statement=text[node.meta.start_pos : node.meta.end_pos],
        line=node.meta.line,
    )
    for child in node.children:
        if not isinstance(child, Tree):
            continue
        kind = child.data
        subtrees = [c for c in child.children if isinstance(c, Tree)]
        if kind == "target":
            raw.target = _name(subtrees[0])
        elif kind == "topic":
            raw.topic = _name(subtrees[0])
        elif kind == "select_list":
            raw.fields = [_select_item(item) for item in subtrees]
        elif kind == "ignore":
            raw.ignore = [_select_item(item) for item in subtrees]
        elif kind == "nopartition":
            raw.nopartition = True
        elif kind == "partitionby":
            raw.partitions = [_name(_only_tree(p)) for p in subtrees]
        elif kind == "storeas":
            raw.storeas = _name(subtrees[0])
        elif kind == "legacy":
            keyword = subtrees[0].children[0]
            if isinstance(keyword, Token):
                raw.legacy.append((keyword, _name(subtrees[-1])))
        elif kind == "limit":
            raw.limit = _name(subtrees[0])
        elif kind == "properties":
            raw.has_properties = True
            for prop in subtrees:
                key, value = (_name(n) for n in prop.children if isinstance(n, Tree))
                raw.properties.append((key, value))
    return raw


def _statement(node: Tree, text: str) -> SinkPlan:
    return _semantics.compile_statement(_raw_statement(node, text))


# --------------------------------------------------------------------------- errors


def _describe(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type in _KEYWORDS:
        return f"keyword {str(tok).upper()}"
    if tok.type in _NAME_TERMINALS:
        return f"name {str(tok)!r}"
    return f"{str(tok)!r}"


def _friendly_expected(terminals: set[str] | frozenset[str]) -> tuple[str, ...]:
    out: list[str] = [k for k in _KEYWORDS if k in terminals]
    if any(t in terminals for t in _FIRST_PIECES):
        out.append("a name")
    for term, shown in _PUNCTUATION.items():
        if term in terminals and shown not in out:
            out.append(shown)
    return tuple(out)


def _end_position(text: str) -> tuple[int, int]:
    """Line and column just after the last non-blank character (where 'end of input' is)."""
    stripped = text.rstrip()
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column


def _expected(exc: UnexpectedToken) -> set[str]:
    """The terminals the parser would really accept here.

    LALR merges lookaheads of states shared by every use of ``name``, so ``exc.expected`` can list
    keywords that are not valid at this point; the interactive parser tries each one for real.
    """
    parser = getattr(exc, "interactive_parser", None)
    if parser is not None:
        return set(parser.accepts())
    return set(exc.expected)  # pragma: no cover - LALR errors always carry the parser


def _syntax_error(exc: UnexpectedInput, text: str) -> KcqlSyntaxError:
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected_terms = _expected(exc)
        expected = _friendly_expected(expected_terms)
        if tok.type == "$END":
            line, column = _end_position(text)
            message = "unexpected end of input"
        else:
            line, column = tok.line or 1, tok.column or 1
            word = str(tok).upper()
            if tok.type in _FIRST_PIECES and _other_keyword(tok):
                message = (
                    f"unexpected keyword {word}: {word} belongs to the KCQL of other Lenses connectors "
                    "and is not supported by an S3 sink"
                )
                return KcqlSyntaxError(message, text, line, column, expected)
            message = f"unexpected {_describe(tok)}"
            hint = _hint(tok, expected_terms, text)
            if hint:
                message += f" ({hint})"
        return KcqlSyntaxError(message, text, line, column, expected)
    if isinstance(exc, UnexpectedCharacters):
        pos = exc.pos_in_stream if exc.pos_in_stream is not None else -1
        char = text[pos] if 0 <= pos < len(text) else ""
        if char == "`":
            message = "unterminated backtick: a `quoted name` needs a closing `"
        elif char == "'":
            message = "unterminated string: a 'string' needs a closing ' on the same line"
        else:
            message = f"unexpected character {char!r}"
        return KcqlSyntaxError(message, text, exc.line or 1, exc.column or 1)
    line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    return KcqlSyntaxError(str(exc).splitlines()[0], text, line, column)


def _previous_word(text: str, pos: int) -> str:
    match = re.search(r"([A-Za-z_]+)\s*$", text[:pos])
    return match.group(1).upper() if match else ""


def _hint(tok: Token, expected: set[str], text: str) -> str:
    """A targeted hint for the mistakes people actually make."""
    value = str(tok)
    previous = _previous_word(text, tok.start_pos or 0)
    if tok.type == "EQUAL" and previous == "LIMIT":
        return "LIMIT takes a number without '=', e.g. LIMIT 5000"
    if tok.type == "STAR" and previous == "FROM":
        return "the all-topics wildcard must be backticked: FROM `*`"
    if tok.type in _NAME_TERMINALS:
        if value.startswith(".") and text[: tok.start_pos or 0].endswith("*"):
            return "a '*' ends a field path: f.* selects every field of f, * alone the whole value"
        if value.upper() == "WHERE":
            return "KCQL has no WHERE clause"
        for keyword in sorted(expected & set(_KEYWORDS), key=len, reverse=True):
            if value.upper().startswith(keyword) and len(value) > len(keyword):
                return f"missing space after {keyword}? write {keyword} {value[len(keyword) :]}"
        if "FROM" in expected:
            return "missing FROM before the topic?"
        if "EQUAL" in expected:
            return "properties are written 'key'=value"
        if "GNAME" in expected:
            return "a name cannot contain spaces; quote it with backticks"
    if tok.type in _KEYWORDS and "NAME" in expected:
        return f"{value.upper()} is a keyword; quote a name that equals a keyword with backticks"
    return ""
