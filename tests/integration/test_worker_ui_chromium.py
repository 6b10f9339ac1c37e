"""The /ui summary page, rendered by a real headless Chromium (Debian's package, installed by `make`).

Chromium loads the page from a running worker whose connector has committed records; the rendered
DOM must name the connector, its task state and the record counts, and the screenshot must be a
real picture of the page (a PNG of the window size, not blank), read back by matplotlib's PNG reader.
"""

from __future__ import annotations

import shutil
import subprocess

from matplotlib import image as mpimg

from tests.integration._run_support import wait_for
from tests.integration._worker_support import Worker
from tests.integration.test_worker_lifecycle import connector_config, ids_in, produce

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
)


def chromium(*args: str, profile) -> subprocess.CompletedProcess[str]:
    binary = shutil.which("chromium")
    assert binary, "chromium is not installed: `make install` installs Debian's chromium package"
    return subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_ui_page_in_headless_chromium(kafka_bootstrap, topic_factory, producer, tmp_path):
    topic = topic_factory("ui")
    root = tmp_path / "data"
    worker = Worker(tmp_path / "state", kafka_bootstrap, tmp_path / "worker.log")
    try:
        resp = worker.post(
            "/connectors", json={"name": "ui-orders", "config": connector_config(topic, str(root))}
        )
        assert resp.status_code == 201, resp.text
        produce(producer, topic, range(25))
        wait_for(lambda: ids_in(root) == list(range(25)), timeout=60, what="25 records committed")
        url = worker.url("/ui")

        dom = chromium("--dump-dom", url, profile=tmp_path / "profile-dom")
        assert dom.returncode == 0, dom.stderr[-2000:]
        page = dom.stdout
        assert "ui-orders" in page and "RUNNING" in page
        assert topic in page
        assert "records in: 25" in page  # the connector's throughput line
        assert "committed offset" in page and f"<td>{topic}</td>" in page
        assert "do-not-show-" not in page  # the connector's secret never reaches the page

        shot = tmp_path / "ui.png"
        run = chromium(
            f"--screenshot={shot}", "--window-size=1280,900", url, profile=tmp_path / "profile-png"
        )
        assert run.returncode == 0 and shot.exists(), run.stderr[-2000:]
        pixels = mpimg.imread(shot)
        assert pixels.shape[:2] == (900, 1280)
        assert pixels.std() > 0.05, "the screenshot is blank"
    finally:
        worker.stop()
