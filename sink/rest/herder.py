"""The herder: supervises connectors and their tasks inside this worker process.

Each task is a thread running :class:`sink.runtime.loop.SinkRuntime` (one consumer of group
``connect-<name>``); ``tasks.max`` > 1 starts that many threads in the same group, so Kafka splits
the partitions between them, as Connect does. Threads (not processes) keep pause/resume, restart
and metrics simple and immediate; the GIL caps one worker's CPU-bound throughput at about one
core, which is why heavy deployments run several workers (each its own process and group member).

State machine (Connect's names): a connector's *target* state RUNNING / PAUSED / STOPPED is what
the user asked for and is persisted; the reported state adds FAILED (its config cannot start).
Tasks are RUNNING, PAUSED, FAILED (with the trace) or RESTARTING. Pausing stops the task's
thread after it commits what is durable (``SinkRuntime.run`` returns when its stop event is set);
resuming starts a fresh runtime that resumes from the storage index / committed offsets. A failed
task stays FAILED until restarted, as in Connect.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable
from typing import Any

from kcql.errors import ConfigError
from sink.config.files import ConnectorConfig, parse_connector_config
from sink.config.secrets import mask
from sink.records.record import TopicPartition
from sink.rest import plugins
from sink.rest.errors import RestError
from sink.rest.metering import TaskMetrics
from sink.rest.store import ConnectorRecord, StateStore
from sink.rest.watermarks import WatermarkProbe

__all__ = ["Connector", "Herder", "TaskRunner"]

log = logging.getLogger(__name__)

TaskFactory = Callable[[Any], Any]
"""Builds a task given its observer (``sink.task.SinkTask`` is one)."""


def default_task_factory() -> TaskFactory:
    """``sink.task.task.SinkTask``, imported when a task starts (a missing module fails that task)."""
    from sink.task.task import SinkTask

    return SinkTask  # type: ignore[no-any-return]


class TaskErrorRecorder(logging.Handler):
    """Keeps the last WARNING/ERROR a task thread logged (e.g. a record skipped under
    ``errors.tolerance=all``) on its :class:`TaskRunner`, for the /ui "last error" line.

    Installed once on the ``sink`` logger; records from other threads are ignored. Only the
    message is kept (our messages mask secrets), never a traceback.
    """

    def emit(self, record: logging.LogRecord) -> None:
        runner = getattr(threading.current_thread(), "kcql_task", None)
        if isinstance(runner, TaskRunner):
            try:
                runner.metrics.last_error = (record.created, record.getMessage())
            except Exception:  # noqa: BLE001 - a logging handler must never raise
                self.handleError(record)


def install_error_recorder() -> None:
    """Attach one :class:`TaskErrorRecorder` to the ``sink`` logger (idempotent)."""
    logger = logging.getLogger("sink")
    if not any(isinstance(h, TaskErrorRecorder) for h in logger.handlers):
        logger.addHandler(TaskErrorRecorder(logging.WARNING))


class TaskRunner:
    """One task: a thread running a ``SinkRuntime`` until stopped or failed."""

    def __init__(self, connector: str, task_id: int, factory: Callable[[], TaskFactory]) -> None:
        self.connector = connector
        self.id = task_id
        self.state = "UNASSIGNED"
        self.trace: str | None = None
        self.metrics = TaskMetrics()
        self.runtime: Any = None
        self._factory = factory
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    @property
    def label(self) -> str:
        return f"{self.connector}-{self.id}"

    def start(self, cfg: ConnectorConfig, bootstrap: str) -> None:
        """Start (or restart) the task thread; the task shows RUNNING at once, FAILED if it dies."""
        self.halt()
        stop = threading.Event()
        self._stop = stop
        self.state = "RUNNING"
        self.trace = None
        thread = threading.Thread(
            target=self._run, args=(cfg, bootstrap, stop), name=f"task-{self.label}", daemon=True
        )
        thread.kcql_task = self  # type: ignore[attr-defined]  # read by TaskErrorRecorder
        self._thread = thread
        thread.start()

    def _run(self, cfg: ConnectorConfig, bootstrap: str, stop: threading.Event) -> None:
        try:
            if plugins.resolve_class(cfg.props.get("connector.class")) == plugins.REPLAY_CLASS:
                self._replay(cfg, bootstrap, stop)
                return
            from sink.runtime.loop import RuntimeOptions, SinkRuntime

            runtime = SinkRuntime(
                cfg,
                RuntimeOptions(bootstrap=bootstrap, task_id=self.id),
                task_factory=self._factory(),
                observer=self.metrics,
            )
            self.runtime = runtime
            log.info("task %s started", self.label)
            runtime.run(stop)
            log.info("task %s stopped", self.label)
        except BaseException:  # a task failure is reported in its status (with the trace), not raised
            self.trace = traceback.format_exc()
            self.state = "FAILED"
            self.metrics.failures += 1
            log.exception("task %s failed", self.label)

    def _replay(self, cfg: ConnectorConfig, bootstrap: str, stop: threading.Event) -> None:
        """A replay connector's task: ``kcql-sink replay --follow`` until stopped."""
        from sink.replay.runner import DEFAULT_POSITION_TOPIC, ReplayOptions, replay

        topic = cfg.props.get("connect.replay.position.topic") or DEFAULT_POSITION_TOPIC
        log.info("replay task %s started", self.label)
        replay(
            cfg.props,
            ReplayOptions(bootstrap=bootstrap, name=cfg.name, position_topic=topic, follow=True),
            progress_out=None,
            should_stop=stop.is_set,
        )
        log.info("replay task %s stopped", self.label)

    def halt(self, timeout: float = 30.0) -> None:
        """Ask the thread to stop (the runtime commits what is durable first) and wait for it."""
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                log.warning("task %s did not stop within %.0f s", self.label, timeout)
        self._thread = None

    def signal_stop(self) -> None:
        """Set the stop event without waiting (to stop many tasks in parallel)."""
        self._stop.set()

    def status(self, worker_id: str) -> dict[str, Any]:
        """Connect's TaskState JSON (``trace`` only when there is one)."""
        body: dict[str, Any] = {"id": self.id, "state": self.state, "worker_id": worker_id}
        if self.state == "FAILED" and self.trace:
            body["trace"] = self.trace
        return body

    def partitions(self, high: Callable[[TopicPartition], int | None] | None = None) -> list[dict[str, Any]]:
        """Per-partition view for /metrics and /ui: counters, committed offset and lag.

        Reads only counters the task thread updates (never the task's consumer); ``high`` gives a
        partition's high watermark for the lag.
        """
        m = self.metrics
        tps = set(dict(m.records_in)) | set(dict(m.committed_offset))
        rows = []
        for tp in sorted(tps):
            committed = m.committed_offset.get(tp)
            top = high(tp) if high is not None else None
            rows.append(
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "records_in": m.records_in.get(tp, 0),
                    "bytes_in": m.bytes_in.get(tp, 0),
                    "records_committed": m.records_committed.get(tp, 0),
                    "committed_offset": committed,
                    "high_watermark": top,
                    "lag": None if top is None or committed is None else max(top - committed, 0),
                }
            )
        return rows


class Connector:
    """A connector's config, target state, reported state and tasks."""

    def __init__(self, name: str, config: dict[str, str], target: str) -> None:
        self.name = name
        self.config = config
        self.target = target
        self.state = "UNASSIGNED"
        self.trace: str | None = None
        self.tasks: list[TaskRunner] = []
        self.topic_baseline: dict[str, int] = {}

    def topic_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for task in self.tasks:
            for tp, n in dict(task.metrics.records_in).items():
                counts[tp.topic] = counts.get(tp.topic, 0) + n
        return counts

    def active_topics(self) -> list[str]:
        """Topics that delivered records since the last ``/topics/reset`` (KIP-558)."""
        return sorted(t for t, n in self.topic_counts().items() if n > self.topic_baseline.get(t, 0))

    def masked_config(self) -> dict[str, str]:
        return {k: mask(k, v) for k, v in self.config.items()}


class Herder:
    """All connectors of this worker. Mutations are serialised; reads take no lock."""

    def __init__(
        self,
        store: StateStore,
        worker_id: str,
        bootstrap: str | None,
        task_factory: Callable[[], TaskFactory] = default_task_factory,
    ) -> None:
        self.store = store
        self.worker_id = worker_id
        self.bootstrap = bootstrap
        self.task_factory = task_factory
        self.connectors: dict[str, Connector] = {}
        self.watermarks = WatermarkProbe()
        self._lock = threading.RLock()

    # --- lifecycle -----------------------------------------------------------------------------

    def start(self) -> None:
        """Load the persisted connectors and bring each to its target state."""
        install_error_recorder()
        with self._lock:
            for record in self.store.load_all():
                conn = Connector(record.name, record.config, record.state)
                self.connectors[record.name] = conn
                self._apply_target(conn)
                log.info("resumed connector %s (%s)", record.name, record.state)

    def shutdown(self) -> None:
        """Stop every task (in parallel) without changing any persisted state."""
        with self._lock:
            tasks = [t for c in self.connectors.values() for t in c.tasks]
            for task in tasks:
                task.signal_stop()
            for task in tasks:
                task.halt()
            self.watermarks.close()

    def partitions(self, conn: Connector, task: TaskRunner) -> list[dict[str, Any]]:
        """``task.partitions`` with lag from the broker's high watermarks."""
        bootstrap = (conn.config.get("bootstrap.servers") or self.bootstrap or "").strip()
        if not bootstrap:
            return task.partitions()
        return task.partitions(lambda tp: self.watermarks.high(bootstrap, tp))

    # --- lookups -------------------------------------------------------------------------------

    def get(self, name: str, message: str | None = None) -> Connector:
        conn = self.connectors.get(name)
        if conn is None:
            raise RestError(404, message or f"Connector {name} not found")
        return conn

    def names(self) -> list[str]:
        return sorted(self.connectors)

    # --- configs -------------------------------------------------------------------------------

    def put(
        self,
        name: str,
        config: dict[str, str],
        initial_state: str | None = None,
        *,
        create_only: bool = False,
        update_only: bool = False,
    ) -> bool:
        """Create or update; returns whether the connector was created. Config is already valid.

        ``update_only`` (PATCH): a connector deleted since the caller read it is a 404, not
        created again from the patched copy of its old config.
        """
        with self._lock:
            conn = self.connectors.get(name)
            if conn is not None and create_only:
                raise RestError(409, f"Connector {name} already exists")
            if conn is None and update_only:
                raise RestError(404, f"Connector {name} not found")
            if conn is None:
                conn = Connector(name, config, initial_state or "RUNNING")
                self.store.save(ConnectorRecord(name, config, conn.target))
                self.connectors[name] = conn
                self._apply_target(conn)
                log.info("created connector %s (%s)", name, conn.target)
                return True
            self._halt_tasks(conn)
            conn.config = config
            self.store.save(ConnectorRecord(name, config, conn.target))
            self._apply_target(conn)
            log.info("reconfigured connector %s", name)
            return False

    def delete(self, name: str) -> None:
        with self._lock:
            conn = self.get(name)
            self._halt_tasks(conn)
            self.store.delete(name)
            del self.connectors[name]
            log.info("deleted connector %s", name)

    # --- state changes ---------------------------------------------------------------------------

    def pause(self, name: str) -> None:
        with self._lock:
            conn = self.get(name, f"Unknown connector {name}")
            self._set_target(conn, "PAUSED")
            if conn.state == "FAILED":
                return
            pausing = [t for t in conn.tasks if t.state != "FAILED"]
            for task in pausing:
                task.state = "PAUSED"
                task.signal_stop()  # all at once: they commit and leave the group in parallel
            for task in pausing:
                task.halt()
            if conn.state != "STOPPED" or conn.tasks:
                conn.state = "PAUSED"
            if not conn.tasks:  # pausing a STOPPED connector brings its tasks back, paused
                self._apply_target(conn)

    def resume(self, name: str) -> None:
        with self._lock:
            conn = self.get(name, f"Unknown connector {name}")
            self._set_target(conn, "RUNNING")
            if conn.state == "FAILED":
                return
            if not conn.tasks:
                self._apply_target(conn)
                return
            cfg = self._connector_config(conn)
            if cfg is None:
                return
            conn.state = "RUNNING"
            for task in conn.tasks:
                if task.state == "PAUSED":
                    task.start(cfg[0], cfg[1])

    def stop(self, name: str) -> None:
        with self._lock:
            conn = self.get(name, f"Unknown connector {name}")
            self._set_target(conn, "STOPPED")
            self._halt_tasks(conn)
            conn.state = "STOPPED"
            conn.trace = None

    def restart(self, name: str, include_tasks: bool, only_failed: bool) -> dict[str, Any] | None:
        """Connect's restart: ``None`` for the legacy form, else the status with RESTARTING marks."""
        with self._lock:
            conn = self.get(name, f"Unknown connector: {name}")
            restart_connector = not only_failed or conn.state == "FAILED"
            tasks = [t for t in conn.tasks if include_tasks and (not only_failed or t.state == "FAILED")]
            body = None
            if include_tasks or only_failed:
                body = self.status(name)
                if restart_connector:
                    body["connector"]["state"] = "RESTARTING"
                    body["connector"].pop("trace", None)
                for entry in body["tasks"]:
                    if any(t.id == entry["id"] for t in tasks):
                        entry["state"] = "RESTARTING"
                        entry.pop("trace", None)
            if restart_connector and conn.state == "FAILED":
                self._apply_target(conn)  # re-reads the config: starts every task afresh
                return body
            for task in tasks:
                self._restart_task(conn, task)
            return body

    def restart_task(self, name: str, task_id: int) -> None:
        with self._lock:
            conn = self.get(name, f"Unknown connector: {name}")
            task = next((t for t in conn.tasks if t.id == task_id), None)
            if task is None:
                raise RestError(404, f"Unknown task: {name}-{task_id}")
            self._restart_task(conn, task)

    def reset_topics(self, name: str) -> None:
        conn = self.get(name)
        conn.topic_baseline = conn.topic_counts()

    # --- status --------------------------------------------------------------------------------

    def status(self, name: str) -> dict[str, Any]:
        conn = self.get(name, f"No status found for connector {name}")
        connector: dict[str, Any] = {"state": conn.state, "worker_id": self.worker_id}
        if conn.state == "FAILED" and conn.trace:
            connector["trace"] = conn.trace
        return {
            "name": conn.name,
            "connector": connector,
            "tasks": [t.status(self.worker_id) for t in conn.tasks],
            "type": "sink",
        }

    def info(self, name: str) -> dict[str, Any]:
        conn = self.get(name)
        return {
            "name": conn.name,
            "config": conn.masked_config(),
            "tasks": [{"connector": conn.name, "task": t.id} for t in conn.tasks],
            "type": "sink",
        }

    def health(self) -> list[str]:
        """Reasons the worker is unhealthy (empty when every task is RUNNING or PAUSED)."""
        reasons = []
        for conn in list(self.connectors.values()):
            if conn.state == "FAILED":
                reasons.append(f"connector {conn.name} is FAILED: {_summary(conn.trace)}")
            reasons += [
                f"task {t.label} is {t.state}: {_summary(t.trace)}"
                for t in list(conn.tasks)
                if t.state not in ("RUNNING", "PAUSED")
            ]
        return reasons

    # --- internals -----------------------------------------------------------------------------

    def _set_target(self, conn: Connector, target: str) -> None:
        if conn.target != target:
            conn.target = target
            self.store.save(ConnectorRecord(conn.name, conn.config, target))

    def _halt_tasks(self, conn: Connector) -> None:
        for task in conn.tasks:
            task.signal_stop()
        for task in conn.tasks:
            task.halt()
        conn.tasks = []

    def _connector_config(self, conn: Connector) -> tuple[ConnectorConfig, str] | None:
        """The parsed config and bootstrap servers, or ``None`` after marking the connector FAILED."""
        try:
            if plugins.resolve_class(conn.config.get("connector.class")) == plugins.REPLAY_CLASS:
                cfg = ConnectorConfig(conn.name, dict(conn.config))  # validated by plugins.validate_config
            else:
                cfg = parse_connector_config(dict(conn.config))
        except ConfigError as exc:
            self._fail(conn, str(exc))
            return None
        bootstrap = (conn.config.get("bootstrap.servers") or self.bootstrap or "").strip()
        if not bootstrap:
            self._fail(
                conn,
                "no Kafka bootstrap servers: set bootstrap.servers in the connector config, or start the "
                "worker with --bootstrap-servers / KAFKA_BOOTSTRAP_SERVERS",
            )
            return None
        return cfg, bootstrap

    def _fail(self, conn: Connector, message: str) -> None:
        conn.state = "FAILED"
        conn.trace = message
        log.error("connector %s failed: %s", conn.name, _summary(message))
        return None

    def _apply_target(self, conn: Connector) -> None:
        """(Re)create the tasks for ``conn.target``: running, paused (created, not run) or none."""
        self._halt_tasks(conn)
        conn.trace = None
        if conn.target == "STOPPED":
            conn.state = "STOPPED"
            return
        cfg = self._connector_config(conn)
        if cfg is None:
            return
        count = int(conn.config.get("tasks.max", "1") or 1)
        conn.tasks = [TaskRunner(conn.name, i, self.task_factory) for i in range(max(count, 1))]
        conn.state = conn.target
        for task in conn.tasks:
            if conn.target == "RUNNING":
                task.start(*cfg)
            else:
                task.state = "PAUSED"

    def _restart_task(self, conn: Connector, task: TaskRunner) -> None:
        task.metrics.restarts += 1
        if conn.target != "RUNNING" or conn.state == "FAILED":
            task.halt()
            task.state = "PAUSED" if conn.target == "PAUSED" else task.state
            return
        cfg = self._connector_config(conn)
        if cfg is not None:
            task.start(*cfg)


def _summary(text: str | None) -> str:
    if not text:
        return ""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else ""
