"""The Prometheus provider's StatsLogger (PrometheusStatsLogger), with its metric key (ScopeContext), its
Counter (LongAdderCounter) and the tables of what its loggers created (PrometheusMetricsProvider's
counters, gauges and opStats maps, here ``PrometheusMetrics`` so the logger need not know the provider).

A logger is a scope and labels over the shared tables: two loggers of the same scope and labels hand out
the same metric objects, so two components may record into one metric, as in BookKeeper.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Callable, TypeVar

from bookie.stats.data_sketches_op_stats_logger import DataSketchesOpStatsLogger
from bookie.stats.stats_logger import Counter, OpStatsLogger, StatsLogger

# A Prometheus label name; "__" names are Prometheus' own, success and quantile are the summaries'.
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
_RESERVED_LABELS = ("success", "quantile")
_NOT_IN_METRIC_NAME = re.compile(r"[^a-zA-Z0-9:]")

Labels = tuple[tuple[str, str], ...]  # sorted by name, as BookKeeper's TreeMap keeps them


def sanitize_metric_name(name: str) -> str:
    """Collector.sanitizeMetricName: anything but [a-zA-Z0-9:] becomes "_", and so does a leading digit."""
    name = _NOT_IN_METRIC_NAME.sub("_", name)
    return "_" + name[1:] if name[:1].isdigit() else name


@dataclass(frozen=True)
class ScopeContext:
    """A metric's key (ScopeContext): its complete name and its labels."""
    scope: str
    labels: Labels = ()


class LongAdderCounter(Counter):
    """A thread-safe counter (LongAdderCounter): a lock and an addition, no increment lost."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._value = 0

    def inc(self, n: int = 1) -> None:
        with self._lock:
            self._value += n

    def dec(self, n: int = 1) -> None:
        with self._lock:
            self._value -= n

    def get(self) -> int:
        return self._value

    def __repr__(self) -> str:
        return f"LongAdderCounter({self._value})"


T = TypeVar("T")


class PrometheusMetrics:
    """Every metric the loggers of one provider created, by ScopeContext. A name has one type (Prometheus
    allows no other); a second kind under a name is refused."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held only to create a metric, never to record
        self.counters: dict[ScopeContext, LongAdderCounter] = {}
        self.gauges: dict[ScopeContext, Callable[[], float]] = {}
        self.op_stats: dict[ScopeContext, DataSketchesOpStatsLogger] = {}
        self._kinds: dict[str, str] = {}  # metric name -> "counter", "gauge" or "summary"

    def get_or_create(self, table: dict[ScopeContext, T], kind: str, context: ScopeContext,
                      create: Callable[[], T]) -> T:
        metric = table.get(context)
        if metric is None:
            with self._lock:
                metric = table.get(context)
                if metric is None:
                    known = self._kinds.setdefault(context.scope, kind)
                    if known != kind:
                        raise ValueError(f"metric {context.scope!r} is already a {known}; it cannot also be a "
                                         f"{kind} (Prometheus allows one type per name)")
                    metric = table[context] = create()
        return metric

    def snapshot(self) -> tuple[list, list, list]:
        """(gauges, counters, op stats), each a sorted list of (ScopeContext, metric): a name's lines stay
        together, as the text format wants, and every scrape lists them in the same order."""
        with self._lock:
            tables = (list(self.gauges.items()), list(self.counters.items()), list(self.op_stats.items()))
        return tuple(sorted(table, key=lambda item: (item[0].scope, item[0].labels)) for table in tables)


def _checked_name(what: str, name: str) -> str:
    if not isinstance(name, str) or not name:
        raise ValueError(f"a {what} must be a non-empty string, got {name!r}")
    return name


class PrometheusStatsLogger(StatsLogger):
    """Names metrics scope + "_" + name, sanitized as BookKeeper does; labels them with its labels."""

    def __init__(self, metrics: PrometheusMetrics, scope: str = "", labels: Labels = ()):
        self._metrics = metrics
        self._scope = scope
        self._labels = labels

    def get_op_stats_logger(self, name: str) -> OpStatsLogger:
        return self._metrics.get_or_create(self._metrics.op_stats, "summary", self._context(name),
                                           DataSketchesOpStatsLogger)

    def get_counter(self, name: str) -> Counter:
        return self._metrics.get_or_create(self._metrics.counters, "counter", self._context(name),
                                           LongAdderCounter)

    def register_gauge(self, name: str, sample: Callable[[], float]) -> None:
        if not callable(sample):
            raise TypeError(f"gauge {name!r}: sample must be a function returning a number, got {sample!r}")
        self._metrics.get_or_create(self._metrics.gauges, "gauge", self._context(name), lambda: sample)

    def scope(self, name: str) -> StatsLogger:
        return PrometheusStatsLogger(self._metrics, self._complete_name(_checked_name("scope", name)), self._labels)

    def scope_label(self, key: str, value: str) -> StatsLogger:
        if not isinstance(key, str) or not _LABEL_NAME.fullmatch(key) or key.startswith("__"):
            raise ValueError(f"label name {key!r} is not valid: letters, digits and '_', not starting with a "
                             f"digit or '__'")
        if key in _RESERVED_LABELS:
            raise ValueError(f"label name {key!r} is reserved for the summaries' lines ({', '.join(_RESERVED_LABELS)})")
        if not isinstance(value, str):
            raise ValueError(f"label {key!r}: the value must be a string, got {value!r}")
        labels = dict(self._labels)
        labels[key] = value
        return PrometheusStatsLogger(self._metrics, self._scope, tuple(sorted(labels.items())))

    def _context(self, name: str) -> ScopeContext:
        return ScopeContext(self._complete_name(_checked_name("metric name", name)), self._labels)

    def _complete_name(self, name: str) -> str:
        return sanitize_metric_name(f"{self._scope}_{name}" if self._scope else name)

    def __repr__(self) -> str:
        return f"PrometheusStatsLogger(scope={self._scope!r}, labels={dict(self._labels)})"
