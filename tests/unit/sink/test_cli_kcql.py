"""``kcql-sink kcql check|explain`` through ``sink.cli.dispatch`` and the installed console script."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kcql import EXPLAIN_KEYS
from sink.cli import dispatch as cli

SEED_STATEMENT = (
    "INSERT INTO testS3Bucket:pathToWriteTo SELECT * FROM topicA STOREAS `AVRO` WITH_FLUSH_COUNT = 5000"
)
SEED_PLAN = {
    "source": "topicA",
    "bucket": "testS3Bucket",
    "prefix": "pathToWriteTo",
    "format": "AVRO",
    "partition_by": [],
    "include_keys": False,
    "flush": {"count": 5000, "size": 500_000_000, "interval": 3600},
    "envelope": False,
    "properties": {"flush.count": "5000"},
    "columns": "*",
    "date": None,
    # default Lenses 7.2+ name: <pad12(lastOffset)>_<minTs>_<maxTs>.<ext>; timestamps are placeholders
    "example_key": "pathToWriteTo/topicA/0/000000000000_<minTs>_<maxTs>.avro",
}


def write(tmp_path: Path, text: str, name: str = "s.kcql") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def test_check_ok(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "INSERT INTO a SELECT * FROM t;\nINSERT INTO b SELECT * FROM u;\n")
    assert cli.main(["kcql", "check", path]) == 0
    out, err = capsys.readouterr()
    assert out == "ok: 2 statement(s)\n" and err == ""


def test_check_stdin(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "stdin", io.StringIO(SEED_STATEMENT))
    assert cli.main(["kcql", "check", "-"]) == 0
    assert capsys.readouterr().out == "ok: 1 statement(s)\n"


def test_check_error_prints_position_and_caret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "INSERT INTO testS3Bucket:pathToWriteTo\nSELECT * FROMtopicA\n")
    assert cli.main(["kcql", "check", path]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert "KCQL syntax error at line 2, column 10: unexpected name 'FROMtopicA'" in err
    assert "  SELECT * FROMtopicA\n           ^\n" in err
    assert "expected one of: FROM" in err
    assert "Traceback" not in err


def test_check_semantic_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "INSERT INTO a SELECT * FROM t STOREAS CSV PROPERTIES('store.envelope'=true)")
    assert cli.main(["kcql", "check", path]) == 1
    err = capsys.readouterr().err
    assert "line 1, column 71: Envelope is not supported for format CSV." in err


def test_check_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / "nope.kcql")
    assert cli.main(["kcql", "check", missing]) == 1
    assert f"{missing}: no such file" in capsys.readouterr().err


def test_check_connector_json_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The seed's s3.json: the KCQL of a Connect JSON config is checked directly."""
    config = {
        "name": "lenses-s3-sink",
        "config": {
            "connector.class": "io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector",
            "topics": "orders",
            "connect.s3.kcql": "INSERT INTO ${BUCKET_NAME}:${PREFIX_NAME} SELECT * FROM orders "
            "STOREAS `AVRO` WITH_FLUSH_COUNT = 5000",
        },
    }
    path = write(tmp_path, json.dumps(config), "s3.json")
    assert cli.main(["kcql", "check", path]) == 0
    assert capsys.readouterr().out == "ok: 1 statement(s)\n"
    path = write(tmp_path, json.dumps({"config": {"topics": "orders"}}), "bad.json")
    assert cli.main(["kcql", "check", path]) == 1
    assert "JSON config has no connect.s3.kcql" in capsys.readouterr().err


def test_explain_json_seed_statement_full_contract(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, SEED_STATEMENT)
    assert cli.main(["kcql", "explain", "--json", path]) == 0
    objects = json.loads(capsys.readouterr().out)
    assert objects == [SEED_PLAN]
    assert list(objects[0]) == list(EXPLAIN_KEYS)


def test_explain_json_partitioned_and_nopartition(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = (
        "INSERT INTO b:p SELECT * FROM t PARTITIONBY _key, _value.a.b, _header.h, _date.uuuu STOREAS PARQUET "
        "PROPERTIES('flush.count'=10);\n"
        "insert into `b` select * from `*` NOPARTITION STOREAS json PROPERTIES('compression.codec'='gzip')"
    )
    assert cli.main(["kcql", "explain", "--json", write(tmp_path, text)]) == 0
    first, second = json.loads(capsys.readouterr().out)
    assert first["partition_by"] == ["_key", "_value.a.b", "_header.h", "_date.uuuu"]
    assert first["include_keys"] is True
    assert (
        first["example_key"]
        == "p/key=<_key>/a.b=<_value.a.b>/h=<_header.h>/date=<_date.uuuu>/t(0_000000000000).parquet"
    )
    assert second["partition_by"] is None and second["source"] == "*" and second["prefix"] == ""
    assert second["example_key"] == "<topic>(0_000000000000).gz"


def test_explain_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["kcql", "explain", write(tmp_path, SEED_STATEMENT)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("statement 1 (line 1): INSERT INTO testS3Bucket:pathToWriteTo")
    for key in EXPLAIN_KEYS:
        assert f"\n  {key}:" in out
    assert "pathToWriteTo/topicA/0/000000000000_<minTs>_<maxTs>.avro" in out


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["kcql"]) == 2
    assert cli.main(["kcql", "frobnicate", "-"]) == 2
    assert cli.main([]) == 2
    assert "usage: kcql-sink" in capsys.readouterr().err


def test_help_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["--help"]) == 0
    assert "kcql" in capsys.readouterr().out


def test_interrupt_exits_130(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sink.cli import kcql as kcql_command

    def interrupted(source: str, stdin: object = None) -> str:
        raise KeyboardInterrupt

    monkeypatch.setattr(kcql_command, "read_kcql", interrupted)
    assert cli.main(["kcql", "check", "-"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_dispatcher_skips_missing_modules_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("kcql", "no_such_command"))
    parser = cli.build_parser()
    subparsers = next(a for a in parser._actions if a.dest == "command")
    assert list(subparsers.choices) == ["kcql"]  # type: ignore[attr-defined]


def test_console_script_explain_json(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("kcql-sink")
    assert script.exists(), f"console script not installed next to {sys.executable}"
    path = write(tmp_path, SEED_STATEMENT + ";\n")
    env = {k: v for k, v in os.environ.items() if k != "KCQL_SINK_LOG_LEVEL"}
    done = subprocess.run(
        [str(script), "kcql", "explain", "--json", path], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [SEED_PLAN]
    bad = subprocess.run(
        [str(script), "kcql", "check", "-"],
        input="INSERT INTO a SELECT * FROM t LIMIT = 5",
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert bad.returncode == 1
    assert "line 1, column 37" in bad.stderr and "Traceback" not in bad.stderr


def test_check_ignores_a_utf8_byte_order_mark(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bom.kcql"
    path.write_text("\ufeffINSERT INTO a SELECT * FROM t", encoding="utf-8")
    assert cli.main(["kcql", "check", str(path)]) == 0
    assert capsys.readouterr().out == "ok: 1 statement(s)\n"


def test_check_connector_properties_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "s3.properties"
    path.write_text(
        "# a Connect properties file\nname=s3\n"
        "connector.class=io.lenses.streamreactor.connect.aws.s3.sink.S3SinkConnector\n"
        "connect.s3.kcql=INSERT INTO b:p SELECT * FROM t STOREAS `AVRO` WITH_FLUSH_COUNT = 5000; \\\n"
        "  INSERT INTO b SELECT * FROM u\n",
        encoding="utf-8",
    )
    assert cli.main(["kcql", "check", str(path)]) == 0
    assert capsys.readouterr().out == "ok: 2 statement(s)\n"
    path.write_text("name=s3\nconnect.s3.kcql=INSERT INTO b SELECT * FROM t STOREAS XML\n", encoding="utf-8")
    assert cli.main(["kcql", "check", str(path)]) == 1
    assert "line 1, column 39: Unsupported format - XML" in capsys.readouterr().err
    path.write_text("name=s3\ntopics=t\n", encoding="utf-8")
    assert cli.main(["kcql", "check", str(path)]) == 1
    assert "properties file has no connect.s3.kcql" in capsys.readouterr().err
