"""The ASGI application and the uvicorn server of ``kcql-sink worker``.

``build_app`` wires the routes, Connect-shaped error bodies for every failure (including unknown
routes and wrong methods), optional HTTP basic auth on the write methods, and the lifespan that
starts the persisted connectors and stops every task on shutdown (states stay as persisted, so
the next start resumes them).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hmac
import logging
import signal
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from sink.rest.errors import RestError
from sink.rest.herder import Herder
from sink.rest.metrics import make_registry
from sink.rest.routes import build_routes

__all__ = ["WRITE_METHODS", "build_app", "serve"]

log = logging.getLogger(__name__)

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
HTTP_REASONS = {404: "Not Found", 405: "Method Not Allowed", 400: "Bad Request", 500: "Internal Server Error"}


class BasicAuthMiddleware(BaseHTTPMiddleware):
    """Requires ``user:password`` (HTTP basic) on write methods; reads stay open for monitoring."""

    def __init__(self, app: Any, credentials: str) -> None:
        super().__init__(app)
        self.expected = credentials.encode()

    async def dispatch(
        self, request: Request, call_next: Callable[[Request], Awaitable[Response]]
    ) -> Response:
        if request.method in WRITE_METHODS and not self._ok(request.headers.get("authorization", "")):
            return JSONResponse(
                {"error_code": 401, "message": "Authentication required for write requests (HTTP basic)"},
                status_code=401,
                headers={"WWW-Authenticate": 'Basic realm="kcql-sink"'},
            )
        return await call_next(request)

    def _ok(self, header: str) -> bool:
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            given = base64.b64decode(encoded.strip(), validate=True)
        except (binascii.Error, ValueError):
            return False
        return hmac.compare_digest(given, self.expected)


async def _rest_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RestError)  # noqa: S101 - registered for RestError only
    return JSONResponse(exc.body(), status_code=exc.status)


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)  # noqa: S101
    reason = HTTP_REASONS.get(exc.status_code, str(exc.detail))
    return JSONResponse(
        {"error_code": exc.status_code, "message": f"HTTP {exc.status_code} {reason}"},
        status_code=exc.status_code,
        headers=getattr(exc, "headers", None),
    )


async def _server_error(request: Request, exc: Exception) -> Response:
    log.error("request %s %s failed: %s", request.method, request.url.path, exc, exc_info=exc)
    return JSONResponse({"error_code": 500, "message": str(exc) or type(exc).__name__}, status_code=500)


def build_app(herder: Herder, basic_auth: str | None = None) -> Starlette:
    """The worker's ASGI app over ``herder`` (started on lifespan startup, stopped on shutdown)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        await run_in_threadpool(herder.start)
        try:
            yield
        finally:
            await run_in_threadpool(herder.shutdown)

    middleware = [Middleware(BasicAuthMiddleware, credentials=basic_auth)] if basic_auth else []
    return Starlette(
        routes=build_routes(herder, make_registry(herder), basic_auth=bool(basic_auth)),
        middleware=middleware,
        exception_handlers={RestError: _rest_error, HTTPException: _http_error, Exception: _server_error},
        lifespan=lifespan,
    )


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn's server, minus re-raising SIGTERM/SIGINT after the graceful shutdown.

        A worker stopped by SIGTERM has committed and stopped every task: that is a clean exit (0),
        as for ``kcql-sink run``, not death by signal.
        """

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            if threading.current_thread() is not threading.main_thread():
                yield
                return
            originals = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in originals.items():
                    signal.signal(sig, handler)

    return Server


def serve(herder: Herder, host: str, port: int, basic_auth: str | None = None) -> None:
    """Run the worker until SIGINT/SIGTERM (uvicorn handles the signals, then the lifespan stops tasks)."""
    import uvicorn

    _Server = _server_class()
    config = uvicorn.Config(
        build_app(herder, basic_auth),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="on",
        timeout_graceful_shutdown=30,
    )
    log.info("kcql-sink worker listening on http://%s:%d", host, port)
    _Server(config).run()
    log.info("kcql-sink worker stopped")
