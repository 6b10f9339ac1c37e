"""``kcql-sink run CONFIG``: run the connector against a Kafka cluster until stopped.

The config is checked as a whole before anything is built, by :func:`sink.config.validate.validate`
(the check the REST worker runs too) plus the file's own problems and the bootstrap servers; every
problem is reported in one :class:`~kcql.errors.ConfigError` (exit 1, no traceback, secrets masked).

``tasks.max`` > 1 starts that many worker processes (this command again with a hidden
``--task-id``), all in the consumer group ``connect-<name>``, so partitions are spread over every
core; the parent forwards SIGTERM/SIGINT, and if one task fails the others are stopped and the
exit status is 1.

Shutdown: the first SIGTERM/SIGINT asks the task to stop (commit what is durable, close the
consumer); if that takes longer than ``--shutdown-timeout`` seconds the process exits with status
1 anyway; a second signal exits at once (status 130). Either way nothing is half-committed:
storage commits are atomic per file and Kafka offsets only ever follow them, so the next start
resumes from the storage index.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from types import FrameType
from typing import Any

from kcql.errors import ConfigError, ConfigProblem, SinkError
from sink.config.files import ConnectorConfig, load_connector_config
from sink.runtime.collector import settle_heap

__all__ = ["register", "run_command", "validate"]

log = logging.getLogger(__name__)

DEFAULT_SHUTDOWN_TIMEOUT = 30.0


def register(subparsers: Any) -> None:
    """Add the ``run`` subcommand to the ``kcql-sink`` parser."""
    parser = subparsers.add_parser(
        "run",
        help="run the connector: consume Kafka topics into S3/local files",
        description="Run the connector described by CONFIG (Connect JSON, flat JSON or .properties).",
    )
    parser.add_argument(
        "config", metavar="CONFIG", help="connector config: Connect JSON, flat JSON or .properties"
    )
    parser.add_argument(
        "--bootstrap-servers",
        default=None,
        help="Kafka bootstrap servers (default: bootstrap.servers in CONFIG, then $KAFKA_BOOTSTRAP_SERVERS)",
    )
    parser.add_argument(
        "--shutdown-timeout",
        type=float,
        default=DEFAULT_SHUTDOWN_TIMEOUT,
        help="seconds a graceful stop may take after SIGTERM/SIGINT (default %(default)s)",
    )
    parser.add_argument("--task-id", type=int, default=None, help=argparse.SUPPRESS)
    parser.set_defaults(func=run_command)


def _bootstrap(args: argparse.Namespace, cfg: ConnectorConfig) -> str | None:
    for candidate in (
        args.bootstrap_servers,
        cfg.props.get("bootstrap.servers"),
        os.environ.get("KAFKA_BOOTSTRAP_SERVERS"),
    ):
        if candidate and candidate.strip():
            return candidate.strip()
    return None


def validate(cfg: ConnectorConfig, bootstrap: str | None, task_id: int | None = None) -> tuple[Any, int]:
    """Check the whole config first, then build the runtime this process runs, if any.

    The config is checked by :func:`sink.config.validate.validate` (the REST worker's check too)
    plus what only this command knows (the file's own problems, the bootstrap servers), before
    anything is built. The runtime is built only when this process runs a task: the parent of
    ``tasks.max`` > 1 task processes runs none, each child builds its own.

    Returns:
        ``(SinkRuntime or None, tasks_max)``.

    Raises:
        ConfigError: listing every problem of every section at once, secret values masked.
    """
    from sink.config.validate import parse_tasks_max
    from sink.config.validate import validate as validate_props

    problems: list[ConfigProblem] = list(cfg.problems)  # name, aliases: found while loading
    if bootstrap is None:
        problems.append(
            ConfigProblem(
                "bootstrap.servers",
                "",
                "no Kafka to read from: pass --bootstrap-servers, "
                "set bootstrap.servers or KAFKA_BOOTSTRAP_SERVERS",
            )
        )
    problems += validate_props(cfg.props)
    unique = list(dict.fromkeys(problems))  # the file loader and validate may find the same one
    if unique:
        raise ConfigError(unique)
    tasks_max, _ = parse_tasks_max(cfg.props)
    if task_id is None and tasks_max > 1:
        return None, tasks_max
    from sink.runtime.loop import RuntimeOptions, SinkRuntime

    runtime = SinkRuntime(cfg, RuntimeOptions(bootstrap or "", task_id=task_id or 0))
    return runtime, tasks_max


class _Signals:
    """First signal: graceful stop with a deadline; second signal: exit at once."""

    def __init__(
        self,
        stop: threading.Event,
        timeout: float,
        on_first: Callable[[int], None] | None = None,
        on_second: Callable[[], None] | None = None,
        child: bool = False,
    ) -> None:
        self.stop = stop
        self.timeout = timeout
        self.on_first = on_first
        self.on_second = on_second
        self.child = child
        """A task process of ``tasks.max`` > 1: the terminal's Ctrl-C reaches the whole process
        group, so a child ignores SIGINT and stops only on the SIGTERM its parent forwards."""
        self.count = 0
        self._previous: dict[int, Any] = {}

    def install(self) -> None:
        self._previous[signal.SIGTERM] = signal.signal(signal.SIGTERM, self._handle)
        self._previous[signal.SIGINT] = signal.signal(
            signal.SIGINT, signal.SIG_IGN if self.child else self._handle
        )

    def restore(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        self.count += 1
        if self.count > 1:
            log.error("second %s: exiting immediately", signal.Signals(signum).name)
            if self.on_second is not None:
                self.on_second()
            os._exit(130)
        log.info(
            "%s: stopping (committing what is durable; up to %.0f s; signal again to exit at once)",
            signal.Signals(signum).name,
            self.timeout,
        )
        self.stop.set()
        if self.on_first is not None:
            self.on_first(signum)
        timer = threading.Timer(self.timeout, self._deadline)
        timer.daemon = True
        timer.start()

    def _deadline(self) -> None:
        log.error("graceful stop took longer than %.0f s: exiting", self.timeout)
        if self.on_second is not None:
            self.on_second()
        os._exit(1)


def _run_one(runtime: Any, task_id: int, timeout: float, child: bool) -> int:
    stop = threading.Event()
    signals = _Signals(stop, timeout, child=child)
    signals.install()
    started = time.monotonic()
    settle_heap()  # before the consume loop: sink/runtime/collector.py says why
    try:
        runtime.run(stop)
    except SinkError as exc:
        log.error("task %d of connector %s stopped: %s", task_id, runtime.cfg.name, exc)  # noqa: TRY400 - no traceback
        return 1
    finally:
        signals.restore()
    log.info(
        "task %d of connector %s stopped after %.1f s: %d records handed to storage, %d skipped",
        task_id,
        runtime.cfg.name,
        time.monotonic() - started,
        runtime.records_in,
        runtime.errors_tolerated,
    )
    return 0


def _run_many(args: argparse.Namespace, bootstrap: str, tasks_max: int) -> int:
    """One child process per task; stop them all when one fails or a signal arrives."""
    base = [sys.executable, "-m", "sink.cli"]
    if args.log_level:
        base += ["--log-level", args.log_level]
    elif args.verbose:
        base += ["-" + "v" * args.verbose]
    children = [
        subprocess.Popen(
            [
                *base,
                "run",
                args.config,
                "--bootstrap-servers",
                bootstrap,
                "--task-id",
                str(i),
                "--shutdown-timeout",
                str(args.shutdown_timeout),
            ],
            stdin=subprocess.DEVNULL,
        )
        for i in range(tasks_max)
    ]
    log.info("started %d tasks: pids %s", tasks_max, ", ".join(str(c.pid) for c in children))

    def forward(signum: int) -> None:
        for child in children:
            if child.poll() is None:
                child.send_signal(signum)

    def kill_all() -> None:
        for child in children:
            if child.poll() is None:
                child.kill()

    stop = threading.Event()
    signals = _Signals(
        stop, args.shutdown_timeout + 5, on_first=lambda _sig: forward(signal.SIGTERM), on_second=kill_all
    )
    signals.install()
    failed = False
    try:
        while any(c.poll() is None for c in children):
            if not failed and any(c.poll() not in (None, 0) for c in children):
                failed = True
                log.error("a task failed: stopping the other tasks")
                forward(signal.SIGTERM)
            time.sleep(0.2)
    finally:
        signals.restore()
        for child in children:  # never leave a child behind
            if child.poll() is None:
                child.kill()
                child.wait()
    return 1 if failed or any(c.returncode not in (0, None) for c in children) else 0


def run_command(args: argparse.Namespace) -> int:
    """Entry point of ``kcql-sink run``; returns the exit status."""
    cfg = load_connector_config(args.config, strict=False)
    bootstrap = _bootstrap(args, cfg)
    runtime, tasks_max = validate(cfg, bootstrap, args.task_id)
    assert bootstrap is not None  # noqa: S101 - validate() reported it otherwise
    if runtime is not None:
        return _run_one(runtime, args.task_id or 0, args.shutdown_timeout, child=args.task_id is not None)
    return _run_many(args, bootstrap, tasks_max)
