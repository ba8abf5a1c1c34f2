"""The /metrics text, line for line as BookKeeper writes it (PrometheusTextFormat), so that dashboards and
alerts built on a Java bookie's scrape read this one unchanged.

BookKeeper's own shape, kept: counters without a ``_total`` suffix; summaries with ``success`` then
``quantile`` labels, a metric's labels after ", "; quantiles, sums and gauges printed as Java's
Double.toString prints them ("1.0", "1.0E7", "NaN"); one ``# TYPE`` line per name, no ``# HELP``.
``write_metrics_collected_by_prometheus_client`` writes a prometheus_client registry (process, platform
and GC collectors) as writeMetricsCollectedByPrometheusClient does, "{}" and ", " included.

Three departures, each where BookKeeper's text would be unreadable by Prometheus: label values are escaped
(\\, " and newline); a client family of unknown type is written "untyped" (Prometheus refuses "unknown");
a gauge whose sample fails is written NaN and logged instead of failing the whole scrape.
"""
from __future__ import annotations

import logging
import math
import numbers
from decimal import Decimal
from typing import Callable

from prometheus_client import CollectorRegistry

from bookie.stats.data_sketches_op_stats_logger import QUANTILES, DataSketchesOpStatsLogger
from bookie.stats.prometheus_stats_logger import Labels, LongAdderCounter, ScopeContext

log = logging.getLogger(__name__)

# Collector.Type -> the text format's type (getTypeStr); the OpenMetrics-only types as prometheus_client's
# own exposition writes them.
_CLIENT_TYPES = {"counter": "counter", "gauge": "gauge", "info": "gauge", "stateset": "gauge",
                 "summary": "summary", "histogram": "histogram", "gaugehistogram": "histogram"}


def java_double(value: float) -> str:
    """Java's Double.toString: "1.0", "0.001", "1.0E7", "1.5E-4", "NaN", "Infinity"."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    value = float(value)
    magnitude = abs(value)
    if magnitude == 0 or 1e-3 <= magnitude < 1e7:
        return repr(value)  # the shortest digits that round-trip, as Java's; always with a "."
    _, digit_tuple, exponent = Decimal(repr(magnitude)).as_tuple()
    scientific_exponent = len(digit_tuple) - 1 + exponent
    digits = "".join(map(str, digit_tuple)).rstrip("0")
    return f"{'-' if value < 0 else ''}{digits[0]}.{digits[1:] or '0'}E{scientific_exponent}"


def go_double(value: float) -> str:
    """Collector.doubleToGoString: Java's digits, Go's names for the infinities."""
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return java_double(value)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _labels_no_braces(labels: Labels) -> str:
    return ",".join(f'{name}="{_escape(value)}"' for name, value in labels)


def _gauge_sample(name: str, sample: Callable[[], float]) -> str:
    try:
        value = sample()
        if isinstance(value, numbers.Integral):  # Number.toString: an Integer or a Long without ".0"
            return str(int(value))
        if isinstance(value, numbers.Real):
            return java_double(float(value))
        raise TypeError(f"the sample returned {type(value).__name__}, not a number")
    except Exception as exc:  # one broken gauge must not cost the scrape every other metric
        log.warning("gauge %s: sampling failed, written as NaN: %s", name, exc)
        return "NaN"


class PrometheusTextFormat:
    """One scrape's writer: it remembers the names it wrote a ``# TYPE`` line for (metricNameSet)."""

    def __init__(self) -> None:
        self._typed: set[str] = set()

    def write_gauge(self, out: list[str], context: ScopeContext, sample: Callable[[], float]) -> None:
        # # TYPE bookie_ledgers_count gauge
        # bookie_ledgers_count 519
        self._write_type(out, context.scope, "gauge")
        out.append(f"{context.scope}{self._braced(context.labels)} {_gauge_sample(context.scope, sample)}\n")

    def write_counter(self, out: list[str], context: ScopeContext, counter: LongAdderCounter) -> None:
        # # TYPE bookie_WRITE_BYTES counter
        # bookie_WRITE_BYTES 1234
        self._write_type(out, context.scope, "counter")
        out.append(f"{context.scope}{self._braced(context.labels)} {counter.get()}\n")

    def write_op_stat(self, out: list[str], context: ScopeContext, op_stat: DataSketchesOpStatsLogger) -> None:
        # # TYPE bookie_journal_JOURNAL_SYNC summary
        # bookie_journal_JOURNAL_SYNC{success="false",quantile="0.5"} NaN
        # ... the other quantiles, then
        # bookie_journal_JOURNAL_SYNC_count{success="false"} 0
        # bookie_journal_JOURNAL_SYNC_sum{success="false"} 0.0
        # and the same for success="true"
        name = context.scope
        self._write_type(out, name, "summary")
        extra = ", " + _labels_no_braces(context.labels) if context.labels else ""
        for success in (False, True):
            flag = "true" if success else "false"
            for quantile, value in zip(QUANTILES, op_stat.get_quantile_values(success)):
                out.append(f'{name}{{success="{flag}",quantile="{java_double(quantile)}"{extra}}} '
                           f'{java_double(value)}\n')
            out.append(f'{name}_count{{success="{flag}"{extra}}} {op_stat.get_count(success)}\n')
            out.append(f'{name}_sum{{success="{flag}"{extra}}} {java_double(op_stat.get_sum(success))}\n')

    @staticmethod
    def _braced(labels: Labels) -> str:
        return "{" + _labels_no_braces(labels) + "}" if labels else ""

    def _write_type(self, out: list[str], name: str, kind: str) -> None:
        if name not in self._typed:
            self._typed.add(name)
            out.append(f"# TYPE {name} {kind}\n")


def write_metrics_collected_by_prometheus_client(out: list[str], registry: CollectorRegistry) -> None:
    """Every family of ``registry``: its ``# TYPE`` line (an info family's name with "_info"), then its
    samples, each with braces even when it has no label (writeMetricsCollectedByPrometheusClient)."""
    for family in registry.collect():
        suffix = "_info" if family.type == "info" else ""
        out.append(f"# TYPE {family.name}{suffix} {_CLIENT_TYPES.get(family.type, 'untyped')}\n")
        for sample in family.samples:
            labels = ", ".join(f'{name}="{_escape(value)}"' for name, value in sample.labels.items())
            out.append(f"{sample.name}{{{labels}}} {go_double(float(sample.value))}\n")
