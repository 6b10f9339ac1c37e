"""Request handlers: Kafka Connect's REST API (wire-compatible where supported) plus health/metrics/ui.

Handlers are plain (sync) functions: Starlette runs them in its thread pool, so stopping a task
(which waits for its thread to commit and exit) never blocks the event loop.
"""

from __future__ import annotations

import inspect
import json
import logging
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from sink.config.secrets import HIDDEN, is_secret_key, mask
from sink.rest import offsets, plugins
from sink.rest.errors import RestError
from sink.rest.herder import Herder
from sink.rest.loggers import logger_levels, set_logger_level
from sink.rest.metrics import render_metrics
from sink.rest.openapi import openapi_document
from sink.rest.store import TARGET_STATES, check_name
from sink.rest.ui import render_ui

__all__ = ["build_routes"]

log = logging.getLogger(__name__)

KAFKA_API_VERSION = "3.9.0"
"""The Connect REST API level this worker matches (tools use ``version`` for feature detection)."""


def _java_map(config: dict[str, Any]) -> str:
    return (
        "{"
        + ", ".join(f"{k}={mask(k, str(v)) if v is not None else 'null'}" for k, v in config.items())
        + "}"
    )


def _coerce(config: Any) -> dict[str, str | None]:
    """Connect's Jackson leniency: numbers and booleans become strings; nested values are refused."""
    if not isinstance(config, dict):
        raise RestError(400, "Connector configuration must be a JSON object of string keys and values")
    out: dict[str, str | None] = {}
    for key, value in config.items():
        if value is None:
            out[str(key)] = None
        elif isinstance(value, bool):
            out[str(key)] = "true" if value else "false"
        elif isinstance(value, str | int | float):
            out[str(key)] = str(value)
        else:
            raise RestError(400, f"Configuration value of {key} must be a string, number or boolean")
    return out


class Api:
    """The handlers, bound to one herder."""

    def __init__(self, herder: Herder, registry: Any, *, basic_auth: bool = False) -> None:
        self.herder = herder
        self.registry = registry
        self._cluster_id: str | None = None
        self._openapi = openapi_document(basic_auth=basic_auth)

    # --- helpers -------------------------------------------------------------------------------

    @staticmethod
    async def _json(request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            raise RestError(400, "Request body is empty; a JSON document is required")
        try:
            return json.loads(raw)
        except ValueError as exc:
            raise RestError(400, f"Request body is not valid JSON: {exc}") from None
        except RecursionError:
            raise RestError(400, "Request body is nested too deeply to be a connector config") from None

    def _checked_config(
        self, name: str, config_in: Any, *, existing: dict[str, str] | None = None
    ) -> dict[str, str]:
        """Validate a create/update config as Connect does; returns the config to store."""
        config = _coerce(config_in)
        if config.get("name") is not None and config["name"] != name:
            raise RestError(
                400,
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})",
            )
        config["name"] = name
        if existing:  # a GET shows secrets as [hidden]; PUTting that back keeps the stored secret
            for key, value in config.items():
                if value == HIDDEN and is_secret_key(key) and key in existing:
                    config[key] = existing[key]
        cls = config.get("connector.class")
        if not cls:
            raise RestError(400, f"Connector config {_java_map(config)} contains no connector type")
        if plugins.resolve_class(cls) is None:
            raise RestError(400, plugins.unknown_class_message(cls))  # Connect: 500; it is a bad request
        problems = plugins.validate_config(config)
        if problems:
            raise RestError(400, plugins.error_message_lines(problems))
        return {k: v for k, v in config.items() if v is not None}

    def _bootstrap(self, config: dict[str, str]) -> str:
        bootstrap = (config.get("bootstrap.servers") or self.herder.bootstrap or "").strip()
        if not bootstrap:
            raise RestError(
                500, "No Kafka bootstrap servers: set bootstrap.servers or start the worker with one"
            )
        return bootstrap

    # --- server info, health, metrics, ui ----------------------------------------------------------

    def root(self, request: Request) -> Response:
        if self._cluster_id is None and self.herder.bootstrap:
            self._cluster_id = _cluster_id(self.herder.bootstrap)
        return JSONResponse(
            {
                "version": KAFKA_API_VERSION,
                "commit": f"kcql-sink-{plugins.VERSION}",
                "kafka_cluster_id": self._cluster_id,
            }
        )

    def health(self, request: Request) -> Response:
        reasons = self.herder.health()
        if reasons:
            return JSONResponse(
                {"status": "unhealthy", "message": "; ".join(reasons), "reasons": reasons}, status_code=503
            )
        return JSONResponse(
            {"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."}
        )

    def metrics(self, request: Request) -> Response:
        from prometheus_client import CONTENT_TYPE_LATEST

        return Response(render_metrics(self.registry), media_type=CONTENT_TYPE_LATEST)

    def ui(self, request: Request) -> Response:
        return HTMLResponse(render_ui(self.herder))

    def openapi(self, request: Request) -> Response:
        return JSONResponse(self._openapi)

    # --- connectors ----------------------------------------------------------------------------

    def list_connectors(self, request: Request) -> Response:
        expand = [e for e in request.query_params.getlist("expand") if e in ("status", "info")]
        names = self.herder.names()
        if not expand:
            return JSONResponse(names)
        out: dict[str, Any] = {}
        for name in names:
            entry = {}
            try:
                for e in expand:
                    entry[e] = self.herder.status(name) if e == "status" else self.herder.info(name)
            except RestError:  # deleted during the call: skipped, as Connect does
                continue
            out[name] = entry
        return JSONResponse(out)

    async def create_connector(self, request: Request) -> Response:
        body = await self._json(request)
        if not isinstance(body, dict):
            raise RestError(400, "Request body must be a JSON object with name and config")
        if not isinstance(body.get("name"), str):
            raise RestError(400, "Connector name must be provided (the name field of the request)")
        name = check_name(body["name"])
        initial = body.get("initial_state") or "RUNNING"
        if initial not in TARGET_STATES:
            raise RestError(
                400, f"Invalid initial_state {initial}: must be one of {', '.join(TARGET_STATES)}"
            )
        if name in self.herder.connectors:
            raise RestError(409, f"Connector {name} already exists")
        config = self._checked_config(name, body.get("config") if body.get("config") is not None else {})
        from starlette.concurrency import run_in_threadpool

        await run_in_threadpool(self.herder.put, name, config, initial, create_only=True)
        return JSONResponse(
            self.herder.info(name),
            status_code=201,
            headers={"Location": f"/connectors/{quote(name, safe='')}"},
        )

    def get_connector(self, request: Request) -> Response:
        return JSONResponse(self.herder.info(request.path_params["name"]))

    def delete_connector(self, request: Request) -> Response:
        self.herder.delete(request.path_params["name"])
        return Response(status_code=204)

    def get_config(self, request: Request) -> Response:
        return JSONResponse(self.herder.get(request.path_params["name"]).masked_config())

    async def put_config(self, request: Request) -> Response:
        name = check_name(request.path_params["name"])
        body = await self._json(request)
        existing = self.herder.connectors.get(name)
        config = self._checked_config(name, body, existing=existing.config if existing else None)
        from starlette.concurrency import run_in_threadpool

        created = await run_in_threadpool(self.herder.put, name, config)
        headers = {"Location": f"/connectors/{quote(name, safe='')}"} if created else None
        return JSONResponse(self.herder.info(name), status_code=201 if created else 200, headers=headers)

    async def patch_config(self, request: Request) -> Response:
        name = request.path_params["name"]
        conn = self.herder.get(name)
        patch = _coerce(await self._json(request))
        merged: dict[str, str | None] = dict(conn.config)
        for key, value in patch.items():
            if value is None:
                merged.pop(key, None)
            else:
                merged[key] = value
        config = self._checked_config(name, merged, existing=conn.config)
        from starlette.concurrency import run_in_threadpool

        await run_in_threadpool(lambda: self.herder.put(name, config, update_only=True))
        return JSONResponse(self.herder.info(name))

    def status(self, request: Request) -> Response:
        return JSONResponse(self.herder.status(request.path_params["name"]))

    def restart(self, request: Request) -> Response:
        q = request.query_params
        include = q.get("includeTasks", "false").lower() == "true"
        only_failed = q.get("onlyFailed", "false").lower() == "true"
        body = self.herder.restart(request.path_params["name"], include, only_failed)
        if body is None:
            return Response(status_code=204)
        return JSONResponse(body, status_code=202)

    def pause(self, request: Request) -> Response:
        self.herder.pause(request.path_params["name"])
        return Response(status_code=202)

    def resume(self, request: Request) -> Response:
        self.herder.resume(request.path_params["name"])
        return Response(status_code=202)

    def stop(self, request: Request) -> Response:
        self.herder.stop(request.path_params["name"])
        return Response(status_code=204)

    def tasks(self, request: Request) -> Response:
        conn = self.herder.get(request.path_params["name"])
        config = conn.masked_config()
        return JSONResponse(
            [
                {"id": {"connector": conn.name, "task": t.id}, "config": config | {"task.id": str(t.id)}}
                for t in conn.tasks
            ]
        )

    def _task_id(self, request: Request, message: str) -> int:
        raw = request.path_params["task"]
        if not (raw.isascii() and raw.isdigit()):  # str.isdigit alone takes '²', which int() refuses
            raise RestError(404, message.format(name=request.path_params["name"], task=raw))
        return int(raw)

    def task_status(self, request: Request) -> Response:
        name = request.path_params["name"]
        message = "No status found for task {name}-{task}"
        task_id = self._task_id(request, message)
        conn = self.herder.connectors.get(name)
        task = next((t for t in conn.tasks if t.id == task_id), None) if conn else None
        if task is None:
            raise RestError(404, message.format(name=name, task=task_id))
        return JSONResponse(task.status(self.herder.worker_id))

    def restart_task(self, request: Request) -> Response:
        name = request.path_params["name"]
        self.herder.get(name, f"Unknown connector: {name}")
        self.herder.restart_task(name, self._task_id(request, "Unknown task: {name}-{task}"))
        return Response(status_code=204)

    def topics(self, request: Request) -> Response:
        name = request.path_params["name"]
        conn = self.herder.connectors.get(name)
        return JSONResponse({name: {"topics": conn.active_topics() if conn else []}})

    def reset_topics(self, request: Request) -> Response:
        self.herder.reset_topics(request.path_params["name"])
        return Response(status_code=202)

    # --- offsets (KIP-875) ------------------------------------------------------------------------

    def get_offsets(self, request: Request) -> Response:
        conn = self.herder.get(request.path_params["name"])
        found = offsets.read_offsets(self._bootstrap(conn.config), conn.name, conn.config)
        return JSONResponse({"offsets": found})

    def _stopped(self, name: str) -> Any:
        conn = self.herder.get(name)
        if conn.target != "STOPPED":
            raise RestError(
                400,
                "Connectors must be in the STOPPED state before their offsets can be modified. "
                "This can be done for the specified connector by issuing a 'PUT' request to the "
                f"'/connectors/{name}/stop' endpoint",
            )
        return conn

    async def alter_offsets(self, request: Request) -> Response:
        conn = self._stopped(request.path_params["name"])
        body = await self._json(request)
        from starlette.concurrency import run_in_threadpool

        message = await run_in_threadpool(
            offsets.alter_offsets, self._bootstrap(conn.config), conn.name, body
        )
        return JSONResponse({"message": message})

    def reset_offsets(self, request: Request) -> Response:
        conn = self._stopped(request.path_params["name"])
        message = offsets.reset_offsets(self._bootstrap(conn.config), conn.name, conn.config)
        return JSONResponse({"message": message})

    # --- admin: loggers (KIP-495) ---------------------------------------------------------------

    def loggers(self, request: Request) -> Response:
        return JSONResponse(logger_levels())

    def logger(self, request: Request) -> Response:
        return JSONResponse(logger_levels(request.path_params["logger"]))

    async def set_logger(self, request: Request) -> Response:
        return JSONResponse(set_logger_level(request.path_params["logger"], await self._json(request)))

    def tasks_config(self, request: Request) -> Response:
        """Deprecated ``/tasks-config`` (removed in Kafka 4.0), still used by older tools."""
        conn = self.herder.get(request.path_params["name"])
        config = conn.masked_config()
        return JSONResponse({f"{conn.name}-{t.id}": config | {"task.id": str(t.id)} for t in conn.tasks})

    # --- plugins -----------------------------------------------------------------------------------

    def list_plugins(self, request: Request) -> Response:
        only = request.query_params.get("connectorsOnly", "true").lower() != "false"
        return JSONResponse(plugins.connector_plugins(only))

    def plugin_config(self, request: Request) -> Response:
        plugin = request.path_params["plugin"]
        if plugins.resolve_class(plugin) is None:
            raise RestError(404, f"Unknown plugin {plugin}.")
        return JSONResponse([plugins.key_info(k) for k in plugins.KEY_CATALOGUE])

    async def validate(self, request: Request) -> Response:
        plugin = request.path_params["plugin"]
        config = _coerce(await self._json(request))
        included = config.get("connector.class")
        if included is not None and plugins.resolve_class(included) != plugins.resolve_class(plugin):
            raise RestError(400, f"Included connector type {included} does not match request type {plugin}")
        if not included:
            # Connect answers 500 here; a missing key is the caller's mistake, so we say 400.
            raise RestError(
                400,
                "org.apache.kafka.connect.runtime.rest.errors.BadRequestException: "
                f"Connector config {_java_map(config)} contains no connector type",
            )
        if plugins.resolve_class(included) is None:
            raise RestError(400, plugins.unknown_class_message(included))
        from starlette.concurrency import run_in_threadpool

        problems = await run_in_threadpool(plugins.validate_config, config)
        return JSONResponse(plugins.config_infos(included, config, problems))


def _cluster_id(bootstrap: str) -> str | None:
    try:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": bootstrap, "log_level": 0}).list_topics(timeout=2).cluster_id
    except Exception as exc:  # noqa: BLE001 - the id is informational; a down broker must not break GET /
        log.warning("cannot read the Kafka cluster id from %s: %s", bootstrap, exc)
        return None


def _by_path(routes: list[Route]) -> list[Route]:
    """One route per path, dispatching on the method, so a 405's ``Allow`` lists every method.

    Starlette answers a wrong method with the ``Allow`` of the *first* route whose path matches:
    with one route per method, ``OPTIONS /connectors`` said ``Allow: GET, HEAD`` and hid POST.
    Sync handlers still run in the thread pool, as Starlette runs them.
    """
    handlers: dict[str, dict[str, Callable[[Request], Any]]] = {}
    for route in routes:
        for method in route.methods or ():
            if method != "HEAD":
                handlers.setdefault(route.path, {})[method] = route.endpoint

    def dispatcher(by_method: dict[str, Callable[[Request], Any]]) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            handler = by_method["GET" if request.method == "HEAD" else request.method]
            if inspect.iscoroutinefunction(handler):
                return await handler(request)
            return await run_in_threadpool(handler, request)

        return endpoint

    return [Route(path, dispatcher(methods), methods=list(methods)) for path, methods in handlers.items()]


def build_routes(herder: Herder, registry: Any, *, basic_auth: bool = False) -> list[Route]:
    """Every route of the worker (``basic_auth``: whether /openapi.json declares it on writes)."""
    a = Api(herder, registry, basic_auth=basic_auth)
    c = "/connectors/{name}"
    routes = [
        Route("/", a.root, methods=["GET"]),
        Route("/health", a.health, methods=["GET"]),
        Route("/metrics", a.metrics, methods=["GET"]),
        Route("/ui", a.ui, methods=["GET"]),
        Route("/openapi.json", a.openapi, methods=["GET"]),
        Route("/connectors", a.list_connectors, methods=["GET"]),
        Route("/connectors", a.create_connector, methods=["POST"]),
        Route(c, a.get_connector, methods=["GET"]),
        Route(c, a.delete_connector, methods=["DELETE"]),
        Route(c + "/config", a.get_config, methods=["GET"]),
        Route(c + "/config", a.put_config, methods=["PUT"]),
        Route(c + "/config", a.patch_config, methods=["PATCH"]),
        Route(c + "/status", a.status, methods=["GET"]),
        Route(c + "/restart", a.restart, methods=["POST"]),
        Route(c + "/pause", a.pause, methods=["PUT"]),
        Route(c + "/resume", a.resume, methods=["PUT"]),
        Route(c + "/stop", a.stop, methods=["PUT"]),
        Route(c + "/tasks", a.tasks, methods=["GET"]),
        Route(c + "/tasks/{task}/status", a.task_status, methods=["GET"]),
        Route(c + "/tasks/{task}/restart", a.restart_task, methods=["POST"]),
        Route(c + "/topics", a.topics, methods=["GET"]),
        Route(c + "/topics/reset", a.reset_topics, methods=["PUT"]),
        Route(c + "/offsets", a.get_offsets, methods=["GET"]),
        Route(c + "/offsets", a.alter_offsets, methods=["PATCH"]),
        Route(c + "/offsets", a.reset_offsets, methods=["DELETE"]),
        Route(c + "/tasks-config", a.tasks_config, methods=["GET"]),
        Route("/admin/loggers", a.loggers, methods=["GET"]),
        Route("/admin/loggers/{logger}", a.logger, methods=["GET"]),
        Route("/admin/loggers/{logger}", a.set_logger, methods=["PUT"]),
        Route("/connector-plugins", a.list_plugins, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config", a.plugin_config, methods=["GET"]),
        Route("/connector-plugins/{plugin}/config/validate", a.validate, methods=["PUT"]),
    ]
    return _by_path(routes)
