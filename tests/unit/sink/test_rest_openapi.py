"""``/openapi.json``: it lists exactly the routes the worker serves, under Kafka Connect's names."""

from __future__ import annotations

import json
import re

from sink.rest.herder import Herder
from sink.rest.openapi import openapi_document
from sink.rest.routes import build_routes
from sink.rest.store import StateStore

# Kafka Connect's operationId (the Java method name in Connect's REST resources) per shared endpoint
CONNECT_OPERATIONS = {
    ("get", "/"): "serverInfo",
    ("get", "/health"): "healthCheck",
    ("get", "/connectors"): "listConnectors",
    ("post", "/connectors"): "createConnector",
    ("get", "/connectors/{connector}"): "getConnector",
    ("delete", "/connectors/{connector}"): "destroyConnector",
    ("get", "/connectors/{connector}/config"): "getConnectorConfig",
    ("put", "/connectors/{connector}/config"): "putConnectorConfig",
    ("patch", "/connectors/{connector}/config"): "patchConnectorConfig",
    ("get", "/connectors/{connector}/status"): "getConnectorStatus",
    ("post", "/connectors/{connector}/restart"): "restartConnector",
    ("put", "/connectors/{connector}/pause"): "pauseConnector",
    ("put", "/connectors/{connector}/resume"): "resumeConnector",
    ("put", "/connectors/{connector}/stop"): "stopConnector",
    ("get", "/connectors/{connector}/tasks"): "getTaskConfigs",
    ("get", "/connectors/{connector}/tasks/{task}/status"): "getTaskStatus",
    ("post", "/connectors/{connector}/tasks/{task}/restart"): "restartTask",
    ("get", "/connectors/{connector}/tasks-config"): "getTasksConfig",
    ("get", "/connectors/{connector}/topics"): "getConnectorActiveTopics",
    ("put", "/connectors/{connector}/topics/reset"): "resetConnectorActiveTopics",
    ("get", "/connectors/{connector}/offsets"): "getOffsets",
    ("patch", "/connectors/{connector}/offsets"): "alterConnectorOffsets",
    ("delete", "/connectors/{connector}/offsets"): "resetConnectorOffsets",
    ("get", "/connector-plugins"): "listConnectorPlugins",
    ("get", "/connector-plugins/{pluginName}/config"): "getConnectorConfigDef",
    ("put", "/connector-plugins/{pluginName}/config/validate"): "validateConfigs",
    ("get", "/admin/loggers"): "listLoggers",
    ("get", "/admin/loggers/{logger}"): "getLogger",
    ("put", "/admin/loggers/{logger}"): "setLevel",
}


def _served(tmp_path) -> set[tuple[str, str]]:
    routes = build_routes(Herder(StateStore(tmp_path), "w", None), registry=None)
    out = set()
    for route in routes:
        path = route.path.replace("{name}", "{connector}").replace("{plugin}", "{pluginName}")
        out |= {(m.lower(), path) for m in route.methods or () if m != "HEAD"}
    return out


def test_document_lists_exactly_the_served_routes_with_connects_operation_ids(tmp_path):
    doc = openapi_document()
    documented = {(m, p): op["operationId"] for p, item in doc["paths"].items() for m, op in item.items()}
    assert set(documented) == _served(tmp_path)
    assert {k: documented[k] for k in CONNECT_OPERATIONS} == CONNECT_OPERATIONS
    assert len(set(documented.values())) == len(documented)


def test_every_reference_resolves_and_every_path_parameter_is_declared():
    doc = openapi_document()
    text = json.dumps(doc)
    for ref in re.findall(r'"\$ref": "#/components/schemas/([^"]+)"', text):
        assert ref in doc["components"]["schemas"], ref
    for path, item in doc["paths"].items():
        for op in item.values():
            declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "path"}
            assert declared == set(re.findall(r"{(\w+)}", path)), (path, declared)
            assert all(code.isdigit() for code in op["responses"])


def test_basic_auth_is_declared_on_write_operations_only():
    plain, auth = openapi_document(), openapi_document(basic_auth=True)
    assert "securitySchemes" not in plain["components"]
    assert auth["components"]["securitySchemes"] == {"basicAuth": {"type": "http", "scheme": "basic"}}
    for path, item in auth["paths"].items():
        for method, op in item.items():
            writes = method in ("post", "put", "patch", "delete")
            assert ("security" in op) is writes, (method, path)
            assert ("401" in op["responses"]) is writes, (method, path)
            assert "security" not in plain["paths"][path][method]
