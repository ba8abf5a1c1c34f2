# spark-bookkeeper: `make demo` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-unit demo notebooks bench clean proto reference docs

# (Re)install when the venv is missing or setup.py changed.
$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

# An extra of setup.py apart from what the tests need: docs (MkDocs, Material), notebooks (JupyterLab, pandas).
$(VENV)/.%-installed: $(STAMP) setup.py
	$(PY) -m pip install -q -e '.[$*]'
	touch $@
DOCS_STAMP := $(VENV)/.docs-installed
NOTEBOOKS_STAMP := $(VENV)/.notebooks-installed

# The documentation site into site/, strictly: a broken link or anchor fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# JupyterLab on notebooks/ (METADATA_SERVICE_URI names the cluster; unset, each notebook starts a local one).
notebooks: $(NOTEBOOKS_STAMP)
	$(VENV)/bin/jupyter lab notebooks/

test: $(STAMP)
	$(PY) -m bookie.testing.netns ensure-tools  # nftables for the multi-host tests (as root); else says why they skip
	$(PY) -m pytest tests

# The unit tests alone (no process, no connection): seconds.
test-unit: $(STAMP)
	$(PY) -m pytest -m unit

demo: $(STAMP)
	$(PY) -m spark_bookkeeper.demo

# Every bench records its figures in bench/results/<run>/ (one run: BENCH_RUN); docs/benchmarks.md is rendered from them.
bench: export BENCH_RUN := $(shell date -u +%Y-%m-%dT%H%M%SZ)-$(shell git rev-parse --short HEAD 2>/dev/null)
bench: $(STAMP)
	$(PY) bench/journal.py
	$(PY) bench/bookie_add.py
	$(PY) bench/client.py
	$(PY) bench/spark_read.py
	$(PY) bench/spark_write.py
	$(PY) bench/compaction.py
	$(PY) bench/gc.py
	$(PY) bench/audit.py
	$(PY) bench/scale.py  # 10,000 and 100,000 ledgers; says why 1,000,000 is not run
	$(PY) bench/rereplication.py
	$(PY) bench/multihost.py  # says why it is skipped where network namespaces cannot be made
	$(PY) bench/interop.py  # says why it is skipped where no real BookKeeper is found
	$(PY) bench/interop_spark.py  # likewise
	$(PY) bench/render_results.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache site ci-artifacts

# Regenerate the protobuf/gRPC code from bookie/proto/*.proto (a test fails when it is stale).
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. bookie/proto/bookkeeper.proto
	$(PY) -m grpc_tools.protoc -I . --python_out=. bookie/proto/data_formats.proto
	$(PY) -m grpc_tools.protoc -I . --python_out=. bookie/proto/bookkeeper_protocol.proto

# Render docs/reference/ (configuration keys, bk commands, Spark options) from the code (a test fails when it is stale).
reference: $(STAMP)
	$(PY) docs/generate_reference.py
