"""``GET /openapi.json``: the OpenAPI 3.0 document of every endpoint this worker serves.

The Connect endpoints keep Kafka Connect's own names, so a client generated from Kafka's
published ``connect_rest.yaml`` (built from the swagger ``@Operation`` annotations of Connect's
REST resources) works here unchanged: the same paths and path parameter names (``{connector}``,
``{task}``, ``{pluginName}``, ``{logger}``), the same ``operationId`` (the Java method name), the
same summaries and entity schemas (``ConnectorInfo``, ``ConnectorStateInfo``, ``ErrorMessage``...).
Where this worker answers differently from Connect the document says what *it* does (it is what
the schemathesis runs hold the worker to): ``PUT /topics/reset`` of an unknown connector is a 404,
an unknown ``connector.class`` is a 400 (Connect: 500), and ``/health``, ``/metrics``, ``/ui`` and
this document are ours. Inter-worker endpoints (``POST /connectors/{connector}/tasks``,
``PUT /connectors/{connector}/fence``) are not served: there is no cluster.

Config values are strings as in Connect (Jackson also turns JSON numbers and booleans into
strings, and so do we: see :func:`sink.rest.routes._coerce`). When the worker requires HTTP basic
auth (``--basic-auth``) the write operations declare the ``basicAuth`` scheme and a 401 answer.
"""

from __future__ import annotations

from typing import Any

from sink.rest import plugins

__all__ = ["WRITE_METHODS", "openapi_document"]

WRITE_METHODS = frozenset({"post", "put", "patch", "delete"})

_JSON = "application/json"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {"description": description, "content": {_JSON: {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(_ref("ErrorMessage"), description)


def _empty(description: str) -> dict[str, Any]:
    return {"description": description}


_STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_CONFIG_IN = {
    "type": "object",
    "additionalProperties": {"type": "string", "nullable": True},
    "description": "Connector configuration: string keys and string values (numbers and booleans are "
    "taken as their text, as Connect's JSON mapper does)",
}

SCHEMAS: dict[str, Any] = {
    "ErrorMessage": {
        "type": "object",
        "required": ["error_code", "message"],
        "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}},
    },
    "ServerInfo": {
        "type": "object",
        "required": ["version", "commit"],
        "properties": {
            "version": {"type": "string"},
            "commit": {"type": "string"},
            "kafka_cluster_id": {"type": "string", "nullable": True},
        },
    },
    "WorkerStatus": {
        "type": "object",
        "required": ["status", "message"],
        "properties": {
            "status": {"type": "string", "enum": ["healthy", "unhealthy"]},
            "message": {"type": "string"},
            "reasons": {"type": "array", "items": {"type": "string"}},
        },
    },
    "ConnectorTaskId": {
        "type": "object",
        "required": ["connector", "task"],
        "properties": {"connector": {"type": "string"}, "task": {"type": "integer"}},
    },
    "ConnectorInfo": {
        "type": "object",
        "required": ["name", "config", "tasks", "type"],
        "properties": {
            "name": {"type": "string"},
            "config": _STRING_MAP,
            "tasks": {"type": "array", "items": _ref("ConnectorTaskId")},
            "type": {"type": "string", "enum": ["sink", "source", "unknown"]},
        },
    },
    "CreateConnectorRequest": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "config": _CONFIG_IN,
            "initial_state": {"type": "string", "enum": ["RUNNING", "PAUSED", "STOPPED"], "nullable": True},
        },
    },
    "ConnectorState": {
        "type": "object",
        "required": ["state", "worker_id"],
        "properties": {
            "state": {"type": "string"},
            "worker_id": {"type": "string"},
            "trace": {"type": "string"},
        },
    },
    "TaskState": {
        "type": "object",
        "required": ["id", "state", "worker_id"],
        "properties": {
            "id": {"type": "integer"},
            "state": {"type": "string"},
            "worker_id": {"type": "string"},
            "trace": {"type": "string"},
        },
    },
    "ConnectorStateInfo": {
        "type": "object",
        "required": ["name", "connector", "tasks", "type"],
        "properties": {
            "name": {"type": "string"},
            "connector": _ref("ConnectorState"),
            "tasks": {"type": "array", "items": _ref("TaskState")},
            "type": {"type": "string", "enum": ["sink", "source", "unknown"]},
        },
    },
    "TaskInfo": {
        "type": "object",
        "required": ["id", "config"],
        "properties": {"id": _ref("ConnectorTaskId"), "config": _STRING_MAP},
    },
    "ActiveTopicsInfo": {
        "type": "object",
        "required": ["topics"],
        "properties": {"topics": {"type": "array", "items": {"type": "string"}}},
    },
    "ConnectorOffset": {
        "type": "object",
        "required": ["partition", "offset"],
        "properties": {
            "partition": {
                "type": "object",
                "description": 'For a sink: {"kafka_topic": ..., "kafka_partition": ...}',
                "additionalProperties": True,
            },
            "offset": {
                "type": "object",
                "nullable": True,
                "description": 'For a sink: {"kafka_offset": ...}; null resets the partition',
                "additionalProperties": True,
            },
        },
    },
    "ConnectorOffsets": {
        "type": "object",
        "required": ["offsets"],
        "properties": {"offsets": {"type": "array", "items": _ref("ConnectorOffset")}},
    },
    "Message": {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}},
    "LoggerLevel": {
        "type": "object",
        "required": ["level"],
        "properties": {
            "level": {"type": "string"},
            "last_modified": {"type": "integer", "nullable": True},
        },
    },
    "PluginInfo": {
        "type": "object",
        "required": ["class", "type"],
        "properties": {
            "class": {"type": "string"},
            "type": {"type": "string"},
            "version": {"type": "string"},
        },
    },
    "ConfigKeyInfo": {
        "type": "object",
        "required": ["name", "type", "required", "importance", "documentation", "group", "order"],
        "properties": {
            "name": {"type": "string"},
            "type": {"type": "string"},
            "required": {"type": "boolean"},
            "default_value": {"type": "string", "nullable": True},
            "importance": {"type": "string"},
            "documentation": {"type": "string"},
            "group": {"type": "string"},
            "order_in_group": {"type": "integer"},
            "width": {"type": "string"},
            "display_name": {"type": "string"},
            "dependents": {"type": "array", "items": {"type": "string"}},
            "order": {"type": "integer"},
        },
    },
    "ConfigValueInfo": {
        "type": "object",
        "required": ["name", "errors"],
        "properties": {
            "name": {"type": "string"},
            "value": {"type": "string", "nullable": True},
            "recommended_values": {"type": "array", "items": {"type": "string"}},
            "errors": {"type": "array", "items": {"type": "string"}},
            "visible": {"type": "boolean"},
        },
    },
    "ConfigInfo": {
        "type": "object",
        "required": ["definition", "value"],
        "properties": {"definition": _ref("ConfigKeyInfo"), "value": _ref("ConfigValueInfo")},
    },
    "ConfigInfos": {
        "type": "object",
        "required": ["name", "error_count", "groups", "configs"],
        "properties": {
            "name": {"type": "string"},
            "error_count": {"type": "integer"},
            "groups": {"type": "array", "items": {"type": "string"}},
            "configs": {"type": "array", "items": _ref("ConfigInfo")},
        },
    },
}


def _param(name: str, description: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": name,
        "in": "path",
        "required": True,
        "description": description,
        "schema": schema or {"type": "string"},
    }


def _query(name: str, description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "in": "query", "required": False, "description": description, "schema": schema}


CONNECTOR = _param("connector", "The name of the connector")
TASK = _param("task", "The task ID", {"type": "integer", "format": "int32"})
PLUGIN = _param("pluginName", "The name or alias of the connector plugin")
LOGGER = _param("logger", "The logger name (root for the root logger)")
_NOT_FOUND = _error("Connector not found")


def _op(
    operation_id: str,
    summary: str,
    responses: dict[str, Any],
    *,
    params: tuple[dict[str, Any], ...] = (),
    body: dict[str, Any] | None = None,
    tags: tuple[str, ...] = ("connectors",),
    description: str | None = None,
    deprecated: bool = False,
) -> dict[str, Any]:
    op: dict[str, Any] = {"operationId": operation_id, "summary": summary, "tags": list(tags)}
    if description:
        op["description"] = description
    if params:
        op["parameters"] = list(params)
    if body is not None:
        op["requestBody"] = {"required": True, "content": {_JSON: {"schema": body}}}
    op["responses"] = responses
    if deprecated:
        op["deprecated"] = True
    return op


def _paths() -> dict[str, dict[str, Any]]:
    c = "/connectors/{connector}"
    info_200 = _json(_ref("ConnectorInfo"), "Connector details")
    return {
        "/": {
            "get": _op(
                "serverInfo",
                "Get details about this Connect worker and the ID of the Kafka cluster it is connected to",
                {"200": _json(_ref("ServerInfo"), "Worker version and Kafka cluster ID")},
                tags=("server",),
            )
        },
        "/health": {
            "get": _op(
                "healthCheck",
                "Health check endpoint to verify worker readiness and liveness",
                {
                    "200": _json(_ref("WorkerStatus"), "Every task is RUNNING or PAUSED"),
                    "503": _json(_ref("WorkerStatus"), "A connector or task is FAILED (reasons given)"),
                },
                tags=("server",),
            )
        },
        "/metrics": {
            "get": _op(
                "metrics",
                "Prometheus metrics of this worker",
                {
                    "200": {
                        "description": "Prometheus text exposition",
                        "content": {"text/plain": {"schema": {"type": "string"}}},
                    }
                },
                tags=("server",),
            )
        },
        "/ui": {
            "get": _op(
                "ui",
                "A self-refreshing HTML page of connectors, tasks and partitions",
                {
                    "200": {
                        "description": "HTML page",
                        "content": {"text/html": {"schema": {"type": "string"}}},
                    }
                },
                tags=("server",),
            )
        },
        "/openapi.json": {
            "get": _op(
                "openapi",
                "This OpenAPI document",
                {"200": _json({"type": "object"}, "OpenAPI 3.0 document")},
                tags=("server",),
            )
        },
        "/connectors": {
            "get": _op(
                "listConnectors",
                "List all active connectors",
                {
                    "200": _json(
                        {
                            "oneOf": [
                                {"type": "array", "items": {"type": "string"}},
                                {
                                    "type": "object",
                                    "additionalProperties": {
                                        "type": "object",
                                        "properties": {
                                            "status": _ref("ConnectorStateInfo"),
                                            "info": _ref("ConnectorInfo"),
                                        },
                                    },
                                },
                            ]
                        },
                        "Connector names; with expand, details keyed by connector name",
                    )
                },
                params=(
                    _query(
                        "expand",
                        "Optional connector details to expand. Supported values are status and info. "
                        "Repeat this parameter to include both",
                        {"type": "array", "items": {"type": "string", "enum": ["status", "info"]}},
                    ),
                ),
            ),
            "post": _op(
                "createConnector",
                "Create a new connector",
                {
                    "201": _json(_ref("ConnectorInfo"), "Connector created successfully"),
                    "400": _error("Invalid connector creation request or configuration"),
                    "409": _error("Connector already exists"),
                    "500": _error("Failed unexpectedly while creating the connector"),
                },
                body=_ref("CreateConnectorRequest"),
            ),
        },
        c: {
            "get": _op(
                "getConnector",
                "Get the details for the specified connector",
                {"200": info_200, "404": _NOT_FOUND},
                params=(CONNECTOR,),
            ),
            "delete": _op(
                "destroyConnector",
                "Delete the specified connector",
                {"204": _empty("Connector deleted successfully"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
            ),
        },
        c + "/config": {
            "get": _op(
                "getConnectorConfig",
                "Get the configuration for the specified connector",
                {
                    "200": _json(_STRING_MAP, "Connector configuration (secrets as [hidden])"),
                    "404": _NOT_FOUND,
                },
                params=(CONNECTOR,),
            ),
            "put": _op(
                "putConnectorConfig",
                "Create or reconfigure the specified connector",
                {
                    "200": _json(_ref("ConnectorInfo"), "Connector reconfigured successfully"),
                    "201": _json(_ref("ConnectorInfo"), "Connector created successfully"),
                    "400": _error("Invalid connector name or configuration"),
                    "500": _error("Failed unexpectedly while creating or updating the connector"),
                },
                params=(CONNECTOR,),
                body=_CONFIG_IN,
            ),
            "patch": _op(
                "patchConnectorConfig",
                "Patch the configuration for the specified connector",
                {
                    "200": _json(_ref("ConnectorInfo"), "Connector configuration patched successfully"),
                    "400": _error("Invalid connector configuration"),
                    "404": _NOT_FOUND,
                    "500": _error("Failed unexpectedly while patching the connector configuration"),
                },
                params=(CONNECTOR,),
                body=_CONFIG_IN,
                description="Properties with non-null values are updated or added, and properties with null "
                "values are removed",
            ),
        },
        c + "/status": {
            "get": _op(
                "getConnectorStatus",
                "Get the status for the specified connector",
                {"200": _json(_ref("ConnectorStateInfo"), "Connector status"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
            )
        },
        c + "/restart": {
            "post": _op(
                "restartConnector",
                "Restart the specified connector",
                {
                    "202": _json(
                        _ref("ConnectorStateInfo"),
                        "Restart request accepted when includeTasks or onlyFailed is true",
                    ),
                    "204": _empty("Connector restarted when includeTasks and onlyFailed are false"),
                    "404": _NOT_FOUND,
                },
                params=(
                    CONNECTOR,
                    _query(
                        "includeTasks", "Whether to also restart tasks", {"type": "boolean", "default": False}
                    ),
                    _query(
                        "onlyFailed",
                        "Whether to only restart failed tasks/connectors",
                        {"type": "boolean", "default": False},
                    ),
                ),
            )
        },
        c + "/pause": {
            "put": _op(
                "pauseConnector",
                "Pause the specified connector",
                {"202": _empty("Connector pause request accepted"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
                description="This operation is idempotent and has no effects if the connector is already "
                "paused",
            )
        },
        c + "/resume": {
            "put": _op(
                "resumeConnector",
                "Resume the specified connector",
                {"202": _empty("Connector resume request accepted"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
                description="This operation is idempotent and has no effects if the connector is already "
                "running",
            )
        },
        c + "/stop": {
            "put": _op(
                "stopConnector",
                "Stop the specified connector",
                {"204": _empty("Connector stopped successfully"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
                description="This operation is idempotent and has no effects if the connector is already "
                "stopped",
            )
        },
        c + "/tasks": {
            "get": _op(
                "getTaskConfigs",
                "List all tasks and their configurations for the specified connector",
                {
                    "200": _json({"type": "array", "items": _ref("TaskInfo")}, "Task configurations"),
                    "404": _NOT_FOUND,
                },
                params=(CONNECTOR,),
            )
        },
        c + "/tasks/{task}/status": {
            "get": _op(
                "getTaskStatus",
                "Get the state of the specified task for the specified connector",
                {
                    "200": _json(_ref("TaskState"), "Task status"),
                    "404": _error("Connector or task not found"),
                },
                params=(CONNECTOR, TASK),
            )
        },
        c + "/tasks/{task}/restart": {
            "post": _op(
                "restartTask",
                "Restart the specified task for the specified connector",
                {"204": _empty("Task restarted successfully"), "404": _error("Connector or task not found")},
                params=(CONNECTOR, TASK),
            )
        },
        c + "/tasks-config": {
            "get": _op(
                "getTasksConfig",
                "Get the configuration of all tasks for the specified connector",
                {
                    "200": _json(
                        {"type": "object", "additionalProperties": _STRING_MAP}, "Task configurations by task"
                    ),
                    "404": _NOT_FOUND,
                },
                params=(CONNECTOR,),
                deprecated=True,
                description="Deprecated (removed in Kafka 4.0); use GET /connectors/{connector}/tasks",
            )
        },
        c + "/topics": {
            "get": _op(
                "getConnectorActiveTopics",
                "Get the list of topics actively used by the specified connector",
                {
                    "200": _json(
                        {"type": "object", "additionalProperties": _ref("ActiveTopicsInfo")},
                        "Active topics keyed by connector name (empty for an unknown connector, as Connect)",
                    )
                },
                params=(CONNECTOR,),
            )
        },
        c + "/topics/reset": {
            "put": _op(
                "resetConnectorActiveTopics",
                "Reset the list of topics actively used by the specified connector",
                {"202": _empty("Connector active topics reset request accepted"), "404": _NOT_FOUND},
                params=(CONNECTOR,),
            )
        },
        c + "/offsets": {
            "get": _op(
                "getOffsets",
                "Get the current offsets for the specified connector",
                {
                    "200": _json(_ref("ConnectorOffsets"), "Committed offsets of group connect-<name>"),
                    "404": _NOT_FOUND,
                    "500": _error("The offsets could not be read from Kafka"),
                },
                params=(CONNECTOR,),
            ),
            "patch": _op(
                "alterConnectorOffsets",
                "Alter the offsets for the specified connector",
                {
                    "200": _json(_ref("Message"), "Offsets altered successfully"),
                    "400": _error("Invalid request, or the connector is not STOPPED"),
                    "404": _NOT_FOUND,
                    "500": _error("The offsets could not be altered in Kafka"),
                },
                params=(CONNECTOR,),
                body=_ref("ConnectorOffsets"),
            ),
            "delete": _op(
                "resetConnectorOffsets",
                "Reset the offsets for the specified connector",
                {
                    "200": _json(_ref("Message"), "Offsets reset successfully"),
                    "400": _error("The connector is not STOPPED"),
                    "404": _NOT_FOUND,
                    "500": _error("The offsets could not be reset in Kafka"),
                },
                params=(CONNECTOR,),
            ),
        },
        "/connector-plugins": {
            "get": _op(
                "listConnectorPlugins",
                "List all connector plugins installed",
                {"200": _json({"type": "array", "items": _ref("PluginInfo")}, "Installed plugins")},
                params=(
                    _query(
                        "connectorsOnly",
                        "Whether to list only connectors instead of all plugins",
                        {"type": "boolean", "default": True},
                    ),
                ),
                tags=("connector-plugins",),
            )
        },
        "/connector-plugins/{pluginName}/config": {
            "get": _op(
                "getConnectorConfigDef",
                "Get the configuration definition for the specified pluginName",
                {
                    "200": _json({"type": "array", "items": _ref("ConfigKeyInfo")}, "Configuration keys"),
                    "404": _error("Unknown plugin"),
                },
                params=(PLUGIN,),
                tags=("connector-plugins",),
            )
        },
        "/connector-plugins/{pluginName}/config/validate": {
            "put": _op(
                "validateConfigs",
                "Validate the provided configuration against the configuration definition for the specified "
                "pluginName",
                {
                    "200": _json(_ref("ConfigInfos"), "Every key with its errors"),
                    "400": _error("Not a configuration, or the connector class does not match the plugin"),
                },
                params=(PLUGIN,),
                body=_CONFIG_IN,
                tags=("connector-plugins",),
            )
        },
        "/admin/loggers": {
            "get": _op(
                "listLoggers",
                "List the current loggers that have their levels explicitly set and their log levels",
                {"200": _json({"type": "object", "additionalProperties": _ref("LoggerLevel")}, "Loggers")},
                tags=("admin",),
            )
        },
        "/admin/loggers/{logger}": {
            "get": _op(
                "getLogger",
                "Get the log level for the specified logger",
                {"200": _json(_ref("LoggerLevel"), "The logger's level"), "404": _error("Unknown logger")},
                params=(LOGGER,),
                tags=("admin",),
            ),
            "put": _op(
                "setLevel",
                "Set the log level for the specified logger",
                {
                    "200": _json({"type": "array", "items": {"type": "string"}}, "The loggers changed"),
                    "400": _error("The body has no level"),
                    "404": _error("Unknown log level"),
                },
                params=(
                    LOGGER,
                    _query(
                        "scope",
                        "The scope for the logging modification (single-worker, cluster-wide, etc.); "
                        "this worker has no cluster, so both mean this worker",
                        {"type": "string", "default": "worker"},
                    ),
                ),
                body={
                    "type": "object",
                    "required": ["level"],
                    "properties": {"level": {"type": "string"}},
                    "additionalProperties": {"type": "string"},
                },
                tags=("admin",),
            ),
        },
    }


def openapi_document(*, basic_auth: bool = False) -> dict[str, Any]:
    """The document; with ``basic_auth`` the write operations require HTTP basic (401 otherwise)."""
    paths = _paths()
    doc: dict[str, Any] = {
        "openapi": "3.0.1",
        "info": {
            "title": "kcql-sink worker: Kafka Connect REST API",
            "description": "Kafka Connect's REST API (Connect's operation names and entities) for the "
            f"{plugins.CONNECTOR_CLASS} sink, plus /health, /metrics, /ui and this document.",
            "version": plugins.VERSION,
        },
        "paths": paths,
        "components": {"schemas": SCHEMAS},
    }
    if basic_auth:
        doc["components"]["securitySchemes"] = {"basicAuth": {"type": "http", "scheme": "basic"}}
        for item in paths.values():
            for method, op in item.items():
                if method in WRITE_METHODS:
                    op["security"] = [{"basicAuth": []}]
                    op["responses"]["401"] = _error("Authentication required for write requests")
    return doc
