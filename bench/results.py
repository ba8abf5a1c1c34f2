"""Benchmark results as data: every bench records its figures, each next to the baseline measured in the
same run, in ``bench/results/<run>/<bench>.json``; ``bench/render_results.py`` renders docs/benchmarks.md
from them.

A *run* is one ``make bench`` (it sets ``BENCH_RUN`` for every bench it starts); a bench started on its own
makes a run of its own. A run's id starts with its UTC date and time, so the ids sort in time order. Each
file also says the commit (and whether the work tree had changes), the machine and the command line.

A figure's ``ratio`` is its value over its baseline's (for times as for rates: whether larger is better is
in the target), and its ``target`` is a bound on the ratio, or on the value where it has no baseline:
``">= 0.5"``, ``"<= 1.5"``.
"""
from __future__ import annotations

import datetime
import json
import operator
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(ROOT, "bench", "results")
RUN_ENV = "BENCH_RUN"

_COMPARE = {">=": operator.ge, "<=": operator.le}


@dataclass
class Figure:
    """One measured figure and what it is held against."""

    name: str
    value: float
    unit: str
    baseline: str | None = None
    baseline_value: float | None = None
    target: str | None = None
    ratio: float | None = field(default=None)
    met: bool | None = field(default=None)

    def __post_init__(self) -> None:
        if (self.baseline is None) != (self.baseline_value is None):
            raise ValueError(f"figure {self.name!r}: give both baseline and baseline_value, or neither")
        if self.baseline_value:
            self.ratio = self.value / self.baseline_value
        if self.target is not None:
            self.met = target_met(self.target, self.value if self.ratio is None else self.ratio)


def parse_target(target: str) -> tuple[str, float]:
    """(operator, bound) of ``">= 0.5"`` or ``"<= 1.5"``."""
    op, _, bound = target.strip().partition(" ")
    try:
        if op in _COMPARE:
            return op, float(bound)
    except ValueError:
        pass
    raise ValueError(f"target {target!r}: must be '>= <number>' or '<= <number>'")


def target_met(target: str, measured: float) -> bool:
    """Whether ``measured`` holds ``target`` (``">= 0.5"`` or ``"<= 1.5"``)."""
    op, bound = parse_target(target)
    return _COMPARE[op](measured, bound)


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", "-C", ROOT, *args], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def run_id() -> str:
    """The current run: ``BENCH_RUN`` when ``make bench`` set it, else one made now (and exported, so that a
    bench's child processes record into the same run)."""
    run = os.environ.get(RUN_ENV)
    if not run:
        run = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H%M%SZ")
        commit = _git("rev-parse", "--short", "HEAD")
        run = f"{run}-{commit}" if commit else run
        os.environ[RUN_ENV] = run
    return run


def machine() -> dict:
    """What the figures were measured on: they are comparable only on the same machine."""
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            model = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), "")
    except OSError:
        pass
    memory_gb = None
    try:
        with open("/proc/meminfo") as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("MemTotal:"))
            memory_gb = round(kb / 1024 / 1024, 1)
    except (OSError, StopIteration, ValueError):
        pass
    return {"cpu": model or platform.processor(), "cores": os.cpu_count(), "memory_gb": memory_gb,
            "system": f"{platform.system()} {platform.release()}", "python": platform.python_version()}


def _write(bench: str, body: dict) -> str:
    run = run_id()
    directory = os.path.join(RESULTS_DIR, run)
    os.makedirs(directory, exist_ok=True)
    doc = {"bench": bench, "run": run, "commit": _git("rev-parse", "--short", "HEAD"),
               "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": machine(), "command": " ".join(["python", os.path.relpath(sys.argv[0], ROOT), *sys.argv[1:]]),
               **body}
    path = os.path.join(directory, f"{bench}.json")
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)  # a reader never sees half a file
    print(f"results: {os.path.relpath(path, ROOT)}")
    return path


def record(bench: str, figures: list[Figure], notes: list[str] | None = None) -> str:
    """Write ``figures`` as ``bench``'s result in the current run; returns the file's path."""
    names = [f.name for f in figures]
    if len(set(names)) != len(names):
        raise ValueError(f"bench {bench}: figure names must be distinct, got {names}")
    return _write(bench, {"figures": [asdict(f) for f in figures], "notes": list(notes or [])})


def record_skipped(bench: str, reason: str) -> str:
    """Record that ``bench`` could not run here, and why (e.g. no network namespaces, no real BookKeeper)."""
    return _write(bench, {"skipped": reason, "figures": [], "notes": []})
