"""An HTTP proxy that sits between the sink's S3 client and SeaweedFS and injects faults by rule.

Why a real proxy instead of a mocked client: the sink's retry, backoff and fencing code only
meets real failure modes (a 503 SlowDown body, a reset socket, a truncated response, a slow
server) through botocore's real transport. The sink is pointed at the proxy with
``connect.s3.custom.endpoint``; the proxy forwards everything else byte for byte, keeping the
``Host`` header so SigV4 signatures still verify upstream.

Faults (``Rule.action``):

* ``slowdown``: 503 with S3's ``SlowDown`` XML body (throttling).
* ``error500``: 500 ``InternalError``.
* ``denied``: 403 ``AccessDenied``, as S3 answers a request a bucket or IAM policy denies.
* ``reset``: the connection is reset (RST, ``SO_LINGER`` 0) without any response.
* ``latency``: the request is delayed by ``delay`` seconds, then forwarded.
* ``partial``: the upstream answer is forwarded with its full ``Content-Length`` but only half
  the body, then the connection is closed.
* ``hold``: sets ``Rule.hit`` and parks the request (up to ``delay`` s or until ``Rule.release``),
  so a chaos harness can SIGKILL the sink while that request (an upload, an index write) is in
  flight; with ``Rule.drop`` set the parked request is then reset instead of forwarded, as the
  socket of a killed process would be.

A rule matches on method and a regular expression searched in the path with its query string,
skips its first ``skip`` matches and fires ``times`` times (``-1``: forever).

Every request is also counted by S3 operation (:func:`s3_operation`: ``PutObject``,
``CopyObject``, ``HeadObject``, ``ListObjectsV2``, ...) and bucket in ``FaultProxy.operations``,
which is how ``bench/s3_requests.py`` measures what a commit protocol costs.
"""

from __future__ import annotations

import http.client
import logging
import re
import socket
import struct
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

__all__ = ["ACTIONS", "FaultProxy", "Rule", "s3_operation"]

log = logging.getLogger(__name__)

ACTIONS = ("slowdown", "error500", "denied", "reset", "latency", "partial", "hold")

_HOP_BY_HOP = {
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "expect",
}

_ERROR_BODIES = {
    503: (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
        b"<Message>Please reduce your request rate.</Message></Error>"
    ),
    500: (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>InternalError</Code>'
        b"<Message>We encountered an internal error. Please try again.</Message></Error>"
    ),
    403: (
        b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>AccessDenied</Code>'
        b"<Message>Access Denied</Message></Error>"
    ),
}
_STATUS = {"slowdown": 503, "error500": 500, "denied": 403}


def s3_operation(method: str, target: str, headers: Any) -> tuple[str, str]:
    """``(bucket, S3 operation)`` of a path-style request, e.g. ``("b", "CopyObject")``.

    ``target`` is the request target (path and query); ``headers`` anything with ``.get``. The
    operation names are the S3 API's, so they map onto its price list (PUT, COPY, POST, LIST vs
    GET and the rest).
    """
    parts = urlsplit(target)
    segments = unquote(parts.path).lstrip("/").split("/", 1)
    bucket = segments[0]
    has_key = len(segments) == 2 and segments[1] != ""
    query = parse_qs(parts.query, keep_blank_values=True)
    if method == "PUT":
        if not has_key:
            return bucket, "CreateBucket"
        copy = headers.get("x-amz-copy-source") is not None
        if "partNumber" in query:
            return bucket, "UploadPartCopy" if copy else "UploadPart"
        return bucket, "CopyObject" if copy else "PutObject"
    if method == "POST":
        if "uploads" in query:
            return bucket, "CreateMultipartUpload"
        if "uploadId" in query:
            return bucket, "CompleteMultipartUpload"
        return bucket, "DeleteObjects" if "delete" in query else "PostObject"
    if method == "GET":
        if not has_key:
            return bucket, "ListObjectsV2" if query.get("list-type") == ["2"] else "ListObjects"
        return bucket, "ListParts" if "uploadId" in query else "GetObject"
    if method == "HEAD":
        return bucket, "HeadObject" if has_key else "HeadBucket"
    if method == "DELETE":
        if "uploadId" in query:
            return bucket, "AbortMultipartUpload"
        return bucket, "DeleteObject" if has_key else "DeleteBucket"
    return bucket, method


@dataclass
class Rule:
    """One fault: which requests it hits (method, path regex), how often, and what it does."""

    action: str
    method: str | None = None
    path: str | None = None
    times: int = 1
    skip: int = 0
    delay: float = 5.0
    hit: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    drop: bool = False
    fired: int = 0
    seen: int = 0

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}; expected one of {ACTIONS}")

    def take(self, method: str, path: str) -> bool:
        """True if this request gets the fault (counts matches; caller holds the proxy lock)."""
        if self.method and self.method != method:
            return False
        if self.path and not re.search(self.path, path):
            return False
        if self.times >= 0 and self.fired >= self.times:
            return False
        self.seen += 1
        if self.seen <= self.skip:
            return False
        self.fired += 1
        return True


class _Server(ThreadingHTTPServer):
    """Serves each connection on a daemon thread, and stays quiet about clients that vanish.

    A chaos run SIGKILLs the sink with requests in flight; the kernel resets their connections,
    and ``socketserver`` would print each reset as a traceback, burying the run's real output.
    """

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            log.debug("client %s went away mid-request", client_address)
            return
        super().handle_error(request, client_address)


class FaultProxy:
    """A threaded forwarding proxy on 127.0.0.1 (free port) in front of ``upstream``.

    Use as a context manager or call :meth:`start`/:meth:`stop`. ``url`` is what the sink's
    ``connect.s3.custom.endpoint`` should be. ``injected`` counts faults by action,
    ``requests`` requests by method and ``operations`` by ``(bucket, S3 operation)``.
    """

    def __init__(self, upstream: str) -> None:
        parts = urlsplit(upstream)
        if parts.scheme != "http" or not parts.hostname or not parts.port:
            raise ValueError(f"upstream must be http://host:port, got {upstream!r}")
        self.upstream_host = parts.hostname
        self.upstream_port = parts.port
        self.rules: list[Rule] = []
        self.injected: Counter[str] = Counter()
        self.requests: Counter[str] = Counter()
        self.operations: Counter[tuple[str, str, str]] = Counter()
        """Requests by ``(bucket, area, S3 operation)``; area: ``bucket`` (no key), ``index``
        (``.indexes/``), ``temp`` (``.temp-upload/``), ``hidden`` (another dot folder) or ``data``."""
        self.lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> FaultProxy:
        """Bind a free port and serve in a daemon thread."""
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = _Server(("127.0.0.1", 0), Handler)
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True, name="fault-proxy")
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the listening socket."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the endpoint to give the sink."""
        if self._server is None:
            raise RuntimeError("proxy not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- rules -----------------------------------------------------------------------------
    def add(self, rule: Rule) -> Rule:
        """Install a rule (rules are tried in order; the first that takes a request wins)."""
        with self.lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule (counters are kept)."""
        with self.lock:
            self.rules.clear()

    def count(self, method: str, target: str, headers: Any) -> None:
        """Count one request by bucket, key area and S3 operation (see :func:`s3_operation`)."""
        bucket, operation = s3_operation(method, target, headers)
        key = unquote(urlsplit(target).path).lstrip("/").partition("/")[2]
        area = (
            "bucket" if not key else "index" if key.startswith(".indexes/")
            else "temp" if key.startswith(".temp-upload/") else "hidden" if key.startswith(".") else "data"
        )
        with self.lock:
            self.operations[(bucket, area, operation)] += 1

    def operations_of(self, bucket: str, *, by_area: bool = False) -> Counter[str]:
        """Requests that reached ``bucket`` so far, by S3 operation (``by_area``: ``area:operation``)."""
        out: Counter[str] = Counter()
        with self.lock:
            for (b, area, op), n in self.operations.items():
                if b == bucket:
                    out[f"{area}:{op}" if by_area else op] += n
        return out

    def pick(self, method: str, path: str) -> Rule | None:
        with self.lock:
            self.requests[method] += 1
            for rule in self.rules:
                if rule.take(method, path):
                    self.injected[rule.action] += 1
                    return rule
        return None


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - stdlib signature
        log.debug("proxy: %s", format % args)

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _handle(self) -> None:
        method = self.command
        body = self._read_body()
        self.owner.count(method, self.path, self.headers)
        rule = self.owner.pick(method, self.path)
        action = rule.action if rule else None
        if rule is not None and action == "latency":
            rule.hit.set()
            time.sleep(rule.delay)
        if rule is not None and action == "hold":
            rule.hit.set()
            rule.release.wait(rule.delay)
        if action == "reset" or (rule is not None and action == "hold" and rule.drop):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
            return
        if action in _STATUS:
            status = _STATUS[action]
            payload = _ERROR_BODIES[status]
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            if method != "HEAD":
                self.wfile.write(payload)
            return
        status, headers, payload = self._forward(method, body)
        self.send_response(status)
        for name, value in headers:
            if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        if action == "partial":
            self.send_header("Connection", "close")
        self.end_headers()
        if method == "HEAD":
            return
        if action == "partial":
            self.wfile.write(payload[: len(payload) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.wfile.write(payload)

    def _forward(self, method: str, body: bytes) -> tuple[int, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(self.owner.upstream_host, self.owner.upstream_port, timeout=120)
        try:
            conn.putrequest(method, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                    conn.putheader(name, value)
            conn.putheader("Content-Length", str(len(body)))
            conn.endheaders(body)
            resp = conn.getresponse()
            payload = resp.read()
            return resp.status, resp.getheaders(), payload
        finally:
            conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle
