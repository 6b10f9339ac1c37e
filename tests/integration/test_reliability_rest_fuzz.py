"""Schemathesis against the worker's own ``/openapi.json``: the API fuzzed from its spec.

A real worker process over the test Tansu broker; ``st run`` (schemathesis' command line, from the
``test`` extra) generates requests for every operation of the document (its coverage, fuzzing and
stateful phases, positive and negative data) and checks each response:

* ``not_a_server_error``: no 5xx;
* ``status_code_conformance``, ``content_type_conformance``, ``response_headers_conformance``,
  ``response_schema_conformance``: every response is one the document declares, in its shape;
* ``unsupported_method``, ``allow_header_conformance``: a method the document does not list for a
  path is a 405 whose ``Allow`` lists exactly the documented ones;
* ``use_after_free``, ``ensure_resource_availability`` (stateful): a deleted connector is gone, a
  created one is there; ``use_after_free`` leaves out ``GET /connectors/{connector}/topics``, which
  Connect answers for any name with a 200 and no topics (``use_after_free_but_topics`` in the
  hooks; a long two-client run of 2026-11-28 caught it there);
* ``secrets_never_returned`` (tests/integration/_rest_fuzz_hooks.py): a secret POSTed in a config
  never comes back in clear; half of the generated config bodies are laid under a valid config
  holding a secret, so connectors with secrets are really created, changed and read back;
* with ``--basic-auth``, ``ignored_auth``: each write operation without (or with wrong) credentials
  gets a 401; and a direct sweep of every write operation without credentials.

``negative_data_rejection`` is not asked for: Connect itself accepts what its document's types do
not say (JSON numbers and booleans as config values, unknown ``expand`` values), and so do we.
The short runs (fixed seeds) are part of ``make test``; the long ones, with a time budget, random
seeds and two concurrent clients, are ``chaos``.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path

import pytest
import requests

from chaos.crash import FAST_CONSUMER
from tests.integration._worker_support import REPO, Worker

CHECKS = (
    "not_a_server_error,status_code_conformance,content_type_conformance,response_headers_conformance,"
    "response_schema_conformance,unsupported_method,allow_header_conformance,use_after_free_but_topics,"
    "ensure_resource_availability,secrets_never_returned"
)
AUTH = "fuzz-admin:fuzz-" + uuid.uuid4().hex[:12]
SHOW_CONFIG = {
    "getConnector",
    "getConnectorConfig",
    "getTaskConfigs",
    "getTasksConfig",
    "createConnector",
    "putConnectorConfig",
    "patchConnectorConfig",
}
"""Operations whose 2xx body holds a connector's config."""


def base_config(topic: str, root: Path, secret: str) -> dict[str, str]:
    return {
        "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
        "topics": topic,
        "connect.s3.kcql": f"INSERT INTO bkt:fuzz SELECT * FROM `{topic}` STOREAS `JSON`",  # noqa: S608
        "connect.storage": "local",
        "connect.local.root": str(root),
        "connect.s3.aws.secret.key": secret,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
        **FAST_CONSUMER,
    }


def schemathesis_run(
    worker: Worker,
    topic: str,
    tmp_path: Path,
    *args: str,
    auth: str | None = None,
    checks: str = CHECKS,
    secret: str | None = None,
) -> tuple[subprocess.CompletedProcess[str], Counter[tuple[str, int, bool]], str]:
    """``st run`` against ``worker``; returns the process, response counts and the run's secret."""
    secret = secret or "fuzz-secret-" + uuid.uuid4().hex
    stats = tmp_path / f"stats-{uuid.uuid4().hex[:6]}.jsonl"
    base = base_config(topic, tmp_path / "out", secret)
    names = [f"fuzz-{i}" for i in range(2)]
    headers = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()} if auth else {}
    for name in names:
        body = {"name": name, "config": base, "initial_state": "PAUSED"}  # tasks start when resumed
        resp = worker.post("/connectors", json=body, headers=headers)
        assert resp.status_code == 201, resp.text
    env = {
        **os.environ,
        "SCHEMATHESIS_HOOKS": "tests.integration._rest_fuzz_hooks",
        "KCQL_FUZZ_BASE": json.dumps(base),
        "KCQL_FUZZ_NAMES": ",".join(names),
        "KCQL_FUZZ_SECRET": secret,
        "KCQL_FUZZ_STATS": str(stats),
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
        "NO_COLOR": "1",
    }
    cmd = [sys.executable, "-m", "schemathesis.cli", "run", worker.url("/openapi.json"), "--checks", checks]
    cmd += ["--request-timeout", "60", "--output-truncate", "true", "--no-color", *args]
    if auth:
        cmd += ["--auth", auth]
    proc = subprocess.run(
        cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900, check=False
    )
    counts: Counter[tuple[str, int, bool]] = Counter()
    if stats.exists():
        for line in stats.read_text().splitlines():
            row = json.loads(line)
            counts[(row["op"], row["status"], row["secret_sent"])] += 1
    return proc, counts, secret


def assert_clean_run(
    proc: subprocess.CompletedProcess[str],
    counts: Counter[tuple[str, int, bool]],
    secret: str,
    worker: Worker,
) -> None:
    report = proc.stdout[-6000:] + proc.stderr[-3000:]
    by_status = Counter(f"{status // 100}xx" for (_, status, _), n in counts.items() for _ in range(n))
    print(f"schemathesis: {sum(counts.values())} responses {dict(by_status)}; exit {proc.returncode}")
    assert proc.returncode == 0, report
    assert "passed" in proc.stdout and sum(counts.values()) > 0, report
    assert not [k for k in counts if k[1] >= 500], counts
    # the secret check had something to catch: configs holding the secret came back (masked)
    shown = sum(n for (op, status, _), n in counts.items() if op in SHOW_CONFIG and status < 300)
    assert shown > 0, counts
    assert worker.proc.poll() is None, worker.log()[-3000:]
    log = worker.log()
    assert secret not in log
    assert "Traceback" not in log, log[-5000:]


@pytest.fixture
def fuzz_topic(topic_factory) -> str:
    return topic_factory("fuzz", partitions=2)


@pytest.fixture
def worker(tmp_path, kafka_bootstrap):
    w = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    yield w
    w.stop()


@pytest.fixture
def auth_worker(tmp_path, kafka_bootstrap):
    w = Worker(tmp_path / "state-auth", kafka_bootstrap, tmp_path / "worker-auth.log", "--basic-auth", AUTH)
    yield w
    w.stop()


def test_schemathesis_short_run_finds_no_server_error_nor_off_document_response(worker, fuzz_topic, tmp_path):
    proc, counts, secret = schemathesis_run(
        worker, fuzz_topic, tmp_path, "--max-examples", "4", "--seed", "25"
    )
    assert_clean_run(proc, counts, secret, worker)


def test_the_secret_check_fails_when_a_response_shows_the_secret(worker, fuzz_topic, tmp_path):
    """Negative control: pretend the plugin's class name is the secret; every plugin list shows it."""
    proc, _, _ = schemathesis_run(
        worker,
        fuzz_topic,
        tmp_path,
        "--include-operation-id",
        "listConnectorPlugins",
        "--max-examples",
        "1",
        "--phases",
        "fuzzing",
        secret="S3SinkConnector",
    )
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "came back in clear from GET /connector-plugins" in proc.stdout, proc.stdout[-3000:]


def test_schemathesis_short_run_with_basic_auth_enforced(auth_worker, fuzz_topic, tmp_path):
    doc = requests.get(auth_worker.url("/openapi.json"), timeout=10).json()
    writes = [
        (method, path)
        for path, item in doc["paths"].items()
        for method in item
        if method in ("post", "put", "patch", "delete")
    ]
    assert len(writes) == 14  # tests/unit/sink/test_rest_openapi.py: the document lists every route
    for method, path in writes:  # no credentials: 401 before anything else, on every write operation
        url = auth_worker.url(
            path.replace("{connector}", "c")
            .replace("{task}", "0")
            .replace("{pluginName}", "S3Sink")
            .replace("{logger}", "root")
        )
        resp = requests.request(method, url, json={}, timeout=10)
        assert resp.status_code == 401, (method, path, resp.status_code, resp.text)
        assert doc["paths"][path][method]["security"] == [{"basicAuth": []}]
        assert resp.headers["WWW-Authenticate"].startswith("Basic")
    proc, counts, secret = schemathesis_run(
        auth_worker,
        fuzz_topic,
        tmp_path,
        "--max-examples",
        "3",
        "--seed",
        "7",
        auth=AUTH,
        checks=CHECKS + ",ignored_auth",
    )
    assert_clean_run(proc, counts, secret, auth_worker)


@pytest.mark.chaos
def test_schemathesis_long_run_two_clients(worker, fuzz_topic, tmp_path):
    proc, counts, secret = schemathesis_run(
        worker, fuzz_topic, tmp_path, "--max-time", "150", "--max-examples", "400", "--workers", "2"
    )
    assert_clean_run(proc, counts, secret, worker)


@pytest.mark.chaos
def test_schemathesis_long_run_with_basic_auth(auth_worker, fuzz_topic, tmp_path):
    proc, counts, secret = schemathesis_run(
        auth_worker,
        fuzz_topic,
        tmp_path,
        "--max-time",
        "60",
        "--max-examples",
        "200",
        auth=AUTH,
        checks=CHECKS + ",ignored_auth",
    )
    assert_clean_run(proc, counts, secret, auth_worker)


def test_use_after_free_is_left_out_only_for_the_active_topics_read(monkeypatch):
    """The hook's wrapper hands every operation but ``getConnectorActiveTopics`` to schemathesis'
    own ``use_after_free``, so a deleted connector still answering elsewhere fails the run."""
    import types

    from schemathesis.specs.openapi import checks

    from tests.integration import _rest_fuzz_hooks as hooks

    seen: list[str] = []

    def fake(ctx, response, case):
        seen.append(case.operation.definition.raw["operationId"])
        raise AssertionError("use after free")

    monkeypatch.setattr(checks, "use_after_free", fake)

    def case(op: str) -> types.SimpleNamespace:
        return types.SimpleNamespace(
            operation=types.SimpleNamespace(definition=types.SimpleNamespace(raw={"operationId": op}))
        )

    assert hooks.use_after_free_but_topics(None, None, case("getConnectorActiveTopics")) is None
    for op in ("getConnector", "getConnectorStatus", "getConnectorConfig", "getTaskConfigs"):
        with pytest.raises(AssertionError, match="use after free"):
            hooks.use_after_free_but_topics(None, None, case(op))
    assert seen == ["getConnector", "getConnectorStatus", "getConnectorConfig", "getTaskConfigs"]
