"""BookKeeper's stats API (org.apache.bookkeeper.stats) and its Prometheus provider.

Components take a ``StatsLogger`` (``NULL_STATS_LOGGER`` by default) and record through it; a server process
builds a ``PrometheusMetricsProvider`` (bookie.stats.prometheus_metrics_provider, not imported here: it loads
prometheus_client) and hands its root logger down. Layering: bookie.stats imports nothing of the project's
but bookie.util, so everything may import it.
"""
from bookie.stats.stats_logger import NULL_STATS_LOGGER, Counter, OpStatsLogger, StatsLogger

__all__ = ["NULL_STATS_LOGGER", "Counter", "OpStatsLogger", "StatsLogger"]
