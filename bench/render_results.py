"""Render docs/benchmarks.md (and a plot per bench under docs/benchmarks/) from bench/results/.

For each bench ``make bench`` runs, in its order: what the bench measures (its module docstring), the
figures of its latest recorded run as a table (value, baseline of the same run, ratio, target), a plot of
those ratios against their targets with the earlier runs' ratios beside them, and the earlier runs' ratios
as a table. Every figure on the page comes from a results file; the files are the history.

    python bench/render_results.py            # make bench runs it after the benches
    python bench/render_results.py --check    # exit 1 when docs/benchmarks.md is not what the results give
"""
from __future__ import annotations

import argparse
import ast
import glob
import json
import os
import re
import sys
from dataclasses import dataclass

from results import RESULTS_DIR, ROOT, parse_target

PAGE = os.path.join(ROOT, "docs", "benchmarks.md")
PLOTS = os.path.join(ROOT, "docs", "benchmarks")
MAKEFILE = os.path.join(ROOT, "Makefile")
EARLIER_RUNS = 6  # columns of the earlier-runs table and dots in a plot


@dataclass
class Result:
    """One bench's results file."""

    bench: str
    run: str
    doc: dict

    @property
    def figures(self) -> list[dict]:
        return self.doc["figures"]


def benches_of_make() -> list[str]:
    """The benches ``make bench`` runs, in its order (read from the Makefile, so the page follows it)."""
    with open(MAKEFILE) as f:
        text = f.read()
    target = re.search(r"^bench:.*\n((?:\t.*\n)+)", text, re.M)
    if target is None:
        raise SystemExit(f"{MAKEFILE}: no bench target")
    this = os.path.splitext(os.path.basename(__file__))[0]
    return [b for b in re.findall(r"bench/(\w+)\.py", target.group(1)) if b != this]


def load_results() -> dict[str, list[Result]]:
    """Every results file, by bench, oldest run first."""
    out: dict[str, list[Result]] = {}
    for path in sorted(glob.glob(os.path.join(RESULTS_DIR, "*", "*.json"))):
        with open(path) as f:
            doc = json.load(f)
        out.setdefault(doc["bench"], []).append(Result(doc["bench"], doc["run"], doc))
    for runs in out.values():
        runs.sort(key=lambda r: r.run)
    return out


def docstring(bench: str) -> str:
    with open(os.path.join(ROOT, "bench", f"{bench}.py")) as f:
        return ast.get_docstring(ast.parse(f.read())) or ""


def _number(value: float | None) -> str:
    if value is None:
        return ""
    if abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"


def _met(figure: dict) -> str:
    return {True: "met", False: "**not met**", None: ""}[figure.get("met")]


def figures_table(result: Result) -> list[str]:
    rows = ["| figure | value | baseline (same run) | ratio | target | |", "| --- | --- | --- | --- | --- | --- |"]
    for f in result.figures:
        baseline = f"{f['baseline']}: {_number(f['baseline_value'])} {f['unit']}" if f["baseline"] else ""
        rows.append(f"| {f['name']} | {_number(f['value'])} {f['unit']} | {baseline} | {_number(f['ratio'])} | "
                    f"{f['target'] or ''} | {_met(f)} |")
    return rows


def earlier_table(runs: list[Result]) -> list[str]:
    """The ratios (the value where a figure has no baseline) of the latest runs, newest first."""
    shown = runs[::-1][:EARLIER_RUNS]
    names = list(dict.fromkeys(f["name"] for r in shown for f in r.figures))
    rows = ["| figure | " + " | ".join(f"{r.run}" for r in shown) + " |", "| --- |" + " --- |" * len(shown)]
    for name in names:
        cells = []
        for r in shown:
            f = next((f for f in r.figures if f["name"] == name), None)
            cells.append("" if f is None else _number(f["ratio"] if f["ratio"] is not None else f["value"]))
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return rows


def plot(bench: str, runs: list[Result]) -> str | None:
    """A bar per ratio of the latest run (green: target met, red: not, grey: no target), the target as a
    black tick, the earlier runs' ratios as grey dots; None when the latest run has no ratio."""
    latest = [f for f in runs[-1].figures if f["ratio"] is not None]
    if not latest:
        return None
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(latest) + 1.2))
    ys = range(len(latest))
    colors = ["#9e9e9e" if f["met"] is None else ("#2e7d32" if f["met"] else "#c62828") for f in latest]
    ax.barh(list(ys), [f["ratio"] for f in latest], color=colors, height=0.6)
    for y, f in zip(ys, latest):
        if f["target"]:
            ax.plot([parse_target(f["target"])[1]] * 2, [y - 0.4, y + 0.4], color="black", linewidth=2)
        earlier = [g["ratio"] for r in runs[-EARLIER_RUNS:-1] for g in r.figures
                   if g["name"] == f["name"] and g["ratio"] is not None]
        ax.plot(earlier, [y] * len(earlier), "o", color="#212121", markeredgecolor="white", markersize=5, zorder=3)
    ax.set_yticks(list(ys), [f"{f['name']}\nvs {f['baseline']}" for f in latest], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("ratio to the baseline of the same run (black: target; dots: earlier runs)", fontsize=8)
    ax.set_title(f"bench/{bench}.py, run {runs[-1].run}", fontsize=9)
    fig.tight_layout()
    os.makedirs(PLOTS, exist_ok=True)
    path = os.path.join(PLOTS, f"{bench}.png")
    fig.savefig(path, dpi=100, metadata={"Software": None})
    plt.close(fig)
    return f"benchmarks/{bench}.png"


def _machine(doc: dict) -> str:
    m = doc["machine"]
    return f"{m['cores']} cores, {m['cpu']}, {m['memory_gb']} GB, {m['system']}, Python {m['python']}"


def section(bench: str, runs: list[Result], draw: bool) -> list[str]:
    lines = [f"## `bench/{bench}.py`", "", docstring(bench), ""]
    if not runs:
        return lines + ["No recorded run yet.", ""]
    latest = runs[-1]
    doc = latest.doc
    commit = doc["commit"] + (" with local changes" if doc["dirty"] else "")
    lines += [f"Latest run **{latest.run}** ({doc['date']}, commit {commit}; {_machine(doc)}): `{doc['command']}`", ""]
    if doc.get("skipped"):
        return lines + [f"Skipped: {doc['skipped']}", ""]
    lines += [f"- {note}" for note in doc["notes"]] + ([""] if doc["notes"] else [])
    lines += figures_table(latest) + [""]
    image = plot(bench, runs) if draw else f"benchmarks/{bench}.png"
    if image and any(f["ratio"] is not None for f in latest.figures):
        lines += [f"![bench/{bench}.py: ratios against targets]({image})", ""]
    if len(runs) > 1:
        lines += ["The latest runs, newest first (the ratio, or the value where a figure has no baseline):", ""] + earlier_table(runs) + [""]
    return lines


def render(draw: bool = True) -> str:
    results = load_results()
    lines = ["# Benchmarks", "",
             "`make bench` runs every bench under `bench/`. Each measures its figures next to a baseline measured in",
             "the same run and on the same machine (ZooKeeper, bookies, client and Spark share its cores, so the",
             "figures are noisy), records them in `bench/results/<run>/<bench>.json` (with the commit, the date,",
             "the machine and the command) and prints them; nothing asserts. This page is rendered from those",
             "files by `bench/render_results.py` (`make bench` runs it last): the latest run of each bench, and",
             "the earlier runs as data. Figures are comparable only between runs on the same machine.", ""]
    for bench in benches_of_make():
        lines += section(bench, results.get(bench, []), draw)
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if docs/benchmarks.md is stale")
    args = parser.parse_args()
    page = render(draw=not args.check)
    if args.check:
        with open(PAGE) as f:
            if f.read() != page:
                print(f"{PAGE} is stale: run python bench/render_results.py", file=sys.stderr)
                return 1
        return 0
    with open(PAGE, "w") as f:
        f.write(page)
    print(f"wrote {os.path.relpath(PAGE, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
