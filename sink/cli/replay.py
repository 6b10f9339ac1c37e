"""``kcql-sink replay CONFIG``: put committed archive files back into Kafka, exactly once.

CONFIG holds the reverse KCQL (``INSERT INTO topic SELECT * FROM bucket:prefix STOREAS fmt
PROPERTIES(...)``, as the Lenses S3 source connector reads it) in ``connect.s3.kcql``, the storage
keys the sink uses, and optionally ``key.converter``/``value.converter``. See docs/replay.md.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from datetime import datetime
from typing import Any

from kcql.errors import SinkError
from sink.cli._reader_config import load_config

__all__ = ["ReplayArgsError", "parse_until", "register", "run"]


class ReplayArgsError(SinkError):
    """Bad ``replay`` arguments."""


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the ``replay`` subcommand."""
    p = subparsers.add_parser(
        "replay",
        help="replay committed files back into Kafka, exactly once",
        description="Produce the records the sink committed (read with the reverse KCQL form "
        "INSERT INTO topic SELECT * FROM bucket:prefix) into Kafka in transactions that also "
        "record the replay position, so a restart neither skips nor repeats a record.",
    )
    p.add_argument("config", help="replay config: Connect JSON, flat JSON or .properties")
    p.add_argument(
        "--bootstrap-servers",
        default=None,
        help="default: bootstrap.servers in CONFIG, then $KAFKA_BOOTSTRAP_SERVERS",
    )
    p.add_argument(
        "--name", default=None, help="replay name (position key, transactional id); default: name in CONFIG"
    )
    p.add_argument(
        "--position-topic",
        default=None,
        help="topic holding replay positions (default _kcql-sink-replay-positions)",
    )
    p.add_argument(
        "--batch", type=int, default=1000, help="records per transaction (LIMIT in the statement wins)"
    )
    p.add_argument("--follow", action="store_true", help="keep replaying files as the sink commits them")
    p.add_argument("--poll-interval", type=float, default=1.0, help="seconds between polls with --follow")
    p.add_argument(
        "--idle-timeout",
        type=float,
        default=None,
        help="with --follow: stop after this many seconds without new files",
    )
    p.add_argument(
        "--until",
        default=None,
        help="stop after this source offset (a number) or record time (ISO 8601, or epoch ms as 123ms)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress line")
    p.set_defaults(func=run)


def parse_until(text: str | None) -> Any:
    """``--until`` as :class:`~sink.replay.runner.Until`: ``123`` an offset; ``123ms`` or ISO a time."""
    from sink.replay.runner import Until

    if text is None:
        return Until()
    t = text.strip()
    if t.isdigit():
        return Until(offset=int(t))
    if t.endswith("ms") and t[:-2].isdigit():
        return Until(timestamp=int(t[:-2]))
    try:
        when = datetime.fromisoformat(t.replace("Z", "+00:00"))
    except ValueError:
        raise ReplayArgsError(
            f"--until {text!r}: expected an offset (123), epoch millis (1700000000000ms) or an ISO time"
        ) from None
    if when.tzinfo is None:
        raise ReplayArgsError(f"--until {text!r}: give a time zone (e.g. 2026-01-01T00:00:00Z)")
    return Until(timestamp=int(when.timestamp() * 1000))


def run(args: argparse.Namespace) -> int:
    """Run the command; SIGTERM/Ctrl-C finish the open transaction and exit 0."""
    from sink.replay.runner import DEFAULT_POSITION_TOPIC, ReplayOptions, replay

    if args.batch <= 0:
        raise ReplayArgsError(f"--batch {args.batch}: must be > 0")
    if args.poll_interval <= 0:
        raise ReplayArgsError(f"--poll-interval {args.poll_interval}: must be > 0")
    until = parse_until(args.until)
    config = load_config(args.config)
    bootstrap = (
        args.bootstrap_servers or config.get("bootstrap.servers") or os.environ.get("KAFKA_BOOTSTRAP_SERVERS")
    )
    if not bootstrap:
        raise ReplayArgsError(
            "no Kafka: give --bootstrap-servers, bootstrap.servers in CONFIG or $KAFKA_BOOTSTRAP_SERVERS"
        )
    name = args.name or config.get("name")
    if not name:
        raise ReplayArgsError(
            "the replay needs a name (--name or name in CONFIG): it keys the position and transactional id"
        )
    stop = threading.Event()

    def _stop(_sig: int, _frame: Any) -> None:
        stop.set()

    previous = [signal.signal(s, _stop) for s in (signal.SIGTERM, signal.SIGINT)]
    try:
        replay(
            config,
            ReplayOptions(
                bootstrap=str(bootstrap),
                name=str(name),
                position_topic=args.position_topic
                or str(config.get("connect.replay.position.topic") or DEFAULT_POSITION_TOPIC),
                batch=args.batch,
                follow=args.follow,
                poll_interval=args.poll_interval,
                idle_timeout=args.idle_timeout,
                until=until,
            ),
            progress_out=None if args.quiet else sys.stderr,
            should_stop=stop.is_set,
        )
    finally:
        signal.signal(signal.SIGTERM, previous[0])
        signal.signal(signal.SIGINT, previous[1])
    return 0
