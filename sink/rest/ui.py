"""``GET /ui``: a one-page summary that refreshes itself (``<meta http-equiv=refresh>``).

Server-rendered HTML with inline CSS: no build step, no JavaScript, no CDN, works in any browser
and in ``curl``. Every value is HTML-escaped; configs are never shown (they may hold secrets).
"""

from __future__ import annotations

import html
import time
from typing import Any

from sink.rest.herder import Connector, Herder, TaskRunner

__all__ = ["render_ui"]

REFRESH_SECONDS = 3

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}
table{border-collapse:collapse;margin:.4em 0 1em}
td,th{border:1px solid #ccc;padding:.25em .6em;text-align:left}
th{background:#f3f3f3}.RUNNING{color:#1a7f37}.PAUSED,.STOPPED{color:#9a6700}
.FAILED{color:#cf222e;font-weight:bold}
pre{background:#fff4f4;border:1px solid #f0c0c0;padding:.5em;white-space:pre-wrap;
    max-height:12em;overflow:auto}
.muted{color:#777}
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value))


def _state(state: str) -> str:
    return f'<span class="{_e(state)}">{_e(state)}</span>'


def _cells(values: tuple[Any, ...]) -> str:
    return "<tr>" + "".join(f"<td>{_e(v)}</td>" for v in values) + "</tr>"


def _task_rows(herder: Herder, conn: Connector, task: TaskRunner) -> str:
    def dash(value: Any) -> Any:
        return "-" if value is None else value

    return "".join(
        _cells(
            (
                task.id,
                r["topic"],
                r["partition"],
                r["records_in"],
                r["bytes_in"],
                dash(r["committed_offset"]),
                dash(r["lag"]),
            )
        )
        for r in herder.partitions(conn, task)
    )


def _recent_files(task: TaskRunner) -> list[str]:
    return list(task.metrics.recent_files)[-10:]


def _connector_section(herder: Herder, conn: Connector) -> str:
    rate = sum(t.metrics.rate() for t in conn.tasks)
    parts = [
        f'<h2 id="c-{_e(conn.name)}">{_e(conn.name)} {_state(conn.state)}</h2>',
        (
            f"<p>tasks: {len(conn.tasks)} &middot; throughput: {rate:.1f} records/s &middot; "
            f"records in: {sum(t.metrics.total_in() for t in conn.tasks)}</p>"
        ),
        "<table><tr><th>task</th><th>state</th><th>restarts</th></tr>",
    ]
    parts += [
        f"<tr><td>{t.id}</td><td>{_state(t.state)}</td><td>{t.metrics.restarts}</td></tr>" for t in conn.tasks
    ]
    parts.append("</table>")
    parts.append(
        "<table><tr><th>task</th><th>topic</th><th>partition</th><th>records in</th><th>bytes in</th>"
        "<th>committed offset</th><th>lag</th></tr>"
    )
    parts += [_task_rows(herder, conn, t) for t in conn.tasks]
    parts.append("</table>")
    files = [f for t in conn.tasks for f in _recent_files(t)]
    if files:
        parts.append("<p>recent files:</p><ul>" + "".join(f"<li>{_e(f)}</li>" for f in files) + "</ul>")
    traces = [conn.trace] if conn.state == "FAILED" and conn.trace else []
    traces += [t.trace for t in conn.tasks if t.state == "FAILED" and t.trace]
    logged = sorted((t.metrics.last_error for t in conn.tasks if t.metrics.last_error), key=lambda e: e[0])
    if traces:
        parts.append(f"<p>last error:</p><pre>{_e(traces[-1])}</pre>")
    elif logged:
        when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(logged[-1][0]))
        parts.append(f"<p>last error ({when} UTC):</p><pre>{_e(logged[-1][1])}</pre>")
    return "".join(parts)


def render_ui(herder: Herder) -> str:
    """The whole page."""
    conns = [herder.connectors[n] for n in herder.names() if n in herder.connectors]
    summary = "".join(
        f'<tr><td><a href="#c-{_e(c.name)}">{_e(c.name)}</a></td><td>{_state(c.state)}</td>'
        f"<td>{sum(1 for t in c.tasks if t.state == 'RUNNING')}/{len(c.tasks)}</td></tr>"
        for c in conns
    )
    body = (
        "<table><tr><th>connector</th><th>state</th><th>tasks running</th></tr>" + summary + "</table>"
        if conns
        else '<p class="muted">No connectors. POST one to /connectors.</p>'
    )
    return (
        "<!doctype html><html><head><meta charset=utf-8>"
        f'<meta http-equiv="refresh" content="{REFRESH_SECONDS}">'
        f"<title>kcql-sink worker {_e(herder.worker_id)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>kcql-sink worker {_e(herder.worker_id)}</h1>{body}"
        + "".join(_connector_section(herder, c) for c in conns)
        + '<p class="muted">Refreshes every 3 s. <a href="/metrics">/metrics</a> &middot; '
        '<a href="/health">/health</a> &middot; <a href="/connectors?expand=status">/connectors</a></p>'
        "</body></html>"
    )
