"""Error hierarchy shared by every kcql-sink package.

The root lives here, in the package every other one already depends on (the plan), so that
``sink``, ``formats``, ``partitioners`` and ``spark_reader`` can all subclass it without an
import cycle. Each package keeps its own leaf errors next to its code.

    SinkError                     retriable: ClassVar[bool], as in aiokafka
    ├── KcqlError(ValueError)     a KCQL statement is wrong; carries line, column and a caret
    │   ├── KcqlSyntaxError       the text does not parse
    │   └── KcqlSemanticError     it parses, but means something the sink cannot do
    ├── ConfigError(ValueError)   connector configuration; lists every invalid key at once
    ├── RecordError               one record cannot be written; the error policy decides
    │                             (ConversionError, PartitionError, RecordFormatError)
    └── (sink/, formats/, partitioners/ add StorageError, CommitError, FormatError, ...)
"""

from __future__ import annotations

from typing import ClassVar, Literal

__all__ = [
    "ConfigError",
    "ConfigProblem",
    "KcqlError",
    "KcqlSemanticError",
    "KcqlSyntaxError",
    "RecordError",
    "SinkError",
    "Stage",
]


class SinkError(Exception):
    """Root of every error kcql-sink raises on purpose.

    ``retriable`` tells the task runtime whether trying the same operation again may succeed
    (a throttled S3 request) or is pointless (a malformed statement).
    """

    retriable: ClassVar[bool] = False


class KcqlError(SinkError, ValueError):
    """A KCQL statement is wrong. Carries where, so the user can fix it without guessing.

    Attributes:
        message: what is wrong, in one sentence.
        text: the whole KCQL text that was compiled.
        line: 1-based line of the offending text within ``text``.
        column: 1-based column of the offending text.
        expected: what would have been accepted there (empty when not meaningful).
    """

    kind: ClassVar[str] = "KCQL error"

    def __init__(
        self,
        message: str,
        text: str,
        line: int,
        column: int,
        expected: tuple[str, ...] = (),
    ) -> None:
        self.message = message
        self.text = text
        self.line = line
        self.column = column
        self.expected = tuple(expected)
        super().__init__(self.render())

    @property
    def source_line(self) -> str:
        """The line of ``text`` the error points into."""
        # Split on "\n" only, as the parser counts lines: str.splitlines() also splits on a lone
        # "\r", form feed or U+2028 and would quote the wrong line. A lone "\r" is shown as a space
        # (same width, so the caret still lines up) instead of moving the terminal's cursor.
        lines = [line.removesuffix("\r").replace("\r", " ") for line in self.text.split("\n")]
        return lines[min(max(self.line, 1), len(lines)) - 1]

    @property
    def caret(self) -> str:
        """A line with a ``^`` under the offending column (tabs kept so it lines up)."""
        prefix = self.source_line[: self.column - 1]
        return "".join("\t" if ch == "\t" else " " for ch in prefix) + "^"

    def render(self) -> str:
        """The full human message: what, where, the line and a caret, and what was expected."""
        parts = [f"{self.kind} at line {self.line}, column {self.column}: {self.message}"]
        parts.append("  " + self.source_line)
        parts.append("  " + self.caret)
        if self.expected:
            parts.append("expected one of: " + ", ".join(self.expected))
        return "\n".join(parts)


class KcqlSyntaxError(KcqlError):
    """The KCQL text does not parse."""

    kind = "KCQL syntax error"


class KcqlSemanticError(KcqlError):
    """The KCQL parses but asks for something the sink does not support (e.g. ``_value`` alone)."""

    kind = "KCQL error"


class ConfigProblem(tuple[str, str, str]):
    """One invalid configuration entry: (key, value as given or masked, why)."""

    __slots__ = ()

    def __new__(cls, key: str, value: str, why: str) -> ConfigProblem:
        return super().__new__(cls, (key, value, why))

    @property
    def key(self) -> str:
        return self[0]

    @property
    def value(self) -> str:
        return self[1]

    @property
    def why(self) -> str:
        return self[2]


class ConfigError(SinkError, ValueError):
    """The connector configuration is invalid. Lists every problem at once, not just the first.

    Values of secret keys must already be masked by the caller when building the problems.
    """

    def __init__(self, problems: list[ConfigProblem] | list[tuple[str, str, str]]) -> None:
        self.problems = [ConfigProblem(*p) for p in problems]
        lines = [f"{len(self.problems)} configuration problem(s):"]
        lines += [f"  {p.key}={p.value!r}: {p.why}" for p in self.problems]
        super().__init__("\n".join(lines))


Stage = Literal["KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER", "TRANSFORMATION", "TASK_PUT"]
"""Where a record failed, named as Kafka Connect names it in ``__connect.errors.stage`` headers."""


class RecordError(SinkError):
    """One record cannot go on to storage; the records around it can.

    Raised at the first bad record of a batch by whoever meets it: a converter (``KEY_CONVERTER``,
    ``VALUE_CONVERTER``, ``HEADER_CONVERTER``), a transform (``TRANSFORMATION``), the partitioner or
    the format (``TASK_PUT``). Every record before it in the batch was written, it and those after
    were not, so the error policy (in one place, :mod:`sink.runtime`) can stop the task, or log
    and dead-letter this one record and go on with the next.

    Attributes:
        offset: the record's Kafka offset: how the runtime finds its message in the batch.
        index: the record's position in the batch the raiser was given.
        stage: see :data:`Stage`.
        transient: the record may be fine and trying again later may succeed (the Schema
            Registry did not answer): never skip it, re-read it after a pause.
    """

    def __init__(
        self, message: str, *, offset: int, index: int = 0, stage: Stage = "TASK_PUT", transient: bool = False
    ) -> None:
        self.offset = offset
        self.index = index
        self.stage: Stage = stage
        self.transient = transient
        super().__init__(message)
