"""The Prometheus stats provider (PrometheusMetricsProvider): the root of a process's StatsLoggers, the
thread that rolls the latency quantiles over, and the /metrics text.

As BookKeeper's: every prometheusStatsLatencyRolloverSeconds each op stats logger closes its window
(rotateLatencyCollection), so the quantiles written are those of the last whole window, while counts and
sums are cumulative. ``write_all`` writes the process, platform and GC collectors of prometheus_client
(BookKeeper's JVM exports), then the gauges, counters and op stats, as writeAllMetrics does. Serving the
text is bookie.http's (BookKeeper's MetricsService); this module opens no port.
"""
from __future__ import annotations

import math
import threading
from typing import Any, Mapping

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector

from bookie.stats.prometheus_stats_logger import PrometheusMetrics, PrometheusStatsLogger
from bookie.stats.prometheus_text_format import PrometheusTextFormat, write_metrics_collected_by_prometheus_client
from bookie.stats.stats_logger import StatsLogger
from bookie.util.periodic_thread import PeriodicThread


ENABLE_STATISTICS = "enableStatistics"
PROMETHEUS_STATS_LATENCY_ROLLOVER_SECONDS = "prometheusStatsLatencyRolloverSeconds"
DEFAULT_PROMETHEUS_STATS_LATENCY_ROLLOVER_SECONDS = 60


def default_collector_registry() -> CollectorRegistry:
    """A registry of this process's own metrics (BookKeeper's StandardExports, GarbageCollectorExports...):
    one per provider rather than prometheus_client's global one, which refuses a second registration."""
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


class PrometheusMetricsProvider:
    def __init__(self, latency_rollover_seconds: float = float(DEFAULT_PROMETHEUS_STATS_LATENCY_ROLLOVER_SECONDS),
                 registry: CollectorRegistry | None = None):
        if (isinstance(latency_rollover_seconds, bool) or not isinstance(latency_rollover_seconds, (int, float))
                or not math.isfinite(latency_rollover_seconds) or latency_rollover_seconds <= 0):
            raise ValueError(f"{PROMETHEUS_STATS_LATENCY_ROLLOVER_SECONDS} must be a number of seconds above 0, "
                             f"got {latency_rollover_seconds!r}")
        self.latency_rollover_seconds = float(latency_rollover_seconds)
        self.registry = registry if registry is not None else default_collector_registry()
        self._metrics = PrometheusMetrics()
        self._lock = threading.Lock()  # start and stop
        self._rollover: PeriodicThread | None = None

    @classmethod
    def from_conf(cls, conf: Mapping[str, Any]) -> PrometheusMetricsProvider | None:
        """From a ServerConfiguration (or any mapping with its keys and types): None when enableStatistics is
        false, as BookKeeper then runs NullStatsProvider."""
        enabled = conf[ENABLE_STATISTICS]
        if not isinstance(enabled, bool):
            raise ValueError(f"{ENABLE_STATISTICS} must be true or false, got {enabled!r}")
        if not enabled:
            return None
        return cls(conf[PROMETHEUS_STATS_LATENCY_ROLLOVER_SECONDS])

    def start(self) -> PrometheusMetricsProvider:
        """Start the rollover thread (a daemon: it never keeps the process alive)."""
        with self._lock:
            if self._rollover is not None:
                raise RuntimeError("the metrics provider is already started; stop() it first")
            self._rollover = PeriodicThread("metrics-rollover", self.latency_rollover_seconds,
                                            self.rotate_latency_collection)
            self._rollover.start()
        return self

    def stop(self) -> None:
        """Stop the rollover thread and wait for it; the metrics stay readable."""
        with self._lock:
            rollover, self._rollover = self._rollover, None
        if rollover is not None:
            rollover.shutdown()

    def get_stats_logger(self, scope: str = "") -> StatsLogger:
        return PrometheusStatsLogger(self._metrics, scope)

    def rotate_latency_collection(self) -> None:
        """Close every op stats logger's window (rotateLatencyCollection); the thread does it each rollover."""
        _, _, op_stats = self._metrics.snapshot()
        for _, op_stat in op_stats:
            op_stat.rotate_latency_collection()

    def write_all(self) -> str:
        """The /metrics text (writeAllMetrics)."""
        out: list[str] = []
        write_metrics_collected_by_prometheus_client(out, self.registry)
        text_format = PrometheusTextFormat()
        gauges, counters, op_stats = self._metrics.snapshot()
        for context, sample in gauges:
            text_format.write_gauge(out, context, sample)
        for context, counter in counters:
            text_format.write_counter(out, context, counter)
        for context, op_stat in op_stats:
            text_format.write_op_stat(out, context, op_stat)
        return "".join(out)

    def __repr__(self) -> str:
        return (f"PrometheusMetricsProvider(latency_rollover_seconds={self.latency_rollover_seconds}, "
                f"started={self._rollover is not None})")
