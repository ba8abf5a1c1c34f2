"""Appended entries waiting for their acknowledgements (PendingAddOp), the run of single appends
not framed yet that becomes one (OpenAddRun), and the future each append returns (AddFuture).

One op is a run of consecutive entries framed together: single appends coalesced while the writer
had no room to send, or a piece of a batch no larger than one add message. It holds what each bookie
of the ensemble stores of them and which bookies have acknowledged; the entries are acknowledged
when, for every write set they use, AQ of its bookies have answered.
"""
from __future__ import annotations

import threading
import time
from concurrent.futures import Future
from concurrent.futures._base import CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED, LOGGER, PENDING, InvalidStateError

from bookie.client.add_batch import frame_and_stripe
from bookie.proto.checksum import DigestManager


_DONE = frozenset((CANCELLED, CANCELLED_AND_NOTIFIED, FINISHED))
_NONE: tuple = ()  # no waiters / no further callbacks yet: lists are made only when needed
_STATE_LOCK = threading.Lock()  # a state change of an AddFuture that nobody waits on (a few bytecodes held)


class AddFuture(Future):
    """The future of an append (BookKeeper's CompletableFuture of addEntry): a ``concurrent.futures.Future``
    with the same behaviour (``result``, ``exception``, ``done``, ``add_done_callback``, ``cancel``, usable
    with ``concurrent.futures.wait`` and ``asyncio.wrap_future``), cheaper for a writer with thousands
    in flight: its Condition is made only when a thread first waits on it (or cancels it). Until then
    its state changes under one shared lock; from then on under its Condition, as Future's own.

    Slots, and no list for the first done callback: an append in flight is one object for the cyclic
    garbage collector to track, not four (the future, its dict, its two lists)."""

    __slots__ = ("_cond", "_state", "_result", "_exception", "_waiters", "_done_callbacks", "_callback")

    def __init__(self) -> None:  # Future.__init__ without the Condition and lists
        self._cond: threading.Condition | None = None
        self._state = PENDING
        self._result = None
        self._exception = None
        self._waiters = _NONE  # a list from when the Condition is made (wait and as_completed add to it)
        self._done_callbacks = _NONE  # the callbacks after the first
        self._callback = None  # the first callback

    @property
    def _condition(self) -> threading.Condition:
        """Future's Condition, made on first use (by the methods below that must wait, or notify a waiter);
        Future's own methods, which take it first, then find the lists they add to."""
        cond = self._cond
        if cond is None:
            with _STATE_LOCK:
                if self._cond is None:
                    self._waiters = []
                    self._done_callbacks = list(self._done_callbacks)
                    self._cond = threading.Condition()
                cond = self._cond
        return cond

    def done(self) -> bool:
        return self._state in _DONE  # only ever moves to a done state: no lock needed to read it

    def result(self, timeout: float | None = None):
        if self._state == FINISHED and self._exception is None:
            return self._result
        return super().result(timeout)

    def exception(self, timeout: float | None = None):
        if self._state == FINISHED:
            return self._exception
        return super().exception(timeout)

    def add_done_callback(self, fn) -> None:
        with _STATE_LOCK:
            if self._cond is None and self._state not in _DONE:
                if self._callback is None:
                    self._callback = fn
                elif self._done_callbacks is _NONE:
                    self._done_callbacks = [fn]
                else:
                    self._done_callbacks.append(fn)
                return
        if self._cond is not None:
            super().add_done_callback(fn)
            return
        try:
            fn(self)
        except Exception:
            LOGGER.exception("exception calling callback for %r", self)

    def _invoke_callbacks(self) -> None:
        callback = self._callback
        if callback is not None:
            try:
                callback(self)
            except Exception:
                LOGGER.exception("exception calling callback for %r", self)
        if self._done_callbacks:
            super()._invoke_callbacks()

    def set_result(self, result) -> None:
        if not self._complete(result, None):
            super().set_result(result)

    def set_exception(self, exception) -> None:
        if not self._complete(None, exception):
            super().set_exception(exception)

    def _complete(self, result, exception) -> bool:
        """Complete without a Condition if none was made (nobody waits); False if one was (Future's way)."""
        with _STATE_LOCK:
            if self._cond is not None:
                return False
            refused = self._state in _DONE
            if not refused:
                self._result, self._exception = result, exception
                self._state = FINISHED
        if refused:  # outside the lock: repr takes it (to make the Condition)
            raise InvalidStateError(f"{self._state}: {self!r}")
        self._invoke_callbacks()
        return True


class PendingAddOp:
    """Entries ``entry_id..last_id`` in flight together.

    ``parts[i]`` is what bookie index i stores of them (all of them when E == WQ; with striping, the
    entries whose write set holds i). ``quorums`` are the distinct write sets of those entries.
    ``futures`` (coalesced single appends) holds one future per entry, each getting its entry id;
    otherwise ``future`` (None for the inner pieces of a split batch) gets ``range(result_first,
    last_id + 1)``. ``length`` is the ledger's length through ``last_id``. ``started`` (monotonic) is when
    its first entry was appended: what ``addEntryQuorumTimeoutSec`` counts from.
    """

    __slots__ = ("entry_id", "last_id", "length", "parts", "future", "futures", "write_set", "quorums", "acked",
                 "result_first", "started")

    def __init__(self, entry_id: int, last_id: int, length: int, parts: dict[int, bytes], future: Future | None,
                 quorums: tuple[tuple[int, ...], ...], result_first: int | None = None,
                 futures: list[Future] | None = None, started: float | None = None):
        self.entry_id = entry_id
        self.last_id = last_id
        self.length = length
        self.parts = parts
        self.future = future
        self.futures = futures
        self.write_set = tuple(parts)
        self.quorums = quorums
        self.acked: set[int] = set()
        self.result_first = result_first
        self.started = time.monotonic() if started is None else started

    @property
    def count(self) -> int:
        return self.last_id - self.entry_id + 1

    @property
    def has_futures(self) -> bool:
        """Whether completing these entries completes some caller's future."""
        return self.futures is not None or self.future is not None

    def all_futures(self) -> list[Future]:
        return self.futures if self.futures is not None else [] if self.future is None else [self.future]

    def ack(self, index: int) -> None:
        """Bookie ``index`` has its part durably."""
        self.acked.add(index)

    def awaits(self, index: int) -> bool:
        """Whether bookie ``index`` stores part of these entries and has not acknowledged it."""
        return index in self.write_set and index not in self.acked

    def is_complete(self, ack_quorum: int) -> bool:
        """Whether every write set of these entries has ``ack_quorum`` acknowledgements."""
        acked = self.acked
        for ws in self.quorums:
            n = 0
            for i in ws:
                if i in acked:
                    n += 1
            if n < ack_quorum:
                return False
        return True

    def result(self) -> int | range:
        return self.entry_id if self.result_first is None else range(self.result_first, self.last_id + 1)


class OpenAddRun:
    """Single appends taken while no bookie had room for another add message: consecutive entries from
    ``entry_id``, kept as payloads and futures until ``seal`` frames them all at once into one
    PendingAddOp (when a bookie has room, or when one more would not fit in one add message).
    Framing late is what makes a pipelined append cheap: one buffer and one op per run, not per entry.
    ``size`` is what the run's frames will take (payloads and per-entry overhead); ``started`` when its
    first entry was appended."""

    __slots__ = ("entry_id", "start_length", "payloads", "futures", "size", "started")

    def __init__(self, entry_id: int, start_length: int):
        self.entry_id = entry_id
        self.start_length = start_length  # the ledger's length before the first entry
        self.payloads: list[bytes] = []
        self.futures: list[Future] = []
        self.size = 0
        self.started = time.monotonic()

    @property
    def last_id(self) -> int:
        return self.entry_id + len(self.payloads) - 1

    def seal(self, digest: DigestManager, lac: int, write_sets: list[tuple[int, ...]]) -> PendingAddOp:
        """The run framed (carrying ``lac``, the LAC at the time it is sent) as one pending op."""
        parts, quorums, length = frame_and_stripe(digest, self.entry_id, lac, self.start_length, self.payloads,
                                                  write_sets)
        return PendingAddOp(self.entry_id, self.entry_id + len(self.payloads) - 1, length, parts, None, quorums,
                            futures=self.futures, started=self.started)
