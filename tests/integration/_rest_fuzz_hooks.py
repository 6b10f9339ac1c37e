"""Schemathesis hooks for the REST fuzz runs (loaded by ``st run`` through ``SCHEMATHESIS_HOOKS``).

Two additions to what schemathesis generates from ``/openapi.json``:

* Path parameters are, about half of the time, a connector the test created before the run
  (``KCQL_FUZZ_NAMES``, holding the secret) and the real plugin alias, so reads, state changes,
  patches and deletes reach real connectors instead of 404s.
* Config bodies (create, put, patch, validate) are, about half of the time, the fuzzed config laid
  under a *valid* base config (``KCQL_FUZZ_BASE`` as JSON), so connectors really get created, run,
  paused, patched and deleted, instead of every request stopping at validation. The base config
  holds a secret (``connect.s3.aws.secret.key``) unique to the run.
* A check, ``secrets_never_returned``: no response body or header may contain that secret, nor any
  value of at least 8 characters that the request itself sent under a secret-looking key
  (:func:`sink.config.secrets.is_secret_key`). Stored configs come back with ``[hidden]``.

Counts go to ``KCQL_FUZZ_STATS`` (one JSON line per response) so the test can show that
connectors with secrets were created during the run, i.e. the check had something to catch.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from hypothesis import strategies as st

from sink.config.secrets import is_secret_key
from sink.rest import plugins

BASE: dict[str, str] = json.loads(os.environ.get("KCQL_FUZZ_BASE", "{}"))
SECRET = os.environ.get("KCQL_FUZZ_SECRET", "")
STATS = os.environ.get("KCQL_FUZZ_STATS", "")
NAMES = [n for n in os.environ.get("KCQL_FUZZ_NAMES", "").split(",") if n]
CONFIG_BODY_OPS = {"createConnector", "putConnectorConfig", "patchConnectorConfig", "validateConfigs"}


def _op_id(context: Any) -> str:
    operation = getattr(context, "operation", None)
    definition = getattr(operation, "definition", None)
    raw = getattr(definition, "raw", None) or {}
    return str(raw.get("operationId", "")) if isinstance(raw, dict) else ""


def _with_base(op: str, body: Any) -> Any:
    if op == "createConnector":
        if not isinstance(body, dict):
            return body
        fuzzed = body.get("config") if isinstance(body.get("config"), dict) else {}
        return {**body, "config": {**fuzzed, **BASE}}
    if isinstance(body, dict):
        return {**body, **BASE}
    return body


@schemathesis.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any]) -> Any:
    """Half of the time, a connector that exists (``KCQL_FUZZ_NAMES``) and the real plugin alias."""
    if not path_parameters:
        return st.just(path_parameters)
    known = {}
    if NAMES and "connector" in path_parameters:
        known["connector"] = st.sampled_from(NAMES)
    if "pluginName" in path_parameters:
        known["pluginName"] = st.sampled_from(["S3SinkConnector", plugins.CONNECTOR_CLASS])
    if not known:
        return st.just(path_parameters)
    return st.one_of(
        st.just(path_parameters),
        st.fixed_dictionaries({**{k: st.just(v) for k, v in path_parameters.items()}, **known}),
    )


@schemathesis.hook
def flatmap_body(context: Any, body: Any) -> Any:
    op = _op_id(context)
    if not BASE or op not in CONFIG_BODY_OPS:
        return st.just(body)
    return st.sampled_from([body, _with_base(op, body)])


def _sent_secrets(body: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(body, dict):
        for key, value in body.items():
            if isinstance(value, str) and len(value) >= 8 and is_secret_key(str(key)):
                found.add(value)
            else:
                found |= _sent_secrets(value)
    elif isinstance(body, list):
        for item in body:
            found |= _sent_secrets(item)
    return found


@schemathesis.check
def secrets_never_returned(ctx: Any, response: Any, case: Any) -> bool | None:
    """Fails when a response shows a secret in clear (body or headers)."""
    secrets = {SECRET} if SECRET else set()
    secrets |= _sent_secrets(getattr(case, "body", None))
    text = response.text if isinstance(response.text, str) else ""
    headers = json.dumps({k: list(v) if isinstance(v, list) else v for k, v in response.headers.items()})
    if STATS:
        with open(STATS, "a") as fh:  # one line per response
            fh.write(
                json.dumps(
                    {
                        "op": case.operation.definition.raw.get("operationId"),
                        "status": response.status_code,
                        "secret_sent": bool(SECRET) and SECRET in json.dumps(case.body, default=str),
                    }
                )
                + "\n"
            )
    for secret in secrets:
        if secret and (secret in text or secret in headers):
            raise AssertionError(
                f"a secret sent in a config came back in clear from {case.method} {case.path} "
                f"({response.status_code})"
            )
    return None


ANY_NAME_OPS = {"getConnectorActiveTopics"}
"""Operations Connect answers for any connector name, deleted or never created: its
``AbstractHerder.connectorActiveTopics`` reads the status store without looking the connector up,
so ``GET /connectors/{name}/topics`` is a 200 with no topics (KIP-558 resets a deleted connector's
active topics), and so is ours (the document says so)."""


@schemathesis.check
def use_after_free_but_topics(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis' ``use_after_free`` (a deleted connector is a 404 afterwards) on every
    operation except :data:`ANY_NAME_OPS`, where Connect's own answer is a 200."""
    from schemathesis.specs.openapi.checks import use_after_free

    if case.operation.definition.raw.get("operationId") in ANY_NAME_OPS:
        return None
    return use_after_free(ctx, response, case)

