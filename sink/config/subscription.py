"""What the connector subscribes to: ``topics`` or ``topics.regex``, checked against the KCQL sources.

Pure functions of the config and the compiled statements, so that validation (``kcql-sink run``,
the REST worker) and the runtime that subscribes agree on the topics and on the problems, and
neither needs a Kafka client to find them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kcql.errors import ConfigProblem
from kcql.model import SinkPlan

__all__ = ["missing_kcql_message", "resolve_subscription"]


def missing_kcql_message(topic: str) -> str:
    """Lenses' text for a topic no statement reads, so users recognise it."""
    return (
        f"Can't find the KCQL for source topic [{topic}]. The topics defined via [topics] or "  # noqa: S608
        "[topics.regex] need to have an equivalent KCQL statement: "
        "INSERT INTO {DESTINATION} SELECT * FROM {TOPIC}."
    )


def resolve_subscription(
    props: Mapping[str, str], plans: Sequence[SinkPlan]
) -> tuple[list[str], list[ConfigProblem]]:
    """The topics (or one ``^regex``) to subscribe to, and problems with topics vs KCQL sources.

    Without ``topics`` and ``topics.regex`` the KCQL sources are subscribed; a statement reading
    `` `*` `` then needs the topics named. ``topics.regex`` is anchored with ``^`` because
    librdkafka treats only ``^``-prefixed names as patterns.
    """
    problems: list[ConfigProblem] = []
    topics = [t.strip() for t in (props.get("topics") or "").split(",") if t.strip()]
    regex = (props.get("topics.regex") or "").strip()
    if topics and regex:
        problems.append(ConfigProblem("topics.regex", regex, "set either topics or topics.regex, not both"))
    if regex:
        try:
            re.compile(regex)
        except re.error as exc:
            problems.append(ConfigProblem("topics.regex", regex, f"not a valid regular expression: {exc}"))
        return [regex if regex.startswith("^") else "^" + regex], problems
    if not topics:
        topics = [p.source for p in plans if p.source != "*"]
        if any(p.source == "*" for p in plans):
            problems.append(
                ConfigProblem(
                    "topics",
                    "",
                    "a KCQL statement reads from `*`: name the topics with topics or topics.regex",
                )
            )
    problems += [
        ConfigProblem("topics", props.get("topics", ""), missing_kcql_message(topic))
        for topic in topics
        if not any(p.matches_topic(topic) for p in plans)
    ]
    return topics, problems
