"""BookKeeper's stats API (org.apache.bookkeeper.stats: StatsLogger, OpStatsLogger, Counter, NullStatsLogger).

Components record through these interfaces and never name a provider, so a bookie, AutoRecovery or a client
runs with ``NULL_STATS_LOGGER`` (records nothing, near-zero cost: the default everywhere) or with a
``PrometheusMetricsProvider``'s loggers, as BookKeeper's StatsProvider lets it choose.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Callable


class OpStatsLogger(ABC):
    """A latency or value distribution (OpStatsLogger), exported as a Prometheus summary.

    ``count`` > 1 records ``count`` events of the same latency or value at the cost of one (a batch of
    entries acknowledged by one fsync): hot paths record per batch, never per entry.
    """

    @abstractmethod
    def register_successful_event(self, latency_seconds: float, count: int = 1) -> None: ...

    @abstractmethod
    def register_failed_event(self, latency_seconds: float, count: int = 1) -> None: ...

    @abstractmethod
    def register_successful_value(self, value: float, count: int = 1) -> None:
        """A size or a count rather than a latency (registerSuccessfulValue)."""

    @abstractmethod
    def register_failed_value(self, value: float, count: int = 1) -> None: ...


class Counter(ABC):
    """A number that goes up and down (Counter); written without Prometheus' ``_total`` suffix."""

    @abstractmethod
    def inc(self, n: int = 1) -> None: ...

    @abstractmethod
    def dec(self, n: int = 1) -> None: ...

    @abstractmethod
    def get(self) -> int: ...


class StatsLogger(ABC):
    """Creates metrics under a scope (StatsLogger): ``scope("bookie").scope("journal")`` names them
    ``bookie_journal_*``. Asking twice for a name in the same scope and labels returns the same object."""

    @abstractmethod
    def get_op_stats_logger(self, name: str) -> OpStatsLogger: ...

    @abstractmethod
    def get_counter(self, name: str) -> Counter: ...

    @abstractmethod
    def register_gauge(self, name: str, sample: Callable[[], float]) -> None:
        """``sample`` is called at scrape time; the first registration of a name wins (registerGauge)."""

    @abstractmethod
    def scope(self, name: str) -> StatsLogger:
        """A logger whose names are this scope + "_" + ``name`` + "_" + the metric's name."""

    @abstractmethod
    def scope_label(self, key: str, value: str) -> StatsLogger:
        """A logger whose metrics carry the label ``key="value"`` as well as this logger's (scopeLabel)."""


class NullOpStatsLogger(OpStatsLogger):
    """Records nothing (NullStatsLogger.NullOpStatsLogger)."""

    def register_successful_event(self, latency_seconds: float, count: int = 1) -> None:
        pass

    def register_failed_event(self, latency_seconds: float, count: int = 1) -> None:
        pass

    def register_successful_value(self, value: float, count: int = 1) -> None:
        pass

    def register_failed_value(self, value: float, count: int = 1) -> None:
        pass


class NullCounter(Counter):
    """Counts nothing and reads 0 (NullStatsLogger.NullCounter)."""

    def inc(self, n: int = 1) -> None:
        pass

    def dec(self, n: int = 1) -> None:
        pass

    def get(self) -> int:
        return 0


class NullStatsLogger(StatsLogger):
    """Hands out the shared null metrics; its scopes are itself (NullStatsLogger.INSTANCE)."""

    _op_stats = NullOpStatsLogger()
    _counter = NullCounter()

    def get_op_stats_logger(self, name: str) -> OpStatsLogger:
        return self._op_stats

    def get_counter(self, name: str) -> Counter:
        return self._counter

    def register_gauge(self, name: str, sample: Callable[[], float]) -> None:
        pass  # never sampled: nothing is written

    def scope(self, name: str) -> StatsLogger:
        return self

    def scope_label(self, key: str, value: str) -> StatsLogger:
        return self

    def __repr__(self) -> str:
        return "NULL_STATS_LOGGER"


NULL_STATS_LOGGER: StatsLogger = NullStatsLogger()
