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
import itertools
from dataclasses import dataclass
from importlib import resources

from lark import Lark, Token, Tree
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from kcql import _semantics
from kcql.errors import KcqlSyntaxError
from kcql.model import SinkPlan

__all__ = ["parse", "parse_one"]

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
_NAME_TERMINALS = ("NAME", "BQ", "STRING")


@functools.cache
def _parser() -> Lark:
    grammar = resources.files("kcql").joinpath("grammar.lark").read_text(encoding="utf-8")
    return Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True)


def parse(text: str) -> tuple[SinkPlan, ...]:
    """Compile one or more ``;``-separated KCQL statements into plans, in statement order.

    Raises:
        KcqlSyntaxError: the text does not parse (or holds no statement at all).
        KcqlSemanticError: a statement parses but asks for something the sink cannot do.
    """
    if not isinstance(text, str):
        raise TypeError(f"KCQL must be a str, not {type(text).__name__}")
    if not text.replace(";", "").strip():
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


def _name(node: Tree, text: str) -> Name:
    tokens = tuple(t for t in node.children if isinstance(t, Token))
    for prev, tok in itertools.pairwise(tokens):
        if tok.start_pos != prev.end_pos:
            raise KcqlSyntaxError(
                f"unexpected {_describe(tok)}: a name cannot contain spaces (quote it with backticks)",
                text,
                tok.line or 1,
                tok.column or 1,
            )
    return Name(tokens)


def _statement(node: Tree, text: str) -> SinkPlan:
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
            raw.target = _name(subtrees[0], text)
        elif kind == "topic":
            raw.topic = _name(subtrees[0], text)
        elif kind == "select_all":
            raw.fields = []
        elif kind == "select_fields":
            raw.fields = []
            for field in subtrees:
                names = [_name(n, text) for n in field.children if isinstance(n, Tree)]
                raw.fields.append((names[0], names[1] if len(names) > 1 else None))
        elif kind == "ignore":
            raw.ignore = [_name(n, text) for n in subtrees]
        elif kind == "nopartition":
            raw.nopartition = True
        elif kind == "partitionby":
            raw.partition_keyword = child.children[0]
            raw.partitions = [_name(p.children[0], text) for p in subtrees]
        elif kind == "storeas":
            raw.storeas = _name(subtrees[0], text)
        elif kind == "legacy":
            keyword = subtrees[0].children[0]
            raw.legacy.append((keyword, _name(subtrees[-1], text)))
        elif kind == "limit":
            raw.limit = _name(subtrees[0], text)
        elif kind == "properties":
            raw.has_properties = True
            for prop in subtrees:
                key, value = (_name(n, text) for n in prop.children if isinstance(n, Tree))
                raw.properties.append((key, value))
    return _semantics.compile_statement(raw)


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
    if any(t in terminals for t in _NAME_TERMINALS):
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


def _syntax_error(exc: UnexpectedInput, text: str) -> KcqlSyntaxError:
    if isinstance(exc, UnexpectedToken):
        tok = exc.token
        expected = _friendly_expected(exc.expected)
        if tok.type == "$END":
            line, column = _end_position(text)
            message = "unexpected end of input"
        else:
            line, column = tok.line or 1, tok.column or 1
            message = f"unexpected {_describe(tok)}"
            hint = _hint(tok, exc)
            if hint:
                message += f" ({hint})"
        return KcqlSyntaxError(message, text, line, column, expected)
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if 0 <= exc.pos_in_stream < len(text) else ""
        if char == "`":
            message = "unterminated backtick: a `quoted name` needs a closing `"
        elif char == "'":
            message = "unterminated string: a 'string' needs a closing ' on the same line"
        else:
            message = f"unexpected character {char!r}"
        return KcqlSyntaxError(
            message, text, exc.line or 1, exc.column or 1, _friendly_expected(set(exc.allowed or ()))
        )
    line, column = getattr(exc, "line", 1) or 1, getattr(exc, "column", 1) or 1
    return KcqlSyntaxError(str(exc).splitlines()[0], text, line, column)


def _hint(tok: Token, exc: UnexpectedToken) -> str:
    """A targeted hint for the mistakes people actually make."""
    value = str(tok)
    history = getattr(exc, "token_history", None) or []
    previous = history[-1] if history else None
    if tok.type == "EQUAL" and previous is not None and previous.type == "LIMIT":
        return "LIMIT takes a number without '=', e.g. LIMIT 5000"
    if tok.type in _NAME_TERMINALS:
        for keyword in sorted(exc.expected & set(_KEYWORDS), key=len, reverse=True):
            if value.upper().startswith(keyword) and len(value) > len(keyword):
                return f"missing space after {keyword}? write {keyword} {value[len(keyword) :]}"
        if "FROM" in exc.expected:
            return "missing FROM before the topic?"
        if tok.type == "NAME" and "EQUAL" in exc.expected:
            return "properties are written 'key'=value"
    if tok.type == "STAR" and "FROM" not in exc.expected and previous is not None and previous.type == "FROM":
        return "the all-topics wildcard must be backticked: FROM `*`"
    if tok.type in _KEYWORDS and "a name" in _friendly_expected(exc.expected):
        return f"{value.upper()} is a keyword here; quote a name that equals a keyword with backticks"
    return ""
