"""``kcql-sink worker``: a Kafka Connect-compatible REST worker running S3/local sink connectors.

Connector configs and states persist in ``--state-dir``; a restarted worker resumes them. The
Kafka bootstrap servers come from ``--bootstrap-servers`` or ``KAFKA_BOOTSTRAP_SERVERS`` (a
connector's own ``bootstrap.servers`` wins). Write endpoints can require HTTP basic auth
(``--basic-auth user:pass`` or ``KCQL_SINK_BASIC_AUTH``). Binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import argparse
import logging
import os
from typing import Any

from kcql.errors import ConfigError, ConfigProblem
from sink.config.secrets import HIDDEN

__all__ = ["register", "run_worker"]

log = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the ``worker`` subcommand."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "worker",
        help="run the Kafka Connect REST API (POST /connectors ...), /health, /metrics and /ui",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8083, help="port (default 8083, as Connect)")
    parser.add_argument(
        "--bootstrap-servers",
        default=os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
        help="Kafka bootstrap servers (default $KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--state-dir",
        default="kcql-sink-worker",
        help="directory for connector configs and states (default ./kcql-sink-worker)",
    )
    parser.add_argument(
        "--basic-auth",
        default=os.environ.get("KCQL_SINK_BASIC_AUTH"),
        metavar="USER:PASS",
        help="require HTTP basic auth on write requests (default $KCQL_SINK_BASIC_AUTH)",
    )
    parser.set_defaults(func=run_worker)


def run_worker(args: argparse.Namespace) -> int:
    """Start the herder and serve until interrupted."""
    from sink.rest.app import serve
    from sink.rest.herder import Herder
    from sink.rest.store import StateStore
    from sink.runtime.collector import settle_heap

    if args.basic_auth is not None and ":" not in args.basic_auth:
        raise ConfigError([ConfigProblem("--basic-auth", HIDDEN, "must be user:password")])
    if not 0 < args.port < 65536:
        raise ConfigError([ConfigProblem("--port", str(args.port), "must be between 1 and 65535")])
    try:
        store = StateStore(args.state_dir)
    except OSError as exc:
        raise ConfigError(
            [ConfigProblem("--state-dir", str(args.state_dir), f"cannot be used: {exc}")]
        ) from None
    if args.host not in ("127.0.0.1", "localhost", "::1") and not args.basic_auth:
        log.warning(
            "binding %s without --basic-auth: anyone who can reach this port can create, change and "
            "delete connectors",
            args.host,
        )
    herder = Herder(store, f"{args.host}:{args.port}", args.bootstrap_servers)
    settle_heap()  # the tasks' consume loops run in this process: sink/runtime/collector.py
    serve(herder, args.host, args.port, args.basic_auth or None)
    return 0
