"""Reading a PrometheusMetricsProvider's scrape in tests: the samples by their exact names (BookKeeper's: a counter
has no ``_total``), with their labels, and the ``# TYPE`` of each family."""
from __future__ import annotations

import re
from dataclasses import dataclass

_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True)
class Scrape:
    samples: dict[tuple[str, frozenset], float]
    types: dict[str, str]

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name`` with exactly ``labels``; fails naming what the scrape has under that name."""
        key = (name, frozenset(labels.items()))
        if key not in self.samples:
            have = [dict(lbl) for n, lbl in self.samples if n == name]
            raise AssertionError(f"no sample {name}{labels or ''} in the scrape; under that name: {have}")
        return self.samples[key]

    def count(self, name: str, success: bool = True, **labels: str) -> float:
        """An op stats logger's ``_count`` of successful (or failed) events."""
        return self.value(f"{name}_count", success=str(success).lower(), **labels)

    def sum(self, name: str, success: bool = True, **labels: str) -> float:
        return self.value(f"{name}_sum", success=str(success).lower(), **labels)

    def names(self, prefix: str = "") -> set[str]:
        return {name for name, _ in self.samples if name.startswith(prefix)}


def scrape(provider) -> Scrape:
    return parse(provider.write_all())


def parse(text: str) -> Scrape:
    """A /metrics page (Prometheus text format 0.0.4) as a Scrape."""
    samples: dict[tuple[str, frozenset], float] = {}
    types: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            _, _, name, kind = line.split(" ", 3)
            types[name] = kind
            continue
        match = _SAMPLE.match(line)
        if line.startswith("#") or match is None:
            continue
        name, labels, value = match.groups()
        samples[(name, frozenset(_LABEL.findall(labels or "")))] = float(value)
    return Scrape(samples, types)
