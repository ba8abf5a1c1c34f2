"""The bookie's request metrics (RequestStats, under ``bookkeeper_server``), shared by the servers that serve
one engine (the gRPC service and BookKeeper's native protocol): the Bookie holds one.

Each operation has two summaries, as BookKeeper's: ``<OP>_REQUEST`` from the moment the request arrived to
its answer (``success`` by its status), and ``<OP>`` for the operation itself (``ADD_ENTRY``: from the call of
the engine to the fsync). Adds and reads are recorded per batch (the adds of one ledger a connection read
brought, one gRPC AddRequest, the reads of one executor job), one event of ``count`` entries.

Gauges are sampled at scrape time from what each server keeps up to date on its own event loop
(``RequestsInProgress``): requests taken and not answered yet, and back-pressure. BookKeeper blocks requests
past maxAddsInProgressLimit/maxReadsInProgressLimit; here a server stops reading a connection (or a gRPC add
stream) instead, so ``ADD_ENTRY_BLOCKED``/``READ_ENTRY_BLOCKED`` count the connections and streams whose reading
is paused, and ``ADD_ENTRY_BLOCKED_WAIT``/``READ_ENTRY_BLOCKED_WAIT`` how long each pause lasted.
"""
from __future__ import annotations

import threading
import time
import weakref

from bookie.proto import status
from bookie.server import bookkeeper_server_stats as names
from bookie.stats.stats_logger import OpStatsLogger, StatsLogger


class RequestsInProgress:
    """One server's requests in flight and paused connections; changed on that server's event loop only,
    read by the gauges from the scrape's thread (plain ints: a read never sees a torn value)."""

    __slots__ = ("adds", "reads", "adds_blocked", "reads_blocked", "__weakref__")

    def __init__(self) -> None:
        self.adds = self.reads = 0
        self.adds_blocked = self.reads_blocked = 0


class OperationStats:
    """An operation's pair of summaries: ``request`` (arrival to answer) and ``op`` (the work)."""

    __slots__ = ("request", "op")

    def __init__(self, stats_logger: StatsLogger, request: str, op: str):
        self.request = stats_logger.get_op_stats_logger(request)
        self.op = stats_logger.get_op_stats_logger(op)

    def answered(self, received: float, started: float, ok: int, failed: int = 0) -> None:
        """``ok`` requests answered EOK and ``failed`` otherwise, which arrived at ``received`` and whose work
        started at ``started`` (time.monotonic)."""
        now = time.monotonic()
        record(self.op, now - started, ok, failed)
        record(self.request, now - received, ok, failed)


def record(logger: OpStatsLogger, latency: float, ok: int, failed: int = 0) -> None:
    """``ok`` successful and ``failed`` failed events of one latency."""
    if ok:
        logger.register_successful_event(latency, ok)
    if failed:
        logger.register_failed_event(latency, failed)


class RequestStats:
    def __init__(self, stats_logger: StatsLogger):
        self.add = OperationStats(stats_logger, names.ADD_ENTRY_REQUEST, names.ADD_ENTRY)
        self.read = OperationStats(stats_logger, names.READ_ENTRY_REQUEST, names.READ_ENTRY)
        self.fence_read = OperationStats(stats_logger, names.READ_ENTRY_FENCE_REQUEST, names.READ_ENTRY_FENCE_READ)
        self.long_poll_read = OperationStats(stats_logger, names.READ_ENTRY_LONG_POLL_REQUEST,
                                             names.READ_ENTRY_LONG_POLL_READ)
        self.force_ledger = OperationStats(stats_logger, names.FORCE_LEDGER_REQUEST, names.FORCE_LEDGER)
        self.write_lac = OperationStats(stats_logger, names.WRITE_LAC_REQUEST, names.WRITE_LAC)
        self.read_lac = OperationStats(stats_logger, names.READ_LAC_REQUEST, names.READ_LAC)
        self.bookie_info = OperationStats(stats_logger, names.GET_BOOKIE_INFO_REQUEST, names.GET_BOOKIE_INFO)
        self.list_of_entries = OperationStats(stats_logger, names.GET_LIST_OF_ENTRIES_OF_LEDGER_REQUEST,
                                              names.GET_LIST_OF_ENTRIES_OF_LEDGER)
        self.add_rejected = stats_logger.get_counter(names.ADD_ENTRY_REJECTED)  # ETOOMANYREQUESTS: journal full
        self.add_blocked_wait = stats_logger.get_op_stats_logger(names.ADD_ENTRY_BLOCKED_WAIT)
        self.read_blocked_wait = stats_logger.get_op_stats_logger(names.READ_ENTRY_BLOCKED_WAIT)
        self._servers: "weakref.WeakSet[RequestsInProgress]" = weakref.WeakSet()
        self._servers_lock = threading.Lock()  # a server may start while a scrape sums them
        for name, attribute in ((names.ADD_ENTRY_IN_PROGRESS, "adds"), (names.READ_ENTRY_IN_PROGRESS, "reads"),
                                (names.ADD_ENTRY_BLOCKED, "adds_blocked"),
                                (names.READ_ENTRY_BLOCKED, "reads_blocked")):
            stats_logger.register_gauge(name, lambda a=attribute: sum(getattr(s, a) for s in self._all_servers()))

    def in_progress(self) -> RequestsInProgress:
        """A server's own counts, summed into the gauges for as long as the server keeps it."""
        counts = RequestsInProgress()
        with self._servers_lock:
            self._servers.add(counts)
        return counts

    def _all_servers(self) -> list[RequestsInProgress]:
        with self._servers_lock:
            return list(self._servers)

    def add_answered(self, received: float, started: float, code: int, count: int) -> None:
        """``count`` adds answered ``code``: ADD_ENTRY_REQUEST and ADD_ENTRY, ADD_ENTRY_REJECTED for a full
        journal."""
        if code == status.EOK:
            self.add.answered(received, started, count)
            return
        if code == status.ETOOMANYREQUESTS:
            self.add_rejected.inc(count)
        self.add.answered(received, started, 0, count)
