"""Throughput and latency of the client (BookKeeper's BenchThroughputLatency / BenchReadThroughputLatency).

Shared by ``bk bench`` and ``bench/client.py``.
"""
from __future__ import annotations

import os
import threading
import time
from collections import deque
from operator import itemgetter
from dataclasses import dataclass


WINDOW_STEP = 256  # a full window is waited on this many entries at a time


@dataclass
class WriteResult:
    entries: int
    seconds: float
    entry_size: int
    latencies_ms: list[float]
    ledger_ids: list[int]
    interrupted: bool = False  # stopped early (Ctrl-C): the figures are of what was acknowledged by then

    @property
    def rate(self) -> float:
        return self.entries / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.entries * self.entry_size / self.seconds / 1e6

    def percentile(self, p: float) -> float:
        lat = sorted(self.latencies_ms)
        return lat[min(len(lat) - 1, int(len(lat) * p / 100))] if lat else float("nan")


def write_throughput(bk, seconds: float, entry_size: int = 1024, ensemble: int = 3, write_quorum: int = 2,
                     ack_quorum: int = 2, in_flight: int = 10000, ledgers: int = 1, progress=None,
                     password: bytes = b"benchPasswd", stop: threading.Event | None = None) -> WriteResult:
    """Append ``entry_size`` entries round robin over ``ledgers`` for ``seconds``, one ``append_async`` per
    entry, at most ``in_flight`` pending (give or take WINDOW_STEP): a window, the oldest waited for when
    it is full (futures complete in entry order, so the oldest are the next to complete). Each entry's
    latency is taken by a done callback, as an application would. ``stop`` set ends it early: what was sent
    is still waited for, and the ledgers are closed."""
    handles = [bk.create_ledger(ensemble, write_quorum, ack_quorum, password=password) for _ in range(ledgers)]
    payload = os.urandom(entry_size)
    now = time.perf_counter
    starts: list[list[float]] = [[] for _ in handles]
    ends: list[list[float]] = [[] for _ in handles]  # in completion order: entry order within a ledger
    callbacks = [lambda future, done=done: done.append(now()) for done in ends]
    window: deque = deque()
    start = now()
    end = start + seconds
    sent = 0
    while True:
        t = now()
        if t >= end or (stop is not None and stop.is_set()):
            break
        k = sent % ledgers
        future = handles[k].append_async(payload)
        starts[k].append(t)
        future.add_done_callback(callbacks[k])
        window.append(future)
        sent += 1
        if len(window) >= in_flight + WINDOW_STEP:
            # Wait for the newest of the oldest WINDOW_STEP entries of each ledger: futures complete in entry
            # order, and a failed entry fails every later one of its ledger, so these raise any failure.
            oldest = [window.popleft() for _ in range(WINDOW_STEP)]
            for future in oldest[-ledgers:]:
                future.result()
        if progress and sent % 1000 == 0:
            progress(sent - len(window))
    for future in window:
        future.result()
    for handle in handles:
        handle.close()
    elapsed = now() - start
    latencies = [(e - s) * 1000 for ss, es in zip(starts, ends) for s, e in zip(ss, es)]
    return WriteResult(sent, elapsed, entry_size, latencies, [h.ledger_id for h in handles],
                       stop is not None and stop.is_set())


def batch_write_throughput(bk, seconds: float, entry_size: int = 1024, ensemble: int = 3, write_quorum: int = 2,
                           ack_quorum: int = 2, batch: int = 256, in_flight: int = 16,
                           password: bytes = b"benchPasswd") -> WriteResult:
    """``append_batch`` of ``batch`` entries at a time, ``in_flight`` batches pending."""
    handle = bk.create_ledger(ensemble, write_quorum, ack_quorum, password=password)
    payloads = [os.urandom(entry_size)] * batch
    pending, latencies, done = [], [], 0
    now = time.perf_counter
    start = now()
    while now() - start < seconds:
        if len(pending) >= in_flight:
            t, future = pending.pop(0)
            done += len(future.result())
            latencies.append((now() - t) * 1000)
        pending.append((now(), handle.append_batch(payloads)))
    for t, future in pending:
        done += len(future.result())
        latencies.append((now() - t) * 1000)
    elapsed = now() - start
    handle.close()
    return WriteResult(done, elapsed, entry_size, latencies, [handle.ledger_id])


def append_latency(bk, count: int, entry_size: int = 1024, ensemble: int = 3, write_quorum: int = 3,
                   ack_quorum: int = 2) -> WriteResult:
    """One append at a time: the latency of each."""
    handle = bk.create_ledger(ensemble, write_quorum, ack_quorum, password=b"benchPasswd")
    payload = os.urandom(entry_size)
    latencies = []
    start = time.perf_counter()
    for _ in range(count):
        t = time.perf_counter()
        handle.append(payload)
        latencies.append((time.perf_counter() - t) * 1000)
    elapsed = time.perf_counter() - start
    handle.close()
    return WriteResult(count, elapsed, entry_size, latencies, [handle.ledger_id])


def read_throughput(bk, ledger_id: int, password: bytes = b"benchPasswd", batch: int = 100_000) -> tuple[int, int, float]:
    """Read a ledger from start to end without recovery: (entries, bytes, seconds)."""
    handle = bk.open_ledger(ledger_id, password=password, recovery=False)
    last = handle.last_add_confirmed
    entries = size = 0
    start = time.perf_counter()
    for first in range(0, last + 1, batch):
        chunk = handle.read(first, min(last, first + batch - 1))
        entries += len(chunk)
        size += sum(map(len, map(itemgetter(2), chunk)))  # payloads
    return entries, size, time.perf_counter() - start
