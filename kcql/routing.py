"""Which statement a topic's records go to, and which statements never get any.

Lenses picks the statement of a record with
``bucketOptions.find(bo => bo.sourceTopic.isEmpty || bo.sourceTopic.contains(topic))``
(``WriterManagerCreator``, the same from 4.x to 11.x): the **first** statement whose ``FROM`` is the
topic or `` `*` `` wins, and any later statement for that topic is silently never used. Both
functions here are pure, so ``kcql check``/``explain``, ``run`` and the worker report the same thing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kcql.model import SinkPlan

__all__ = ["Shadowing", "plan_for_topic", "shadowed"]


@dataclass(frozen=True, slots=True)
class Shadowing:
    """A statement that never receives a record: an earlier statement reads its topic first."""

    statement: SinkPlan
    """The statement that is never used."""
    number: int
    """Its 1-based position among the statements."""
    winner: SinkPlan
    """The first statement that reads the same topic (or every topic) and so gets its records."""
    winner_number: int
    """The winner's 1-based position."""

    @property
    def line(self) -> int:
        """Line where the unused statement starts."""
        return self.statement.line

    @property
    def topic(self) -> str:
        """The topic the unused statement reads (``"*"`` for every topic)."""
        return self.statement.source

    @property
    def message(self) -> str:
        """One sentence for a warning, naming both statements by number and line."""
        unused = f"statement {self.number} (line {self.line})"
        first = f"statement {self.winner_number} (line {self.winner.line})"
        if self.topic == "*":
            reads = f"{unused} reads every topic (FROM `*`), but {first} already does"
        elif self.winner.source == "*":
            reads = f"{unused} reads topic {self.topic!r}, but {first} reads every topic (FROM `*`) first"
        else:
            reads = f"{unused} reads topic {self.topic!r}, but {first} reads it first"
        return (
            f"{reads}; only the first matching statement applies (as in Lenses), "
            f"so statement {self.number} is never used"
        )


def plan_for_topic(plans: Sequence[SinkPlan], topic: str) -> SinkPlan | None:
    """The statement that handles ``topic``: the first one reading it or `` `*` `` (as Lenses)."""
    return next((plan for plan in plans if plan.matches_topic(topic)), None)


def shadowed(plans: Sequence[SinkPlan]) -> list[Shadowing]:
    """Every statement that can never receive a record, in statement order.

    A statement is shadowed when an earlier one reads the same topic, or every topic (`` `*` ``).
    A `` `*` `` statement after statements for single topics is not reported: it still receives
    every other topic, which is the usual "these topics there, the rest here" pattern.
    """
    out: list[Shadowing] = []
    for number, plan in enumerate(plans, start=1):
        for winner_number, earlier in enumerate(plans[: number - 1], start=1):
            if earlier.source == "*" or (plan.source != "*" and earlier.source == plan.source):
                out.append(Shadowing(plan, number, earlier, winner_number))
                break
    return out
