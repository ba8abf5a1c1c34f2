# spark-bookkeeper: `make demo` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test test-unit demo notebooks bench clean proto reference docs

# Editable installs in setuptools' compat mode: the checkout goes on sys.path as a plain directory, so
# Spark's discovery (pkgutil.iter_modules) finds pyspark_bookkeeper from any directory; the default
# mode's import hook hides it (DATA_SOURCE_NOT_FOUND outside the checkout). pyproject.toml pins the
# setuptools that has the mode.
EDITABLE := --config-settings editable_mode=compat -e

# (Re)install when the venv is missing or setup.py changed.
$(STAMP): setup.py pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(EDITABLE) '.[test]'
	touch $(STAMP)

# The oldest PySpark the connector supports (setup.py allows 4.0 to 4.3): `make test` runs the Spark
# tests on it too. `make test-spark-4.1` (or 4.2) runs them on another, each in a virtualenv of its own.
PYSPARK_OLDEST := 4.0
.venv-pyspark%/.installed: setup.py pyproject.toml
	test -x .venv-pyspark$*/bin/python || $(PYTHON) -m venv .venv-pyspark$*
	.venv-pyspark$*/bin/python -m pip install -q --upgrade pip
	.venv-pyspark$*/bin/python -m pip install -q $(EDITABLE) '.[test]' 'pyspark==$*.*'
	touch $@

# The Spark tests: tests/spark and every other test that takes a SparkSession (marker spark), but the
# notebooks' (they call the same connector as the tests above; ~2 minutes of the 45 CI may take) and the
# audits run end to end a second way: over Spark Connect (on 4.0 each Python worker is a process of its
# own: the slowest test of the run) and as bk audit / spark-submit processes. The newest PySpark runs
# both; here the audits run on a classic session, and Spark Connect is tested by test_spark_connect.py.
SPARK_SECOND_WAYS := --deselect 'tests/spark/test_audits.py::test_audits_name_exactly_the_planted_facts[connect]' \
	--deselect tests/spark/test_audits.py::test_bk_audit_and_the_spark_submit_job_exit_0_on_a_healthy_cluster
test-spark-%: .venv-pyspark%/.installed
	.venv-pyspark$*/bin/python -m pytest -m spark tests/spark tests/interop --ignore=tests/spark/test_notebooks.py \
		$(SPARK_SECOND_WAYS)

# An extra of setup.py apart from what the tests need: docs (MkDocs, Material), notebooks (JupyterLab, pandas).
$(VENV)/.%-installed: $(STAMP) setup.py
	$(PY) -m pip install -q $(EDITABLE) '.[$*]'
	touch $@
DOCS_STAMP := $(VENV)/.docs-installed
NOTEBOOKS_STAMP := $(VENV)/.notebooks-installed

# The documentation site into site/, strictly: a broken link or anchor fails the build.
docs: $(DOCS_STAMP)
	NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# JupyterLab on notebooks/ (METADATA_SERVICE_URI names the cluster; unset, each notebook starts a local one).
notebooks: $(NOTEBOOKS_STAMP)
	$(VENV)/bin/jupyter lab notebooks/

# The whole suite on the newest PySpark, then the Spark tests on the oldest.
test: $(STAMP)
	$(PY) -m bookie.testing.netns ensure-tools  # nftables for the multi-host tests (as root); else says why they skip
	$(PY) -m pytest tests
	$(MAKE) test-spark-$(PYSPARK_OLDEST)

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
	rm -rf $(VENV) .venv-pyspark* build *.egg-info .pytest_cache site ci-artifacts

# Regenerate the protobuf/gRPC code from bookie/proto/*.proto (a test fails when it is stale).
proto: $(STAMP)
	$(PY) -m grpc_tools.protoc -I . --python_out=. --grpc_python_out=. bookie/proto/bookkeeper.proto
	$(PY) -m grpc_tools.protoc -I . --python_out=. bookie/proto/data_formats.proto
	$(PY) -m grpc_tools.protoc -I . --python_out=. bookie/proto/bookkeeper_protocol.proto

# Render docs/reference/ (configuration keys, bk commands, Spark options) from the code (a test fails when it is stale).
reference: $(STAMP)
	$(PY) docs/generate_reference.py
