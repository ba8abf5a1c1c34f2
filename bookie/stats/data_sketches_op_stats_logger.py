"""The Prometheus provider's OpStatsLogger (DataSketchesOpStatsLogger).

As BookKeeper's: count and sum are cumulative; the quantiles are those of the last rollover window. Events
go into the current window; every prometheusStatsLatencyRolloverSeconds the provider swaps the current window
with the replacement (rotateLatencyCollection), computes the quantiles of the window just closed, publishes
them and empties it. Where BookKeeper keeps a DataSketches quantiles sketch per thread, a window here is a
log-linear histogram (64 buckets per power of two, a value off by at most 0.78%), so recording is a lock
acquire, a ``frexp`` and a dict update, whatever the number of events; quantiles are computed once per
rollover from the buckets. Events are recorded in milliseconds, as BookKeeper does; values as given.
"""
from __future__ import annotations

import math
import threading
from math import frexp, ldexp

from bookie.stats.stats_logger import OpStatsLogger

# The quantiles PrometheusTextFormat writes, in its order.
QUANTILES = (0.5, 0.75, 0.95, 0.99, 0.999, 0.9999, 1.0)

# A bucket is 1/64 of its octave [2**(e-1), 2**e) wide: its middle is half a bucket, 1/128 of the octave's
# lowest value, from any value in it, so 0.78% of the value at most.
_SUB_BUCKETS = 64
# frexp's exponent of a finite double is above -1075: adding this keeps every positive value's key > 0,
# so zero is key 0 and a negative value's key is minus its magnitude's (keys sort as values do).
_EXPONENT_OFFSET = 1100


def bucket_key(value: float) -> int:
    """The histogram bucket of ``value``: keys order as values do."""
    if value > 0:
        mantissa, exponent = frexp(value)  # mantissa in [0.5, 1): int(mantissa * 128) is 64..127
        return (exponent + _EXPONENT_OFFSET) * _SUB_BUCKETS + int(mantissa * (2 * _SUB_BUCKETS))
    if value < 0:
        return -bucket_key(-value)
    if value == 0:
        return 0
    raise ValueError(f"a latency or value must be a finite number, got {value!r}")  # NaN compares false


def bucket_value(key: int) -> float:
    """The middle of bucket ``key``: what a quantile falling in it reports."""
    if key < 0:
        return -bucket_value(-key)
    if key == 0:
        return 0.0
    exponent = key // _SUB_BUCKETS - _EXPONENT_OFFSET - 1
    return ldexp((key % _SUB_BUCKETS + _SUB_BUCKETS + 0.5) / (2 * _SUB_BUCKETS), exponent)


def window_quantiles(buckets: dict[int, int], low: float, high: float) -> tuple[float, ...] | None:
    """QUANTILES of one window by nearest rank, each clamped to the window's exact [low, high]; 1.0 is the
    exact maximum (as the sketch's is). None for an empty window: BookKeeper writes NaN then."""
    total = sum(buckets.values())
    if not total:
        return None
    keys = sorted(buckets)
    result = []
    index, below = 0, 0  # below: events in the buckets before keys[index]
    for quantile in QUANTILES:
        if quantile >= 1.0:
            result.append(high)
            continue
        rank = max(1, math.ceil(quantile * total - 1e-9))  # the rank-th smallest event, 1-based
        while below + buckets[keys[index]] < rank:
            below += buckets[keys[index]]
            index += 1
        result.append(min(max(bucket_value(keys[index]), low), high))
    return tuple(result)


class _Distribution:
    """The success or the failure half of an op stats logger."""

    __slots__ = ("_lock", "count", "sum", "_current", "_replacement", "_low", "_high", "quantiles")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0  # cumulative, as BookKeeper's LongAdders
        self.sum = 0.0
        self._current: dict[int, int] = {}  # bucket key -> events, this window
        self._replacement: dict[int, int] = {}  # empty: the next window
        self._low = math.inf  # this window's exact extremes
        self._high = -math.inf
        self.quantiles: tuple[float, ...] | None = None  # the last closed window's; None: NaN

    def record(self, value: float, count: int, scale: float) -> None:
        if count <= 0:
            if count == 0:
                return
            raise ValueError(f"count must be at least 0 (events of the same value), got {count}")
        try:
            value = value * scale
            if value > 0:  # bucket_key's common case, inline: this is the hot path
                mantissa, exponent = frexp(value)
                key = (exponent + _EXPONENT_OFFSET) * _SUB_BUCKETS + int(mantissa * (2 * _SUB_BUCKETS))
            else:
                key = bucket_key(value)
        except OverflowError:
            raise ValueError(f"a latency or value must be a finite number, got {value!r}") from None
        except TypeError:
            raise TypeError(f"a latency or value must be a number, got {type(value).__name__}") from None
        with self._lock:
            window = self._current
            window[key] = window.get(key, 0) + count
            self.count += count
            self.sum += value * count
            if value < self._low:
                self._low = value
            if value > self._high:
                self._high = value

    def rotate(self) -> None:
        with self._lock:  # swapped under the lock: no event lands in the closed window after this
            closed = self._current
            self._current = self._replacement
            self._replacement = closed
            low, high = self._low, self._high
            self._low, self._high = math.inf, -math.inf
        self.quantiles = window_quantiles(closed, low, high)  # outside the lock: recorders are not held up
        closed.clear()


class DataSketchesOpStatsLogger(OpStatsLogger):
    """Success and failure distributions of one metric (its name and labels are its ScopeContext's)."""

    def __init__(self) -> None:
        self._success = _Distribution()
        self._failure = _Distribution()
        self._rotation = threading.Lock()  # one rotation at a time: a window is emptied by the one closing it

    def register_successful_event(self, latency_seconds: float, count: int = 1) -> None:
        self._success.record(latency_seconds, count, 1000.0)

    def register_failed_event(self, latency_seconds: float, count: int = 1) -> None:
        self._failure.record(latency_seconds, count, 1000.0)

    def register_successful_value(self, value: float, count: int = 1) -> None:
        self._success.record(value, count, 1.0)

    def register_failed_value(self, value: float, count: int = 1) -> None:
        self._failure.record(value, count, 1.0)

    def rotate_latency_collection(self) -> None:
        """Close the current window: its quantiles become the ones written (rotateLatencyCollection)."""
        with self._rotation:
            self._success.rotate()
            self._failure.rotate()

    def get_count(self, success: bool) -> int:
        return (self._success if success else self._failure).count

    def get_sum(self, success: bool) -> float:
        return (self._success if success else self._failure).sum

    def get_quantile_values(self, success: bool) -> tuple[float, ...]:
        """The last closed window's QUANTILES, in order; NaN each before a window closed or when it was empty."""
        values = (self._success if success else self._failure).quantiles
        return values if values is not None else (math.nan,) * len(QUANTILES)

    def __repr__(self) -> str:
        return (f"DataSketchesOpStatsLogger(success={self._success.count}, failed={self._failure.count}, "
                f"id={id(self):#x})")
