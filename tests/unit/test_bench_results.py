"""Benchmark results are data (bench/results.py) and docs/benchmarks.md is what bench/render_results.py renders
from them: a figure's ratio and target check, a recorded run, the page's staleness, its plots."""
from __future__ import annotations

import importlib
import json
import os
import sys

import pytest

from tests.procs import ROOT

pytestmark = pytest.mark.unit

sys.path.insert(0, os.path.join(ROOT, "bench"))  # the benches run as scripts from bench/ and import so
results = importlib.import_module("results")
render_results = importlib.import_module("render_results")


def test_figure_ratio_and_target():
    rate = results.Figure("engine", 600.0, "entries/s", baseline="bare loop", baseline_value=1000.0, target=">= 0.5")
    assert rate.ratio == pytest.approx(0.6) and rate.met is True
    slow = results.Figure("audit", 4.0, "s", baseline="table", baseline_value=1.0, target="<= 3")
    assert slow.ratio == pytest.approx(4.0) and slow.met is False
    bare = results.Figure("p50", 2.5, "ms", target="<= 2")  # no baseline: the target bounds the value
    assert bare.ratio is None and bare.met is False
    assert results.Figure("untargeted", 1.0, "s").met is None


@pytest.mark.parametrize("bad", ["> 1", "0.5", ">= x"])
def test_a_malformed_target_is_refused(bad):
    with pytest.raises(ValueError):
        results.Figure("f", 1.0, "s", target=bad)


def test_a_baseline_needs_its_value():
    with pytest.raises(ValueError, match="both baseline and baseline_value"):
        results.Figure("f", 1.0, "s", baseline="bare")


def test_a_run_is_recorded_and_rendered(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(render_results, "RESULTS_DIR", str(tmp_path / "results"))
    monkeypatch.setattr(render_results, "PLOTS", str(tmp_path / "plots"))
    for run, engine in (("2026-01-01T000000Z-aaaaaaa", 400.0), ("2026-01-02T000000Z-bbbbbbb", 700.0)):
        monkeypatch.setenv(results.RUN_ENV, run)
        path = results.record("journal", [results.Figure("storage engine", engine, "entries/s", baseline="bare loop",
                                                         baseline_value=1000.0, target=">= 0.5")], notes=["1 KiB"])
        assert path == str(tmp_path / "results" / run / "journal.json")
    monkeypatch.setenv(results.RUN_ENV, "2026-01-03T000000Z-ccccccc")
    results.record_skipped("multihost", "no network namespaces here")
    doc = json.loads((tmp_path / "results" / "2026-01-02T000000Z-bbbbbbb" / "journal.json").read_text())
    assert doc["figures"][0]["ratio"] == pytest.approx(0.7) and doc["figures"][0]["met"] is True
    assert doc["machine"]["cores"] == os.cpu_count() and doc["run"] == "2026-01-02T000000Z-bbbbbbb"

    page = render_results.render()
    journal = page[page.index("## `bench/journal.py`"):]
    assert "Latest run **2026-01-02T000000Z-bbbbbbb**" in journal
    assert "| storage engine | 700 entries/s | bare loop: 1,000 entries/s | 0.7 | >= 0.5 | met |" in journal
    assert "| storage engine | 0.7 | 0.4 |" in journal  # the latest runs, newest first
    assert (tmp_path / "plots" / "journal.png").stat().st_size > 0
    assert "Skipped: no network namespaces here" in page
    assert "No recorded run yet." in page[page.index("## `bench/gc.py`"):]


def test_two_figures_of_one_name_are_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(results, "RESULTS_DIR", str(tmp_path))
    twice = [results.Figure("f", 1.0, "s"), results.Figure("f", 2.0, "s")]
    with pytest.raises(ValueError, match="distinct"):
        results.record("journal", twice)
    assert list(tmp_path.iterdir()) == []


def test_the_benchmarks_page_is_fresh():
    assert render_results.render(draw=False) == open(render_results.PAGE).read(), \
        "docs/benchmarks.md is stale: run python bench/render_results.py"


def test_every_plot_the_page_shows_exists():
    page = open(render_results.PAGE).read()
    images = [line.split("](", 1)[1].rstrip(")") for line in page.splitlines() if line.startswith("![")]
    assert [i for i in images if not os.path.isfile(os.path.join(ROOT, "docs", i))] == []
