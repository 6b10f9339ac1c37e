"""Hostile input to the REST worker, and hostile PARTITIONBY values on disk.

Bounded fuzzing: connector names (path traversal, NUL, unicode, 10,000 characters), bodies (not
JSON, wrong JSON types, nulls, invalid UTF-8, deep nesting, 5 MB) and every method on every route.
The worker must answer each with a 2xx/4xx (never a 5xx or a dropped connection) and write
nothing outside its state directory. Then PARTITIONBY values such as ``../../x`` through
``kcql-sink run``: every file stays under the bucket prefix.
"""

from __future__ import annotations

import json
import os
import signal
import time
import uuid
from pathlib import Path
from urllib.parse import quote

import pytest
import requests
from confluent_kafka import Producer

from chaos.crash import FAST_CONSUMER, start_sink
from chaos.reader import read_local
from tests.integration._worker_support import Worker

HOSTILE_NAMES = [
    "../../escape",
    "..",
    ".",
    "a/../../b",
    "..%2f..%2fescape",
    "/abs/path",
    "nul\x00byte",
    "new\nline",
    "連接器-☃-🚀",
    "x" * 10_000,
    " ",
    "",
    "con",
    ".hidden",
    "$(touch pwned)",
    "%00",
    "🚀" * 60,  # 60 characters, but 720 bytes percent-encoded: too long for a state file name
]

BAD_BODIES: list[bytes] = [
    b"",
    b"not json",
    b"{",
    b"null",
    b"[]",
    b'"string"',
    b"42",
    b'{"name": 5, "config": {}}',
    b'{"name": "x", "config": "not an object"}',
    b'{"name": "x", "config": {"topics": null}}',
    b'{"name": "x", "config": {"topics": {"nested": 1}}}',
    b'{"name": "x", "config": {"topics": ["a"]}}',
    b'{"name": "x"}',
    b'{"config": {}}',
    b"\xff\xfe\xfd",
    b'{"name": "big", "config": {"topics": "' + b"a" * 5_000_000 + b'"}}',
]

DEEP_BODY = b"[" * 100_000 + b"]" * 100_000
BODY_ROUTES = (
    ("POST", "/connectors"),
    ("PUT", "/connectors/x/config"),
    ("PATCH", "/connectors/x/config"),
    ("PATCH", "/connectors/x/offsets"),
    ("PUT", "/connector-plugins/S3SinkConnector/config/validate"),
    ("PUT", "/admin/loggers/root"),
)
VALIDATE = "/connector-plugins/S3SinkConnector/config/validate"

METHODS = ("GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "TRACE")
PATHS = (
    "/",
    "/connectors",
    "/connectors/n",
    "/connectors/n/config",
    "/connectors/n/status",
    "/connectors/n/restart",
    "/connectors/n/pause",
    "/connectors/n/offsets",
    "/connectors/n/tasks/0/status",
    "/connectors/n/tasks/-1/restart",
    "/connectors/n/tasks/99999999999999999999/status",
    "/connectors/n/tasks/²/status",  # a digit to str.isdigit, not to int()
    "/connector-plugins",
    "/admin/loggers/..%2f..",
    "/../../../etc/passwd",
    "/connectors/%2e%2e%2f%2e%2e",
)


def _tree(root: Path, skip: Path) -> set[str]:
    out = set()
    for dirpath, _dirs, files in os.walk(root):
        if Path(dirpath).is_relative_to(skip):
            continue
        out.update(os.path.join(dirpath, f) for f in files)
    return out


@pytest.fixture
def worker(tmp_path, kafka_bootstrap):
    w = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    yield w
    w.stop()


def test_hostile_names_bodies_and_methods_get_no_5xx_and_write_only_the_state_dir(
    worker, tmp_path, topic_factory
):
    topic = topic_factory("hostile")
    config = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": f"INSERT INTO bkt:p SELECT * FROM `{topic}`",  # noqa: S608
        "connect.storage": "local",
        "connect.local.root": str(tmp_path / "state" / "out"),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
    }
    before = _tree(tmp_path, tmp_path / "state")
    bad: list[tuple] = []

    def check(resp_or_exc, what):
        if isinstance(resp_or_exc, Exception):
            bad.append((what, repr(resp_or_exc)[:200]))
        elif resp_or_exc.status_code >= 500 or "Traceback" in resp_or_exc.text:
            bad.append((what, resp_or_exc.status_code, resp_or_exc.text[:200]))

    def call(method, path, **kw):
        try:
            return requests.request(method, worker.url(path), timeout=30, **kw)
        except requests.RequestException as exc:
            return exc

    for name in HOSTILE_NAMES:
        resp = call("POST", "/connectors", json={"name": name, "config": config})
        check(resp, ("create", name[:40]))
        quoted = quote(name, safe="")
        for sub in ("", "/config", "/status", "/offsets"):
            check(call("GET", f"/connectors/{quoted}{sub}"), ("get", name[:40], sub))
        check(call("PUT", f"/connectors/{quoted}/config", json=config), ("put", name[:40]))
        if (not isinstance(resp, Exception) and resp.status_code < 300) or True:
            check(call("DELETE", f"/connectors/{quoted}"), ("delete", name[:40]))
    for body in BAD_BODIES:
        for method, path in BODY_ROUTES:
            check(
                call(method, path, data=body, headers={"Content-Type": "application/json"}),
                (method, path, body[:30]),
            )
    for method in METHODS:
        for path in PATHS:
            check(call(method, path), (method, path))
    for name in list(worker.get("/connectors").json()):
        worker.delete(f"/connectors/{quote(name, safe='')}")
    assert not bad, "\n".join(map(str, bad[:20]))
    assert worker.proc.poll() is None
    after = _tree(tmp_path, tmp_path / "state")
    assert after - before <= {str(tmp_path / "worker.log")}, sorted(after - before)
    assert "Traceback" not in worker.log()


def test_deep_json_and_validate_without_connector_class_are_4xx(worker):
    codes = [
        requests.request(m, worker.url(p), data=DEEP_BODY, timeout=30).status_code for m, p in BODY_ROUTES
    ]
    codes.append(requests.put(worker.url(VALIDATE), json={"name": "x"}, timeout=30).status_code)
    assert max(codes) < 500, codes


def test_hostile_partition_values_never_escape_the_prefix(kafka_bootstrap, topic_factory, tmp_path):
    topic = topic_factory("escape")
    kinds = [
        "../../../../escaped",
        "/abs",
        "..",
        ".",
        "",
        "a/../../b",
        "%2e%2e",
        "\\..\\..",
        "ok",
        "nul\x00",
        "☃",
    ]
    prod = Producer({"bootstrap.servers": kafka_bootstrap})
    for kind in kinds:
        prod.produce(topic, value=json.dumps({"kind": kind}).encode())
    assert prod.flush(10) == 0
    root = tmp_path / "out"
    props = {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": (
            f"INSERT INTO bkt:p SELECT * FROM `{topic}` PARTITIONBY kind STOREAS `JSON` "  # noqa: S608
            "PROPERTIES('store.envelope'=true, 'flush.interval'=1)"
        ),
        "connect.storage": "local",
        "connect.local.root": str(root),
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
    }
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"name": f"esc-{uuid.uuid4().hex[:6]}", "config": props}))
    proc = start_sink(config, kafka_bootstrap, tmp_path / "esc.log")
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and proc.poll() is None:
            if len(read_local(root, "bkt", "p")[0]) >= len(kinds):
                break
            time.sleep(0.5)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)
    seen, _files = read_local(root, "bkt", "p")
    assert sorted(o for (_t, _p, o) in seen) == list(range(len(kinds))), (tmp_path / "esc.log").read_text()[
        -2000:
    ]
    prefix = (root / "bkt" / "p").resolve()
    for dirpath, _dirs, files in os.walk(tmp_path):
        for f in files:
            path = Path(dirpath, f).resolve()
            if path.is_relative_to(root):
                rel = path.relative_to(root).as_posix()
                assert path.is_relative_to(prefix) or rel.startswith(("bkt/.", ".")), (
                    rel
                )  # hidden: index, locks
    assert not (tmp_path / "escaped").exists() and not Path("/abs").exists()
