# spark-bookkeeper: `make demo` and `make test` are all a newcomer needs.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: test demo bench clean

# (Re)install when the venv is missing or setup.py changed.
$(STAMP): setup.py
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $(STAMP)

test: $(STAMP)
	$(PY) -m pytest tests

demo: $(STAMP)
	$(PY) -m bookie.server.demo

bench: $(STAMP)
	$(PY) bench/journal.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
