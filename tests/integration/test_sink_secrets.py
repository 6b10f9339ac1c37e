"""Credentials never reach the logs, even with every logger at DEBUG (``kcql-sink run -vv``).

The task runs a full cycle against the real SeaweedFS server (start, open, put, commit, close,
stop, and a failing call whose error is logged) with root logging at DEBUG, which includes
botocore's request logging, and neither the access key nor the secret key may appear in any
log record, in ``repr`` of the task or its settings, or in an error message.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from sink.records.record import SinkRecord, TopicPartition
from sink.storage import StorageError
from sink.task.task import SinkTask
from tests.batches import put_records
from tests.integration._sink_support import make_backend

ACCESS = "AKIAKCQLSINKLEAKTEST"
SECRET = "kcqlSinkSecretValueThatMustNotLeak"


def test_no_credential_in_debug_logs_reprs_or_errors(
    tmp_path: Path, request: pytest.FixtureRequest, caplog: pytest.LogCaptureFixture
) -> None:
    backend = make_backend("s3", tmp_path, request)
    config = backend.config | {
        "name": "secrets",
        "connect.s3.aws.access.key": ACCESS,
        "connect.s3.aws.secret.key": SECRET,
        "connect.s3.local.tmp.directory": str(tmp_path / "stage"),
        "connect.s3.kcql": f"INSERT INTO {backend.bucket}:out SELECT * FROM t STOREAS JSON "  # noqa: S608
        "PROPERTIES('flush.count'=2)",
    }
    caplog.set_level(logging.DEBUG)
    tp = TopicPartition("t", 0)
    task = SinkTask()
    texts = []
    try:
        task.start(config)
        task.open([tp])
        put_records(task, [SinkRecord("t", 0, i, 1, None, {"i": i}) for i in range(3)])
        texts += [repr(task), repr(task.settings), str(task.settings)]
        broken = SinkTask()
        missing = r"^bucket 'no-such-bucket-here' does not exist at http://127\.0\.0\.1:\d+; create it first$"
        with pytest.raises(StorageError, match=missing) as err:
            broken.start(config | {"connect.s3.kcql": "INSERT INTO no-such-bucket-here:out SELECT * FROM t"})
        assert not err.value.retriable  # a missing bucket is not retried as an outage would be
        texts.append(str(err.value))
        broken.stop()
        task.close([tp])
    finally:
        task.stop()
    assert backend.raw_list(), "the cycle must have written something"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "botocore" in {r.name.split(".")[0] for r in caplog.records}, (
        "botocore debug logging was not exercised"
    )
    for where, text in [("logs", logged), *(("repr/error", t) for t in texts)]:
        assert ACCESS not in text, f"access key in {where}"
        assert SECRET not in text, f"secret key in {where}"
