# Two commands from a fresh clone: `make demo` and `make test`. Both create .venv when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-stamp
PYTEST_ARGS ?=

.PHONY: install system-deps test lint demo bench chaos clean

# setup.py builds the C modules (sink/records/_scan.c, sink/records/_json_text.c, formats/_wire.c,
# formats/_json_lines.c, formats/_avro_flat.c, formats/_write_thread.c) into the source tree: a
# changed .c file reinstalls, which rebuilds them.
$(STAMP): pyproject.toml setup.py sink/records/_scan.c sink/records/_json_text.c formats/_wire.c \
		formats/_json_lines.c formats/_avro_flat.c formats/_write_thread.c
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

install: $(STAMP) system-deps

# Debian's chromium renders the worker's /ui page in the screenshot test (root installs it; elsewhere sudo).
system-deps:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "installing Debian's chromium for the /ui screenshot test"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# pytest exits 5 when it collected no test: that must fail, never pass silently.
test: $(STAMP) system-deps lint
	@rc=0; $(PY) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing" >&2; exit 1; fi; \
	exit $$rc

# Embedded Tansu broker + local storage (or SeaweedFS with S3=1), sample data, the sink, a Spark SQL query.
demo: $(STAMP)
	$(PY) -m sink.quickstart.demo $(if $(S3),--s3,)

# Throughput vs bare consume and quix-streams (own venv: bench/.venv-quix), RSS, latency, Spark.
# QUICK=1: ~1 minute on fewer records, no profile. Writes bench/results/latest.json (+ .png).
BENCH_STAMP := $(VENV)/.bench-stamp
$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(PY) -m bench.run $(if $(QUICK),--quick,--profile)

# Full reliability run (docs/reliability.md): crash-chaos matrix, 200,000 records / 20 SIGKILLs in the
# headline cell; summary in chaos/results/latest.json. Then the reliability tests (S3 faults, poison pills,
# broken configs, hostile REST input). `make test` runs a fast subset of the same tests.
chaos: $(STAMP)
	$(PY) -m chaos $(CHAOS_ARGS)
	$(PY) -m pytest -q -p no:cacheprovider -m 'chaos or not chaos' tests/integration/test_reliability_*.py tests/integration/test_replay_process.py

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache demo-data
