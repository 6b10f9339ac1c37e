"""The same bad config gets the same problems from every entry point.

Each config of the table goes through ``kcql-sink run`` (in process, stopped by its config error
before anything connects), the REST worker's ``PUT /connector-plugins/{plugin}/config/validate``,
``POST /connectors`` and ``PUT /connectors/{name}/config`` (the real Starlette app, driven over
ASGI; no server, no broker), and must get exactly :func:`sink.config.validate.validate`'s problems.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from kcql.errors import ConfigError
from sink.cli import main
from sink.config.validate import validate
from sink.rest.app import build_app
from sink.rest.herder import Herder
from sink.rest.plugins import error_message_lines, problem_text
from sink.rest.store import StateStore

SECRET = "entry-points-secret-5d0c"  # a canary that must never be shown

BASE = {
    "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
    "topics": "orders",
    "connect.s3.kcql": "INSERT INTO lake:orders SELECT * FROM orders STOREAS `JSON`",
    "connect.storage": "local",
    "connect.local.root": "/tmp/kcql-entry-points-unused",
}

BAD_CONFIGS: dict[str, dict[str, str]] = {
    # the CLI said 1, the worker answered 500 (str.isdigit() accepts it, int() does not)
    "tasks-max-superscript": {"tasks.max": "²"},
    # the CLI read 10 (int() accepts underscores), the worker refused it
    "tasks-max-underscore": {"tasks.max": "1_0"},
    "tasks-max-huge": {"tasks.max": "99999999999999999999"},
    "kcql-and-errors": {
        "connect.s3.kcql": "INSERT INTO lake:orders SELEC * FROM orders",
        "errors.tolerance": "sometimes",
    },
    "topics-both-and-missing": {"topics": "orders,returns", "topics.regex": "ord.*"},
    "override-and-converter": {
        "consumer.override.session.timeout.ms": "abc",
        "value.converter": "io.confluent.connect.avro.AvroConverter",
        "value.converter.basic.auth.user.info": f"user:{SECRET}",
    },
    "retry-settings": {
        "connect.s3.error.policy": "PANIC",
        "connect.s3.max.retries": "2147483648",
        "connect.s3.retry.interval": "-1",
    },
    "s3-credentials-and-alias": {
        "connect.storage": "s3",
        "connect.s3.aws.auth.mode": "Credentials",
        "connect.s3.aws.secret.key": SECRET,
        "aws.secret.key": SECRET + "-other",
    },
}


def request(app: Any, method: str, path: str, body: object) -> tuple[int, Any]:
    """One HTTP request through the ASGI app, as a server would deliver it."""
    data = json.dumps(body).encode()
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": data, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"worker"), (b"content-type", b"application/json")],
        "client": ("127.0.0.1", 50000),
        "server": ("worker", 8083),
    }
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    payload = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(payload)


@pytest.fixture
def app(tmp_path: Path) -> Any:
    # never started: no persisted connector is resumed and no task runs (every config here is refused)
    return build_app(Herder(StateStore(tmp_path / "state"), "w:1", "127.0.0.1:9"))


@pytest.mark.parametrize("case", sorted(BAD_CONFIGS))
def test_every_entry_point_reports_validates_problems(
    case: str, app: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"entry-{case}"
    props = BASE | BAD_CONFIGS[case]
    expected = validate(props | {"name": name})
    assert expected, "every config of the table is broken"

    # PUT /connector-plugins/{plugin}/config/validate: every problem under its key
    status, infos = request(
        app, "PUT", "/connector-plugins/S3SinkConnector/config/validate", props | {"name": name}
    )
    assert status == 200
    assert infos["error_count"] == len(expected)
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    by_key = {p.key: [problem_text(q) for q in expected if q.key == p.key] for p in expected}
    assert errors == by_key

    # POST /connectors and PUT /connectors/{name}/config: a 400 listing exactly those problems
    message = error_message_lines(expected)
    refused = (400, {"error_code": 400, "message": message})
    assert request(app, "POST", "/connectors", {"name": name, "config": props}) == refused
    assert request(app, "PUT", f"/connectors/{name}/config", props) == refused

    # kcql-sink run: exit 1 before anything connects, the same problems in one ConfigError
    config = tmp_path / f"{name}.json"
    config.write_text(json.dumps({"name": name, "config": props}))
    capsys.readouterr()
    assert main(["run", str(config), "--bootstrap-servers", "127.0.0.1:9"]) == 1
    err = capsys.readouterr().err
    assert f"kcql-sink run: {ConfigError(expected)}\n" in err
    assert err.count("configuration problem(s)") == 1

    assert SECRET not in json.dumps(infos) + message + err
