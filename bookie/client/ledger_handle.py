"""Writing a ledger (LedgerHandle).

An append takes the next entry id, is cut into pieces that fit one add message, framed with the
current LAC and length and striped into what each bookie stores (add_batch), and becomes a pending
add (PendingAddOp) in the outbox of every bookie of its write sets (BookieOutboxes), which sends it
in batches. Single appends (``append_async``) made while no bookie has room for another message
wait unframed in an OpenAddRun, framed together into one op once a bookie has room: a pipelining
writer pays for framing and bookkeeping per run, not per entry.

An entry is acknowledged when AQ bookies of its write set have it (fsynced); futures complete
strictly in entry order, on the client's completion thread, and the LAC advances with them.

A bookie error or timeout starts an ensemble change (ensemble_change.EnsembleChange: the bookie is
replaced, a new fragment starts at LAC+1, pending entries of that fragment are re-sent; nothing
completes meanwhile). Metadata found IN_RECOVERY or CLOSED stops the writer
(BKLedgerFencedException / BKLedgerClosedException), as does a bookie answering EFENCED, or one
refusing a message for its size (BKMessageTooLargeException): that bookie is healthy, and replacing it
would only move the refusal to the next one. A recovering handle (``recovery=True``) sends RECOVERY_ADDs
and keeps its ensemble changes in memory until it closes the ledger (LedgerRecoveryOp).

A writer that cannot reach a write quorum ends with an error, never retries for ever: the ensemble
change runs out of replacements (bookies that failed it are not taken back before its next
acknowledged entry), or passes ``maxNumEnsembleChanges``, or cannot reach ZooKeeper within the doubt
window; and with ``addEntryQuorumTimeoutSec`` an add not acknowledged in time fails the writer
(BKAddEntryQuorumTimeoutException). Any of these stops the handle: every pending append fails with it.

The client's timer drives the time-based parts: ``check_add_timeouts`` (monitorPendingAddOps) and
``flush_explicit_lac_if_due`` (ExplicitLacFlushPolicy).

Metrics (the client's ``bookkeeper_client_ADD_ENTRY``): a pending op acknowledged or failed is one event of its
entries, from their append to their acknowledgement; a read one ``READ_ENTRY`` event (PendingReadOp).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future

from bookie.client.add_batch import AddMessageLimits, frame_and_stripe
from bookie.client.bookie_outbox import BookieOutboxes, InflightBatch
from bookie.client.bookkeeper_client_stats import timed
from bookie.client.distribution_schedule import write_set
from bookie.client.ensemble_change import EnsembleChange, abandon_check, within_doubt_window
from bookie.client.explicit_lac_flush_policy import ExplicitLacFlushPolicy
from bookie.client.handle import Handle
from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_reader import LedgerReader
from bookie.client.pending_add_op import AddFuture, OpenAddRun, PendingAddOp
from bookie.exceptions import (BKAddEntryQuorumTimeoutException, BKException, BKIncorrectParameterException,
                               BKLedgerClosedException,
                               BKLedgerFencedException, BKMessageTooLargeException, BKMetadataVersionException,
                               BKReadException, BKTimeoutException, BKUnauthorizedAccessException, BKWriteException,
                               from_status)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto.columnar_framing import PayloadColumn

log = logging.getLogger(__name__)


class LedgerHandle(Handle):
    """A ledger open for writing. Thread-safe; ``append`` blocks, ``append_async`` returns a future."""

    def __init__(self, bk, ledger: LedgerId, versioned: Versioned[LedgerMetadata], password: bytes,
                 recovery: bool = False, last_add_confirmed: int = -1, length: int = 0):
        md = versioned.value
        self.bk = bk
        self.conf = bk.conf
        self.ledger = ledger
        self._versioned = versioned
        self.digest = DigestManager(ledger, password, md.digest_type)
        self.master_key = generate_master_key(password)
        self.reader = LedgerReader(bk, ledger, self.digest)
        self.ensemble_size, self.write_quorum, self.ack_quorum = md.ensemble_size, md.write_quorum_size, md.ack_quorum_size
        self.ensemble: list[str] = list(md.last_ensemble)
        self._write_sets = [tuple(write_set(e, self.ensemble_size, self.write_quorum)) for e in range(self.ensemble_size)]
        self.recovery = recovery
        self.last_add_pushed = self.last_add_confirmed = last_add_confirmed
        self.length = length  # through the last entry pushed (BookKeeper's LedgerHandle.length)
        self.confirmed_length = length  # through the LAC: what close records
        # The largest add message a bookie takes; each message's framed entries stay within it.
        self.limits = AddMessageLimits.of(self.conf, self.digest)
        # What every append checks, read once (the configuration is fixed for the handle's life).
        self._max_pending = self.conf.maxPendingAdds
        self._quorum_timeout = self.conf.addEntryQuorumTimeoutSec
        self._max_payload, self._entry_overhead = self.limits.max_payload, self.limits.entry_overhead
        self._run_entries, self._run_bytes = self.limits.max_entries, self.limits.entry_bytes
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._pending: deque[PendingAddOp] = deque()
        self._open: OpenAddRun | None = None  # single appends after the last of _pending, not framed yet
        self._pending_entries = 0  # entries appended and not yet acknowledged or failed (_pending and _open)
        self._outboxes = BookieOutboxes(self.ensemble_size, self.conf, self.limits.entry_bytes)
        self._ensemble_change = EnsembleChange(self)
        self._error: BKException | None = None  # set once the handle can take no more adds
        self._closing: Future | None = None  # set when close starts: from then on appends fail
        self._closed = False
        self._lac_flush = ExplicitLacFlushPolicy(self.conf.explicitLacInterval, last_add_confirmed)
        self._stats = bk.client_stats
        bk.register_writer(self)

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> BKException | None:
        """Why the handle can take no more appends (None while it can)."""
        return self._error

    def unanswered(self) -> dict[str, int]:
        """Per bookie of the current ensemble, the entries it has not answered yet (waiting to be sent, or
        in flight): with AQ < WQ an entry is acknowledged while a slow bookie still owes its answer."""
        with self._lock:
            return {bookie: self._outboxes.unanswered(i) for i, bookie in enumerate(self.ensemble)}

    @property
    def recovery_ensembles(self) -> dict[int, tuple[str, ...]]:
        """A recovering handle's new fragments (first entry -> ensemble), for the recovery's close."""
        return dict(self._ensemble_change.from_recovery)

    @property
    def pending_adds(self) -> int:
        """Entries appended and not yet acknowledged or failed: at most ``maxPendingAdds``; an append
        that would go past it blocks until acknowledgements make room (back-pressure)."""
        return self._pending_entries

    @property
    def max_payload(self) -> int:
        """The largest entry a bookie takes (one add message, nettyMaxFrameSizeBytes)."""
        return self.limits.max_payload

    # -- adds ---------------------------------------------------------------------------------------
    def append(self, payload: bytes) -> int:
        """Append and wait until AQ bookies have the entry durably; returns its entry id."""
        return self.append_async(payload).result()

    def append_async(self, payload: bytes) -> Future:
        """Append; the future (an AddFuture) gives the entry id once acknowledged. Futures complete in
        entry order."""
        if type(payload) is not bytes or len(payload) > self._max_payload:
            self.limits.pieces(self.ledger, [payload])  # refuses what is not bytes-like or too large
            payload = bytes(payload)  # framed later: the caller may reuse a bytearray meanwhile
        size = len(payload)
        future = AddFuture()
        with self._lock:
            if self._pending_entries >= self._max_pending:
                self._wait_for_room()
            if self._error is not None or self._closing is not None:
                self._check_open()
            run = self._open
            if run is not None and (len(run.payloads) >= self._run_entries
                                    or run.size + size + self._entry_overhead > self._run_bytes):
                self._seal()  # one more would not fit in one add message
                run = None
            if run is None:
                run = self._open = OpenAddRun(self.last_add_pushed + 1, self.length)
                # A run that already existed proves no bookie has room: room comes back only with an
                # answer or an ensemble change, and both take what is sendable, sealing the run first.
                check_room = True
            else:
                check_room = False
            self.last_add_pushed += 1
            self.length += size
            run.payloads.append(payload)
            run.futures.append(future)
            run.size += size + self._entry_overhead
            self._pending_entries += 1
            batches = self._take_sendable() if check_room and self._outboxes.has_room() else ()
        if batches:
            self._send(batches)
        return future

    def append_batch(self, payloads) -> Future:
        """Append many entries at once (consecutive ids); the future gives ``range(first, last + 1)`` once all
        are acknowledged. The cheap way to append a lot: one pending operation per batch, not per entry.
        ``payloads``: bytes-like objects, or a ``PayloadColumn`` (one buffer and its offsets, as an Arrow
        binary column holds them: no Python object per entry)."""
        if not isinstance(payloads, PayloadColumn):
            payloads = list(payloads)
        if not payloads:
            raise BKIncorrectParameterException(f"ledger {self.ledger}: append_batch of no entries")
        return self._add(None, payloads, batch=True)

    def _add(self, entry_id: int | None, payloads: list, batch: bool = False) -> Future:
        cuts = self.limits.pieces(self.ledger, payloads)
        future = AddFuture()
        with self._lock:
            self._wait_for_room()
            self._check_open()
            if self._open is not None:
                self._seal()  # its entries come before these
            first = self._next_entry_id(entry_id, len(payloads))
            for start, end in zip(cuts, cuts[1:]):  # pieces no bigger than one add message
                last_piece = end == len(payloads)
                op = self._make_op(first + start, payloads[start:end], future if last_piece else None,
                                   first if batch else None)
                self._enqueue(op)
                self._outboxes.add(op)
            self._pending_entries += len(payloads)
            self._lac_flush.add_sent(time.monotonic())
            batches = self._take_sendable() if self._outboxes.has_sendable() else ()
        if batches:
            self._send(batches)
        return future

    def _wait_for_room(self) -> None:
        """Back-pressure (lock held): block while ``maxPendingAdds`` entries are in flight, unless the handle
        failed or is closing (the caller then refuses the append)."""
        while self._pending_entries >= self._max_pending and self._error is None and self._closing is None:
            self._changed.wait()

    def _make_op(self, first: int, payloads: list, future: Future | None, result_first: int | None) -> PendingAddOp:
        """Frame ``payloads`` as entries ``first..`` and split them by the bookies that store them (lock held)."""
        parts, quorums, self.length = frame_and_stripe(self.digest, first, self.last_add_confirmed, self.length,
                                                       payloads, self._write_sets)
        return PendingAddOp(first, first + len(payloads) - 1, self.length, parts, future, quorums, result_first)

    def _seal(self) -> None:
        """Frame the open run of single appends into a pending op in the outboxes (lock held)."""
        op = self._open.seal(self.digest, self.last_add_confirmed, self._write_sets)
        self._open = None
        self._pending.append(op)
        self._outboxes.add(op)
        self._lac_flush.add_sent(time.monotonic())

    def _next_entry_id(self, entry_id: int | None, count: int) -> int:
        """The id of the first of ``count`` new entries (lock held; LedgerHandleAdv takes the writer's)."""
        first = self.last_add_pushed + 1
        self.last_add_pushed += count
        return first

    def _enqueue(self, op: PendingAddOp) -> None:
        """Queue ``op`` for completion in entry order (lock held; LedgerHandleAdv sorts)."""
        self._pending.append(op)

    def _check_open(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._closing is not None:
            raise BKLedgerClosedException(f"ledger {self.ledger} is "
                                              f"{'closed' if self._closed else 'being closed'}: no more appends")

    def _take_sendable(self) -> list[InflightBatch]:
        """Batches that may go out now, the open run framed first (caller holds the lock)."""
        if self._error is not None:
            return []
        if self._open is not None:
            self._seal()
        return self._outboxes.take_sendable(self.ensemble)

    def _send(self, batches: list[InflightBatch]) -> None:
        for batch in batches:
            try:
                future = self.bk.bookie_client(batch.bookie).add(self.ledger, self.master_key, batch.parts(),
                                                                  self.recovery)
            except BKException as exc:
                self._batch_failed(batch, exc)
                continue
            future.add_done_callback(lambda f, b=batch: self._batch_done(b, f))

    def _batch_done(self, batch: InflightBatch, future: Future) -> None:
        try:
            response = future.result()
        except BKException as exc:
            self._batch_failed(batch, exc)
            return
        if response.status != status.EOK:
            self._batch_failed(batch, from_status(
                response.status, BKWriteException,
                f"add of entries {batch.ops[0].entry_id}..{batch.ops[-1].last_id} of ledger {self.ledger} "
                f"to bookie {batch.bookie}: {response.message}"))
            return
        with self._lock:
            if not self._outboxes.retire(batch, self.ensemble):
                return
            for op in batch.ops:
                op.ack(batch.index)
            done = self._pop_completed()
            batches = self._take_sendable()
        self.bk.complete_in_order(done)
        self._send(batches)

    def _batch_failed(self, batch: InflightBatch, error: BKException) -> None:
        with self._lock:
            if not self._outboxes.retire(batch, self.ensemble) or self._error is not None or self.bk.closed:
                return  # stale, already failed, or the client is shutting down (its streams are cancelled)
            if isinstance(error, (BKLedgerFencedException, BKUnauthorizedAccessException)):
                failed = self._fail(BKLedgerFencedException(
                    f"ledger {self.ledger} was fenced (bookie {batch.bookie}: {error}): another client opened it "
                    "for recovery; this writer can add nothing more"))
            elif isinstance(error, BKMessageTooLargeException):
                # The bookie is healthy; replacing it would only move the same refusal to the next one.
                failed = self._fail(error)
            else:
                self._log_bookie_failure(batch, error)
                self.bk.bookie_failed(batch.bookie)
                self.reader.bookie_failed(batch.bookie)
                self._ensemble_change.bookie_failed(batch.bookie, error)
                # Its unacknowledged entries go to the replacement, with the rest of its outbox.
                self._outboxes.bookie_failed(batch.index, self._pending)
                failed = []
                self._ensemble_change.start()
        self.bk.fail_all(failed)

    def _log_bookie_failure(self, batch: InflightBatch, error: BKException) -> None:
        """A warning when a batch to ``batch.bookie`` fails first; the other batches in flight to it (up to
        maxInflightBatchesPerBookie) fail with it until the ensemble change replaces it: debug only. A later
        failure of its replacement is a new one, warned about again (caller holds the lock)."""
        if batch.index in self._outboxes.failed:
            log.debug("ledger %s: bookie %s failed again (%s)", self.ledger, batch.bookie, error)
        else:
            log.warning("ledger %s: bookie %s failed (%s); changing the ensemble", self.ledger, batch.bookie, error)

    def _pop_completed(self) -> list[PendingAddOp]:
        """Entries acknowledged in order from the head; the LAC moves with them (caller holds the lock)."""
        done = []
        if self._ensemble_change.running:
            return done
        lac = self.last_add_confirmed
        now, added = time.monotonic(), self._stats.add_op
        while self._pending and self._pending[0].is_complete(self.ack_quorum) \
                and self._pending[0].entry_id == self.last_add_confirmed + 1:
            op = self._pending.popleft()
            self.last_add_confirmed = op.last_id
            self.confirmed_length = op.length
            self._pending_entries -= op.count
            added.register_successful_event(now - op.started, op.count)
            if op.has_futures:
                done.append(op)
        if self.last_add_confirmed != lac:
            self._ensemble_change.progressed()
        if done:
            self._changed.notify_all()
        return done

    def fail_all_pending(self, error: BKException) -> None:
        """Stop the handle: every pending append fails with ``error`` (the client is closing)."""
        with self._lock:
            failed = self._fail(error)
        self.bk.fail_all(failed)

    def _fail(self, error: BKException) -> list[tuple[Future, Exception]]:
        """Stop the handle: every pending add fails with ``error`` (caller holds the lock)."""
        self._error = error
        now, added = time.monotonic(), self._stats.add_op
        for op in self._pending:
            added.register_failed_event(now - op.started, op.count)
        failed = [(future, error) for op in self._pending for future in op.all_futures()]
        if self._open is not None:
            added.register_failed_event(now - self._open.started, len(self._open.payloads))
            failed += [(future, error) for future in self._open.futures]
            self._open = None
        self._pending.clear()
        self._pending_entries = 0
        self.length = self.confirmed_length  # failed entries are not part of the ledger
        self._outboxes.clear()
        self._changed.notify_all()
        return failed

    # -- timeouts, explicit LAC (driven by the client's timer) ---------------------------------------------
    def check_add_timeouts(self, now: float) -> None:
        """A bookie that has not answered a batch within addEntryTimeout is replaced; an add not acknowledged
        within addEntryQuorumTimeoutSec fails the writer (monitorPendingAddOps)."""
        with self._lock:
            if self._quorum_timeout > 0 and self._error is None:
                failed = self._check_quorum_timeout(now)
                if failed is not None:
                    stale = []
                else:
                    stale = self._outboxes.timed_out(now, self.conf.addEntryTimeout)
            else:
                failed, stale = None, self._outboxes.timed_out(now, self.conf.addEntryTimeout)
        if failed:
            self.bk.fail_all(failed)
        for batch in stale:
            self._batch_failed(batch, BKTimeoutException(
                f"bookie {batch.bookie} did not acknowledge entries {batch.ops[0].entry_id}.. of ledger {self.ledger} "
                f"within addEntryTimeout {self.conf.addEntryTimeout:.1f} s"))

    def _check_quorum_timeout(self, now: float) -> list[tuple[Future, Exception]] | None:
        """Fail the writer if its oldest add not yet acknowledged by AQ bookies is older than
        addEntryQuorumTimeoutSec (PendingAddOp.timeoutQuorumWait: BookKeeper's errorOutPendingAdds); None if
        none is (lock held). Ops are queued as appended, so the first incomplete one is the oldest."""
        oldest = next((op for op in self._pending if not op.is_complete(self.ack_quorum)), None)
        if oldest is None:
            oldest = self._open
        if oldest is None or now - oldest.started < self._quorum_timeout:
            return None
        return self._fail(BKAddEntryQuorumTimeoutException(self._quorum_wait(oldest)))

    def _quorum_wait(self, op) -> str:
        """Why ``op`` (a PendingAddOp, or the OpenAddRun not sent yet) is not acknowledged: each bookie of
        its write set and what it answered (lock held)."""
        change = self._ensemble_change
        if isinstance(op, PendingAddOp):
            indexes, acked = op.write_set, op.acked
        else:
            indexes, acked = range(self.ensemble_size), ()
        states = []
        for i in indexes:
            bookie = self.ensemble[i]
            if i in acked:
                state = "acknowledged"
            elif i in self._outboxes.failed:
                state = f"failed ({change.failures.get(bookie, 'unknown')}), not replaced yet"
            elif isinstance(op, PendingAddOp):
                state = "no answer"
            else:
                state = "not sent (no bookie had room for another message)"
            earlier = [o for _, o, n in change.replaced if n == bookie]
            if earlier:
                state += f", in place of {change.named(earlier)}"
            states.append(f"{bookie}: {state}")
        return (f"ledger {self.ledger}: entries {op.entry_id}..{op.last_id} were not acknowledged by "
                f"{self.ack_quorum} bookies of their write set within addEntryQuorumTimeoutSec "
                f"{self._quorum_timeout:g} s ({'; '.join(states)}); the writer stops: appends of entries "
                f"{op.entry_id}..{self.last_add_pushed} fail")

    def flush_explicit_lac_if_due(self, now: float) -> None:
        """Send the LAC to the bookies if the writer is idle and they may not know it (ExplicitLacFlushPolicy)."""
        with self._lock:
            lac = self.last_add_confirmed
            if not self._lac_flush.flush_due(now, lac, bool(self._pending)):
                return
            ensemble = list(self.ensemble)
        self.write_lac(lac, ensemble)

    def write_lac(self, lac: int | None = None, ensemble: list[str] | None = None) -> None:
        """Tell the bookies of the current ensemble the LAC (WriteLac), so tailing readers see the last entry."""
        lac = self.last_add_confirmed if lac is None else lac
        body = self.digest.build_lac(lac)
        started, failed = time.monotonic(), False
        for bookie in ensemble or list(self.ensemble):
            try:
                self.bk.bookie_client(bookie).write_lac(self.ledger, self.master_key, lac, body)
            except BKException as exc:
                failed = True
                log.warning("explicit LAC of ledger %s to bookie %s failed: %s", self.ledger, bookie, exc)
        (self._stats.write_lac_op.register_failed_event if failed else
         self._stats.write_lac_op.register_successful_event)(time.monotonic() - started)

    # -- reads --------------------------------------------------------------------------------------
    def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` (up to the LAC) of this ledger."""
        if first < 0 or last < first or last > self.last_add_confirmed:
            raise BKReadException(f"ledger {self.ledger}: cannot read {first}..{last}; readable entries are "
                                      f"0..{self.last_add_confirmed}")
        return timed(self._stats.read_op, lambda: self.reader.read_range(self.metadata, first, last))

    def read_last_add_confirmed(self) -> int:
        return self.last_add_confirmed

    # -- close --------------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Wait until every append so far is acknowledged (or failed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while (self._pending or self._open is not None) and self._error is None:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise BKTimeoutException(f"ledger {self.ledger}: {len(self._pending)} appends still pending")
                self._changed.wait(left)

    def close(self) -> None:
        """Wait for pending appends, then record CLOSED with the last entry id and length.

        Appends fail from the moment close starts, so everything acknowledged is inside the closed
        ledger. Idempotent: a later (or concurrent) close reports what the first one did.
        """
        with self._lock:
            closing = self._closing
            if closing is None:
                self._closing = Future()
                self._changed.notify_all()  # appends waiting for room fail now
        if closing is not None:
            closing.result()
            return
        try:
            self._close()
        except BaseException as exc:
            self._closing.set_exception(exc)
            raise
        self._closing.set_result(None)

    def _close(self) -> None:
        self.drain(self.conf.addEntryTimeout * 4)
        with self._lock:
            self._closed = True
            error = self._error
            lac, length = self.last_add_confirmed, self.confirmed_length
            self._changed.notify_all()
        self.bk.unregister_writer(self)
        if self.recovery:
            return

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            if md.state is LedgerState.IN_RECOVERY:
                raise BKLedgerFencedException(f"ledger {self.ledger} is being recovered by another client; "
                                                  "this writer cannot close it")
            return md.with_state(LedgerState.CLOSED, lac, length)

        versioned = within_doubt_window(self.conf, f"close of ledger {self.ledger} at entry {lac}", lambda abandoned:
                                        update_ledger_metadata(self.bk.store, self.ledger, self._versioned,
                                                               lambda md: not md.is_closed,
                                                               abandon_check(abandoned, transform), doubt_window(self.conf)))
        md = versioned.value
        if (md.last_entry_id, md.length) != (lac, length):
            raise BKMetadataVersionException(
                f"ledger {self.ledger} was closed by another client at entry {md.last_entry_id} (length {md.length}); "
                f"this writer had {lac} (length {length})" + (f": {error}" if error else ""))
        self._versioned = versioned
        if error is not None:
            raise error
