"""The REST worker: Kafka Connect's REST API over in-process sink tasks, plus /health, /metrics, /ui.

Modules: :mod:`.errors` (Connect's error body), :mod:`.store` (persisted connectors),
:mod:`.plugins` (connector class, aliases, validation in Connect's ConfigInfos shape),
:mod:`.herder` (connector/task supervision), :mod:`.metering` (counters read by /metrics and /ui),
:mod:`.metrics` (Prometheus exposition), :mod:`.ui` (the summary page), :mod:`.routes` and
:mod:`.app` (the ASGI application and server).
"""
