"""A writer's ensemble change (LedgerHandle.ensembleChangeLoop, recorded by MetadataUpdateLoop).

A bookie error or timeout marks the bookie failed in the handle's outboxes and starts the change
(``EnsembleChange.start``, lock held). One change runs at a time on the client's executor: the failed
bookies are replaced, a new fragment starts at LAC+1 (a metadata compare-and-set, re-read and retried
on conflict; while recovering, in memory and in ``from_recovery``, which the recovery's close applies
to the fresh metadata), and every pending entry of that fragment is (re)sent to
the replacement. While it runs (``running``) the handle completes nothing, so an entry is never
acknowledged with a copy on a bookie the metadata no longer names.

How it ends when bookies cannot be reached (each error names the ledger, the entries that fail and
the bookies with their failures):
- With ``enableBookieFailureTracking`` a bookie that failed this writer is never its replacement again
  until the writer's next acknowledged entry: when every writable bookie has failed it, the change
  fails with BKNotEnoughBookiesException instead of cycling through them for ever.
- The change past ``maxNumEnsembleChanges`` fails with BKWriteException.
- The metadata write waits at most the doubt window (``within_doubt_window``) for ZooKeeper.
Metadata found IN_RECOVERY or CLOSED stops the writer too.
"""
from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import Future
from typing import TYPE_CHECKING, Callable, TypeVar

from bookie.client.ensemble_placement import replace_bookies
from bookie.exceptions import (BKException, BKInterruptedException, BKLedgerClosedException, BKLedgerFencedException,
                               BKNotEnoughBookiesException, BKWriteException, BKZKConnectionLossException,
                               BKZKException)
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata

if TYPE_CHECKING:
    from bookie.client.ledger_handle import LedgerHandle

log = logging.getLogger(__name__)
T = TypeVar("T")
REPLACEMENTS_NAMED = 20  # the latest replacements a maxNumEnsembleChanges error lists


def within_doubt_window(conf, what: str, update: Callable[[threading.Event], T]) -> T:
    """``update(abandoned)`` on a thread of its own, waited for at most the doubt window (``doubt_window``:
    two zkTimeouts, or zkConnectTimeout if longer); then BKZKConnectionLossException, the change in doubt.

    kazoo queues a request made while it reconnects and waits for its answer without a deadline, so one
    call of the metadata store blocks for as long as ZooKeeper cannot be reached; a writer must not.
    ``abandoned`` is set when the caller gives up: ``update`` must then write nothing more (its transform
    checks it; see ``abandon_check``). A write already sent may still land: the change is in doubt,
    as after any lost reply."""
    seconds = doubt_window(conf)
    abandoned = threading.Event()
    outcome: Future = Future()

    def run() -> None:
        try:
            outcome.set_result(update(abandoned))
        except BaseException as exc:  # noqa: B902 - handed to the waiting caller
            outcome.set_exception(exc)

    threading.Thread(target=run, name="bk-metadata-update", daemon=True).start()
    try:
        return outcome.result(timeout=seconds)
    except TimeoutError:
        abandoned.set()
        raise BKZKConnectionLossException(
            f"{what}: ZooKeeper did not answer within {seconds:.1f} s (the doubt window: two zkTimeouts, or "
            "zkConnectTimeout if longer); the change is in doubt (it may still land)") from None


def abandon_check(abandoned: threading.Event, transform: Callable[[LedgerMetadata], LedgerMetadata]):
    """``transform``, refusing once ``abandoned`` is set (not a connection loss: the update loop would retry)."""
    def checked(md: LedgerMetadata) -> LedgerMetadata:
        if abandoned.is_set():
            raise BKInterruptedException("the metadata update was abandoned after the doubt window")
        return transform(md)
    return checked


class EnsembleChange:
    """The ensemble change of one writing handle: ``start`` it when a bookie fails; ``running`` holds
    completions back until the new ensemble is recorded and the pending entries are re-sent."""

    def __init__(self, lh: LedgerHandle):
        self.lh = lh
        self.running = False
        self.changes = 0  # counted against maxNumEnsembleChanges
        # A recovering handle's new fragments, first entry -> ensemble (ReadOnlyLedgerHandle's
        # newEnsemblesFromRecovery): all the recovery may write into the metadata besides closing it.
        self.from_recovery: dict[int, tuple[str, ...]] = {}
        self.failures: dict[str, str] = {}  # bookie -> how it last failed this writer
        # Bookies that failed this writer since its last acknowledged entry: never a replacement (with
        # enableBookieFailureTracking), so a writer that reaches no bookie runs out of them and fails.
        self.since_progress: set[str] = set()
        self.replaced: deque[tuple[int, str, str]] = deque(maxlen=REPLACEMENTS_NAMED)  # (first entry, old, new)

    # -- what the handle tells it (handle lock held) -------------------------------------------------
    def bookie_failed(self, bookie: str, error: BaseException) -> None:
        self.failures[bookie] = f"{type(error).__name__}: {error}"
        if self.lh.conf.enableBookieFailureTracking:
            self.since_progress.add(bookie)

    def progressed(self) -> None:
        """The writer's LAC advanced: the bookies that failed before may be tried again."""
        if self.since_progress:
            self.since_progress.clear()

    def named(self, bookies) -> str:
        """Bookies with how each failed this writer: ``a (BKTimeoutException: ...), b``."""
        return ", ".join(f"{b} ({self.failures[b]})" if b in self.failures else b for b in bookies)

    def start(self) -> None:
        """Run the change on the client's executor unless one is running (caller holds the handle's lock)."""
        if not self.running:
            self.running = True
            self.lh.bk.executor.submit(self._run)

    # -- the change --------------------------------------------------------------------------------------
    def _run(self) -> None:
        lh = self.lh
        while True:
            with lh._lock:
                failed = set(lh._outboxes.failed)
                if not failed or lh._error is not None:
                    self.running = False
                    done = lh._pop_completed()
                    batches = lh._take_sendable()
                    break
                start = lh.last_add_confirmed + 1
                old = list(lh.ensemble)
                tried = set(self.since_progress)
            try:
                self.changes += 1
                if self.changes > lh.conf.maxNumEnsembleChanges:
                    raise BKWriteException(self._too_many(start, old, failed))
                writable = lh.bk.writable_bookies(grpc_only=lh.ledger.scope_id != 0)
                try:
                    new = replace_bookies(writable, old, failed, lh.bk.quarantined(), tried)
                except BKNotEnoughBookiesException:
                    raise BKNotEnoughBookiesException(self._no_replacement(start, old, failed, writable, tried)) from None
                try:
                    versioned = self._record(start, tuple(new))
                except BKZKException as exc:
                    raise type(exc)(f"ledger {lh.ledger}: the ensemble change replacing "
                                    f"{self.named(sorted(old[i] for i in failed))} from entry {start} on could not "
                                    f"be recorded ({exc}); appends of entries {start}..{lh.last_add_pushed} "
                                    "fail") from None
            except BKException as exc:
                with lh._lock:
                    self.running = False
                    failed_ops = lh._fail(exc) if lh._error is None else []
                lh.bk.fail_all(failed_ops)
                return
            with lh._lock:
                log.info("ledger %s: new fragment from entry %d: %s (was %s)", lh.ledger, start, new, old)
                lh._versioned = versioned
                lh.ensemble = new
                for i in failed:
                    self.replaced.append((start, old[i], new[i]))
                    for op in lh._pending:  # entries of the new fragment must be on the new bookie
                        if i in op.write_set and op.entry_id >= start:
                            op.acked.discard(i)
                    lh._outboxes.bookie_replaced(i, lh._pending)
        lh.bk.complete_in_order(done)
        lh._send(batches)

    def _too_many(self, start: int, old: list[str], failed: set[int]) -> str:
        lh = self.lh
        replaced = "; ".join(f"{o} -> {n} from entry {e}" + (f" ({self.failures[o]})" if o in self.failures else "")
                             for e, o, n in self.replaced) or "none"
        return (f"ledger {lh.ledger}: ensemble change {self.changes} would exceed maxNumEnsembleChanges "
                f"{lh.conf.maxNumEnsembleChanges}; appends of entries {start}..{lh.last_add_pushed} fail. Bookies "
                f"replaced so far: {replaced}. Failing now: {self.named(sorted(old[i] for i in failed))}")

    def _no_replacement(self, start: int, old: list[str], failed: set[int], writable: list[str], tried: set[str]) -> str:
        lh = self.lh
        dead = sorted(old[i] for i in failed)
        earlier = sorted(tried - set(dead))  # failed it before (registered or not any more), not taken back
        fresh = sorted(b for b in writable if b not in old and b not in tried)
        text = f"ledger {lh.ledger}: cannot replace failed bookie(s) {self.named(dead)} of ensemble {', '.join(old)} from entry {start} on"
        if earlier:
            text += f"; failed this writer since its last acknowledged entry too: {self.named(earlier)}"
        return (text + f"; other writable bookies: {', '.join(fresh) or 'none'}. Needs {len(failed)} more writable "
                f"bookie(s) outside that ensemble; appends of entries {start}..{lh.last_add_pushed} fail")

    def _record(self, start: int, new: tuple[str, ...]) -> Versioned[LedgerMetadata]:
        """The new fragment in the metadata (MetadataUpdateLoop); in memory only while recovering."""
        lh = self.lh
        if lh.recovery:
            self.from_recovery = {first: bookies for first, bookies in self.from_recovery.items() if first < start}
            self.from_recovery[start] = new
            return Versioned(lh._versioned.value.with_ensemble(start, new), lh._versioned.version)

        def transform(md: LedgerMetadata) -> LedgerMetadata:
            if md.state is LedgerState.IN_RECOVERY:
                raise BKLedgerFencedException(f"ledger {lh.ledger} is being recovered by another client: "
                                              "this writer can add nothing more")
            if md.state is LedgerState.CLOSED:
                raise BKLedgerClosedException(f"ledger {lh.ledger} was closed by another client")
            return md.with_ensemble(start, new)

        return within_doubt_window(lh.conf, f"ensemble change of ledger {lh.ledger}", lambda abandoned: update_ledger_metadata(
            lh.bk.store, lh.ledger, lh._versioned, lambda md: md.ensembles[-1] != (start, new),
            abandon_check(abandoned, transform), doubt_window(lh.conf)))
