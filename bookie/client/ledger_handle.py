"""Writing a ledger (LedgerHandle, PendingAddOp, the ensemble change of LedgerHandle.ensembleChangeLoop).

An append takes the next entry id, is framed with the current LAC and length, and joins the outbox
of every bookie of its write set. Each bookie gets its entries in batches on its add stream: a batch
goes out as soon as fewer than ``maxInflightBatchesPerBookie`` are in flight to that bookie, so a
lone append travels alone (low latency) and a busy writer's entries pile up into large batches.

An entry is acknowledged when AQ bookies of its write set have it (fsynced); futures complete
strictly in entry order, on the client's completion thread, and the LAC advances with them.

A bookie error or timeout starts an ensemble change: the bookie is replaced, a new fragment starts
at LAC+1 (a metadata compare-and-set; re-read and retried on conflict), and every pending entry of
that fragment is (re)sent to the replacement. Nothing completes while the change runs, so an entry
is never acknowledged with a copy on a bookie the metadata no longer names. Metadata found
IN_RECOVERY or CLOSED stops the writer (BKLedgerFencedException / BKLedgerClosedException), as does
a bookie answering EFENCED. A recovering handle (``recovery=True``) sends RECOVERY_ADDs and keeps its
ensemble changes in memory until it closes the ledger (LedgerRecoveryOp).
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from concurrent.futures import Future
from dataclasses import dataclass

from bookie.client.distribution_schedule import write_set
from bookie.client.ensemble_placement import replace_bookie
from bookie.client.handle import Handle
from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_reader import LedgerReader
from bookie.exceptions import (BKDuplicateEntryIdException, BKException, BKIllegalOpException,
                               BKIncorrectParameterException, BKLedgerClosedException, BKLedgerFencedException,
                               BKMessageTooLargeException, BKMetadataVersionException,
                               BKNotEnoughBookiesException, BKReadException, BKTimeoutException,
                               BKUnauthorizedAccessException, BKWriteException, from_status)
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata
from bookie.proto import entry_format
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key

log = logging.getLogger(__name__)
# Room an AddRequest needs around its entries (ids, master key, flags): what is left of the bookie's
# largest message (nettyMaxFrameSizeBytes) carries the framed entries.
ADD_REQUEST_RESERVE = 1024


class PendingAdd:
    """Appended entries in flight together: consecutive ids, framed, with one set of acks per bookie.

    ``parts[i]`` is what bookie index i stores of them (all of them when E == WQ; with striping, the
    entries whose write set holds i). They are acknowledged when, for every write set they use, AQ of
    its bookies have answered. ``future`` (None for the inner pieces of a split batch) gets the entry
    id, or ``range(result_first, last_id + 1)`` for a batch. ``length`` is the ledger's length through
    ``last_id``.
    """

    __slots__ = ("entry_id", "last_id", "length", "parts", "future", "write_set", "quorums", "acked", "result_first")

    def __init__(self, entry_id: int, last_id: int, length: int, parts: dict[int, bytes], future: Future | None,
                 quorums: tuple[tuple[int, ...], ...], result_first: int | None = None):
        self.entry_id = entry_id
        self.last_id = last_id
        self.length = length
        self.parts = parts
        self.future = future
        self.write_set = tuple(parts)
        self.quorums = quorums
        self.acked: set[int] = set()
        self.result_first = result_first

    @property
    def count(self) -> int:
        return self.last_id - self.entry_id + 1

    def done(self, ack_quorum: int) -> bool:
        acked = self.acked
        return all(sum(1 for i in ws if i in acked) >= ack_quorum for ws in self.quorums)

    def result(self):
        return self.entry_id if self.result_first is None else range(self.result_first, self.last_id + 1)


@dataclass(eq=False)
class _Batch:
    index: int
    bookie: str
    ops: list[PendingAdd]
    sent: float


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
        self.max_message_entries = self.conf.nettyMaxFrameSizeBytes - ADD_REQUEST_RESERVE
        self.max_payload = self.max_message_entries - entry_format.FRAME_LEN - self.digest.header_len - self.digest.mac_length
        self._lock = threading.RLock()
        self._changed = threading.Condition(self._lock)
        self._pending: deque[PendingAdd] = deque()
        self._pending_entries = 0
        self._outbox: list[list[PendingAdd]] = [[] for _ in range(self.ensemble_size)]
        self._inflight: list[list[_Batch]] = [[] for _ in range(self.ensemble_size)]
        self._failed: set[int] = set()  # ensemble indexes waiting to be replaced
        self._changing = False
        self._ensemble_changes = 0
        self._error: BKException | None = None  # set once the handle can take no more adds
        self._closing: Future | None = None  # set when close starts: from then on appends fail
        self._closed = False
        self._last_add_time = time.monotonic()
        self._explicit_lac_sent = last_add_confirmed
        bk._register_writer(self)

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def error(self) -> BKException | None:
        """Why the handle can take no more appends (None while it can)."""
        return self._error

    # -- adds ---------------------------------------------------------------------------------------
    def append(self, payload: bytes) -> int:
        """Append and wait until AQ bookies have the entry durably; returns its entry id."""
        return self.append_async(payload).result()

    def append_async(self, payload: bytes) -> Future:
        """Append; the future gives the entry id once acknowledged. Futures complete in entry order."""
        return self._add(None, [payload])

    def append_batch(self, payloads) -> Future:
        """Append many entries at once (consecutive ids); the future gives ``range(first, last + 1)`` once all
        are acknowledged. The cheap way to append a lot: one pending operation per batch, not per entry."""
        payloads = list(payloads)
        if not payloads:
            raise BKIncorrectParameterException(f"ledger {self.ledger}: append_batch of no entries")
        return self._add(None, payloads, batch=True)

    def _add(self, entry_id: int | None, payloads: list, batch: bool = False) -> Future:
        cuts = self._pieces(payloads)
        future = Future()
        with self._lock:
            while self._pending_entries >= self.conf.maxPendingAdds and self._error is None and self._closing is None:
                self._changed.wait()  # back-pressure: too many entries in flight
            self._check_open()
            first = self._next_entry_id(entry_id, len(payloads))
            for start, end in zip(cuts, cuts[1:]):  # pieces no bigger than one add message
                last_piece = end == len(payloads)
                op = self._make_op(first + start, payloads[start:end], future if last_piece else None,
                                   first if batch else None)
                self._enqueue(op)
                for i in op.write_set:
                    self._outbox[i].append(op)
            self._pending_entries += len(payloads)
            self._last_add_time = time.monotonic()
            batches = self._take_sendable() if self._sendable() else ()
        if batches:
            self._send(batches)
        return future

    def _pieces(self, payloads: list) -> list[int]:
        """Where to cut ``payloads`` so that each piece fits one add message (at most ``maxBatchEntries``
        entries and the bookie's ``nettyMaxFrameSizeBytes``); checks every payload first, so a bad one
        is refused before any entry id is taken."""
        overhead = entry_format.FRAME_LEN + self.digest.header_len + self.digest.mac_length
        budget, max_entries = self.max_message_entries, self.conf.maxBatchEntries
        cuts, size, count = [0], 0, 0
        for k, payload in enumerate(payloads):
            if not isinstance(payload, (bytes, bytearray, memoryview)):
                raise BKIncorrectParameterException(
                    f"ledger {self.ledger}: a payload is bytes, not {type(payload).__name__}")
            n = len(payload)
            if n > self.max_payload:
                raise BKIncorrectParameterException(
                    f"ledger {self.ledger}: an entry of {n} bytes is larger than a bookie takes: at most "
                    f"{self.max_payload} bytes fit in one add message (nettyMaxFrameSizeBytes = "
                    f"{self.conf.nettyMaxFrameSizeBytes}); split the payload, or raise nettyMaxFrameSizeBytes on the "
                    "bookies and this client alike")
            if count and (count == max_entries or size + n + overhead > budget):
                cuts.append(k)
                size = count = 0
            size += n + overhead
            count += 1
        cuts.append(len(payloads))
        return cuts

    def _make_op(self, first: int, payloads: list, future: Future | None, result_first: int | None) -> PendingAdd:
        """Frame ``payloads`` as entries ``first..`` and split them by the bookies that store them (lock held)."""
        E, WQ = self.ensemble_size, self.write_quorum
        frames = []
        lac, length = self.last_add_confirmed, self.length
        for k, payload in enumerate(payloads):
            length += len(payload)
            frames.append(self.digest.build_frame(first + k, lac, length, payload))
        self.length = length
        last = first + len(payloads) - 1
        residues = sorted({e % E for e in range(first, min(last, first + E - 1) + 1)})
        quorums = tuple(self._write_sets[r] for r in residues)
        if len(frames) == 1 or WQ == E:
            blob = frames[0] if len(frames) == 1 else b"".join(frames)
            parts = {i: blob for i in (quorums[0] if len(frames) == 1 else range(E))}
        else:
            parts = {i: b"".join(f for k, f in enumerate(frames) if i in self._write_sets[(first + k) % E])
                     for i in sorted({i for ws in quorums for i in ws})}
        return PendingAdd(first, last, length, parts, future, quorums, result_first)

    def _sendable(self) -> bool:
        """Whether some bookie with entries waiting has room for another batch (caller holds the lock)."""
        limit = self.conf.maxInflightBatchesPerBookie
        return any(box and len(inflight) < limit for box, inflight in zip(self._outbox, self._inflight))

    def _next_entry_id(self, entry_id: int | None, count: int) -> int:
        first = self.last_add_pushed + 1
        self.last_add_pushed += count
        return first

    def _enqueue(self, op: PendingAdd) -> None:
        self._pending.append(op)

    def _check_open(self) -> None:
        if self._error is not None:
            raise type(self._error)(str(self._error))
        if self._closing is not None:
            raise BKLedgerClosedException(f"ledger {self.ledger} is "
                                              f"{'closed' if self._closed else 'being closed'}: no more appends")

    def _take_sendable(self) -> list[_Batch]:
        """Batches that may go out now (caller holds the lock)."""
        batches = []
        if self._error is not None:
            return batches
        for i, outbox in enumerate(self._outbox):
            while outbox and i not in self._failed and len(self._inflight[i]) < self.conf.maxInflightBatchesPerBookie:
                count, entries, size = 0, 0, 0
                while count < len(outbox) and entries < self.conf.maxBatchEntries and size < self.conf.maxBatchBytes:
                    part = len(outbox[count].parts[i])
                    if count and size + part > self.max_message_entries:
                        break  # one more would not fit in one add message (every op alone does)
                    size += part
                    entries += outbox[count].count
                    count += 1
                batch = _Batch(i, self.ensemble[i], outbox[:count], time.monotonic())
                del outbox[:count]
                self._inflight[i].append(batch)
                batches.append(batch)
        return batches

    def _send(self, batches: list[_Batch]) -> None:
        for batch in batches:
            blob = b"".join(op.parts[batch.index] for op in batch.ops)
            try:
                future = self.bk.bookie_client(batch.bookie).add(self.ledger, self.master_key, blob, self.recovery)
            except BKException as exc:
                self._batch_failed(batch, exc)
                continue
            future.add_done_callback(lambda f, b=batch: self._batch_done(b, f))

    def _batch_done(self, batch: _Batch, future: Future) -> None:
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
            if not self._retire(batch):
                return
            for op in batch.ops:
                op.acked.add(batch.index)
            done = self._pop_completed()
            batches = self._take_sendable()
        self.bk.complete_in_order(done)
        self._send(batches)

    def _retire(self, batch: _Batch) -> bool:
        """Forget an in-flight batch; False if it is stale (its bookie was replaced meanwhile)."""
        inflight = self._inflight[batch.index]
        if batch not in inflight:
            return False
        inflight.remove(batch)
        return self.ensemble[batch.index] == batch.bookie

    def _batch_failed(self, batch: _Batch, error: BKException) -> None:
        with self._lock:
            if not self._retire(batch) or self._error is not None or self.bk.closed:
                return  # stale, already failed, or the client is shutting down (its streams are cancelled)
            if isinstance(error, (BKLedgerFencedException, BKUnauthorizedAccessException)):
                failed = self._fail(BKLedgerFencedException(
                    f"ledger {self.ledger} was fenced (bookie {batch.bookie}: {error}): another client opened it "
                    "for recovery; this writer can add nothing more"))
            elif isinstance(error, BKMessageTooLargeException):
                # The bookie is healthy; replacing it would only move the same refusal to the next one.
                failed = self._fail(error)
            else:
                log.warning("ledger %s: bookie %s failed (%s); changing the ensemble", self.ledger, batch.bookie, error)
                self.bk.quarantine(batch.bookie)
                self._failed.add(batch.index)
                # Its unacknowledged entries go to the replacement, with the rest of its outbox.
                self._outbox[batch.index] = [op for op in self._pending
                                             if batch.index in op.write_set and batch.index not in op.acked]
                failed = []
                if not self._changing:
                    self._changing = True
                    self.bk.executor.submit(self._change_ensemble)
        self.bk.fail_all(failed)

    def _pop_completed(self) -> list[PendingAdd]:
        """Entries acknowledged in order from the head; the LAC moves with them (caller holds the lock)."""
        done = []
        if self._changing:
            return done
        while self._pending and self._pending[0].done(self.ack_quorum) \
                and self._pending[0].entry_id == self.last_add_confirmed + 1:
            op = self._pending.popleft()
            self.last_add_confirmed = op.last_id
            self.confirmed_length = op.length
            self._pending_entries -= op.count
            if op.future is not None:
                done.append(op)
        if done:
            self._changed.notify_all()
        return done

    def _fail(self, error: BKException) -> list[tuple[PendingAdd, Exception]]:
        """Stop the handle: every pending add fails with ``error`` (caller holds the lock)."""
        self._error = error
        failed = [(op, error) for op in self._pending if op.future is not None]
        self._pending.clear()
        self._pending_entries = 0
        self.length = self.confirmed_length  # failed entries are not part of the ledger
        for outbox in self._outbox:
            outbox.clear()
        self._changed.notify_all()
        return failed

    # -- ensemble change ------------------------------------------------------------------------------
    def _change_ensemble(self) -> None:
        while True:
            with self._lock:
                failed = set(self._failed)
                if not failed or self._error is not None:
                    self._changing = False
                    done = self._pop_completed()
                    batches = self._take_sendable()
                    break
                start = self.last_add_confirmed + 1
                old = list(self.ensemble)
            try:
                self._ensemble_changes += 1
                if self._ensemble_changes > self.conf.maxNumEnsembleChanges:
                    raise BKWriteException(f"ledger {self.ledger}: more than maxNumEnsembleChanges ensemble changes")
                new = list(old)
                dead = {old[j] for j in failed}
                for i in sorted(failed):
                    try:  # a recently failed (quarantined) bookie only if nothing else will do
                        new[i] = replace_bookie(self.bk.writable_bookies(), new, dead | self.bk.quarantined())
                    except BKNotEnoughBookiesException:
                        new[i] = replace_bookie(self.bk.writable_bookies(), new, dead)
                versioned = self._record_ensemble(start, tuple(new))
            except BKException as exc:
                if isinstance(exc, BKNotEnoughBookiesException):
                    exc = BKNotEnoughBookiesException(
                        f"ledger {self.ledger}: cannot replace failed bookie(s) {', '.join(sorted(dead))} of ensemble "
                        f"{', '.join(old)} from entry {start} on: {exc}. Needs {len(failed)} more writable bookie(s) "
                        "outside that ensemble")
                with self._lock:
                    failed_ops = self._fail(exc)
                    self._changing = False
                self.bk.fail_all(failed_ops)
                return
            with self._lock:
                log.info("ledger %s: new fragment from entry %d: %s (was %s)", self.ledger, start, new, old)
                self._versioned = versioned
                self.ensemble = new
                self._failed -= failed
                for i in failed:
                    self._inflight[i] = []  # their answers come from the replaced bookie: ignored
                    for op in self._pending:  # entries of the new fragment must be on the new bookie
                        if i in op.write_set and op.entry_id >= start:
                            op.acked.discard(i)
                    self._outbox[i] = [op for op in self._pending if i in op.write_set and i not in op.acked]
        self.bk.complete_in_order(done)
        self._send(batches)

    def _record_ensemble(self, start: int, new: tuple[str, ...]) -> Versioned[LedgerMetadata]:
        """The new fragment in the metadata (MetadataUpdateLoop); in memory only while recovering."""
        if self.recovery:
            return Versioned(self._versioned.value.with_ensemble(start, new), self._versioned.version)

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            if md.state is LedgerState.IN_RECOVERY:
                raise BKLedgerFencedException(f"ledger {self.ledger} is being recovered by another client: "
                                                  "this writer can add nothing more")
            if md.state is LedgerState.CLOSED:
                raise BKLedgerClosedException(f"ledger {self.ledger} was closed by another client")
            return md.with_ensemble(start, new)

        return update_ledger_metadata(self.bk.store, self.ledger, self._versioned,
                                      lambda md: md.ensembles[-1] != (start, new), transform, doubt_window(self.conf))

    # -- timeouts, explicit LAC (driven by the client's timer) ---------------------------------------------
    def _check_timeouts(self, now: float) -> None:
        stale = []
        with self._lock:
            for inflight in self._inflight:
                stale += [b for b in inflight if now - b.sent > self.conf.addEntryTimeout]
        for batch in stale:
            self._batch_failed(batch, BKTimeoutException(
                f"bookie {batch.bookie} did not acknowledge entries {batch.ops[0].entry_id}.. of ledger {self.ledger} "
                f"within addEntryTimeout {self.conf.addEntryTimeout:.1f} s"))

    def _maybe_send_explicit_lac(self, now: float) -> None:
        interval = self.conf.explicitLacInterval
        with self._lock:
            lac = self.last_add_confirmed
            if not interval or self._pending or lac <= self._explicit_lac_sent or now - self._last_add_time < interval:
                return
            self._explicit_lac_sent = lac
            ensemble = list(self.ensemble)
        self.write_lac(lac, ensemble)

    def write_lac(self, lac: int | None = None, ensemble: list[str] | None = None) -> None:
        """Tell the bookies of the current ensemble the LAC (WriteLac), so tailing readers see the last entry."""
        lac = self.last_add_confirmed if lac is None else lac
        body = self.digest.build_lac(lac)
        for bookie in ensemble or list(self.ensemble):
            try:
                self.bk.bookie_client(bookie).write_lac(self.ledger, self.master_key, lac, body)
            except BKException as exc:
                log.warning("explicit LAC of ledger %s to bookie %s failed: %s", self.ledger, bookie, exc)

    # -- reads --------------------------------------------------------------------------------------
    def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last`` (up to the LAC) of this ledger."""
        if first < 0 or last < first or last > self.last_add_confirmed:
            raise BKReadException(f"ledger {self.ledger}: cannot read {first}..{last}; readable entries are "
                                      f"0..{self.last_add_confirmed}")
        return self.reader.read_range(self.metadata, first, last)

    def read_last_add_confirmed(self) -> int:
        return self.last_add_confirmed

    # -- close --------------------------------------------------------------------------------------
    def drain(self, timeout: float | None = None) -> None:
        """Wait until every append so far is acknowledged (or failed)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._lock:
            while self._pending and self._error is None:
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
        self.bk._unregister_writer(self)
        if self.recovery:
            return

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            if md.state is LedgerState.IN_RECOVERY:
                raise BKLedgerFencedException(f"ledger {self.ledger} is being recovered by another client; "
                                                  "this writer cannot close it")
            return md.with_state(LedgerState.CLOSED, lac, length)

        versioned = update_ledger_metadata(self.bk.store, self.ledger, self._versioned, lambda md: not md.is_closed,
                                           transform, doubt_window(self.conf))
        md = versioned.value
        if (md.last_entry_id, md.length) != (lac, length):
            raise BKMetadataVersionException(
                f"ledger {self.ledger} was closed by another client at entry {md.last_entry_id} (length {md.length}); "
                f"this writer had {lac} (length {length})" + (f": {error}" if error else ""))
        self._versioned = versioned
        if error is not None:
            raise error


class LedgerHandleAdv(LedgerHandle):
    """A ledger whose writer chooses the entry ids (LedgerHandleAdv): ``add_entry(entry_id, payload)``.

    Entries may arrive in any order; an id at or below the LAC, or already pending, is refused with
    BKDuplicateEntryIdException. Completions still come in entry order.
    """

    def append_async(self, payload: bytes) -> Future:
        raise BKIllegalOpException(f"ledger {self.ledger} was created with create_ledger_adv: use add_entry(entry_id, payload)")

    def add_entry(self, entry_id: int, payload: bytes) -> int:
        return self.add_entry_async(entry_id, payload).result()

    def add_entry_async(self, entry_id: int, payload: bytes) -> Future:
        if not isinstance(entry_id, int) or entry_id < 0:
            raise BKIncorrectParameterException(f"entry id {entry_id!r} is not a non-negative integer")
        return self._add(entry_id, [payload])

    def append_batch(self, payloads) -> Future:
        raise BKIllegalOpException(f"ledger {self.ledger} was created with create_ledger_adv: use add_entry(entry_id, payload)")

    def _next_entry_id(self, entry_id: int | None, count: int) -> int:
        if entry_id <= self.last_add_confirmed or any(op.entry_id == entry_id for op in self._pending):
            raise BKDuplicateEntryIdException(f"ledger {self.ledger}: entry {entry_id} was already added")
        self.last_add_pushed = max(self.last_add_pushed, entry_id)
        return entry_id

    def _enqueue(self, op: PendingAdd) -> None:
        # Keep pending adds ordered by id, so completion stays in entry order.
        pending = self._pending
        if not pending or pending[-1].entry_id < op.entry_id:
            pending.append(op)
            return
        items = sorted([*pending, op], key=lambda o: o.entry_id)
        pending.clear()
        pending.extend(items)
