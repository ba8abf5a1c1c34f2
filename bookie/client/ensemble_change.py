"""A writer's ensemble change (LedgerHandle.ensembleChangeLoop, recorded by MetadataUpdateLoop).

A bookie error or timeout marks the bookie failed in the handle's outboxes and starts the change
(``EnsembleChange.start``, lock held). One change runs at a time on the client's executor: the failed
bookies are replaced, a new fragment starts at LAC+1 (a metadata compare-and-set, re-read and retried
on conflict; while recovering, in memory and in ``from_recovery``, which the recovery's close applies
to the fresh metadata), and every pending entry of that fragment is (re)sent to
the replacement. While it runs (``running``) the handle completes nothing, so an entry is never
acknowledged with a copy on a bookie the metadata no longer names. Metadata found IN_RECOVERY or
CLOSED, too many changes, or no replacement stops the writer.
"""
from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bookie.client.ensemble_placement import replace_bookies
from bookie.exceptions import (BKException, BKLedgerClosedException, BKLedgerFencedException,
                               BKNotEnoughBookiesException, BKWriteException)
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.meta.metadata_store import Versioned
from bookie.meta.metadata_update_loop import doubt_window, update_ledger_metadata

if TYPE_CHECKING:
    from bookie.client.ledger_handle import LedgerHandle

log = logging.getLogger(__name__)


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

    def start(self) -> None:
        """Run the change on the client's executor unless one is running (caller holds the handle's lock)."""
        if not self.running:
            self.running = True
            self.lh.bk.executor.submit(self._run)

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
            try:
                self.changes += 1
                if self.changes > lh.conf.maxNumEnsembleChanges:
                    raise BKWriteException(f"ledger {lh.ledger}: more than maxNumEnsembleChanges ensemble changes")
                new = replace_bookies(lh.bk.writable_bookies(grpc_only=lh.ledger.scope_id != 0), old, failed,
                                      lh.bk.quarantined())
                versioned = self._record(start, tuple(new))
            except BKException as exc:
                if isinstance(exc, BKNotEnoughBookiesException):
                    dead = ', '.join(sorted({old[j] for j in failed}))
                    exc = BKNotEnoughBookiesException(
                        f"ledger {lh.ledger}: cannot replace failed bookie(s) {dead} of ensemble {', '.join(old)} "
                        f"from entry {start} on: {exc}. Needs {len(failed)} more writable bookie(s) outside that ensemble")
                with lh._lock:
                    failed_ops = lh._fail(exc)
                    self.running = False
                lh.bk.fail_all(failed_ops)
                return
            with lh._lock:
                log.info("ledger %s: new fragment from entry %d: %s (was %s)", lh.ledger, start, new, old)
                lh._versioned = versioned
                lh.ensemble = new
                for i in failed:
                    for op in lh._pending:  # entries of the new fragment must be on the new bookie
                        if i in op.write_set and op.entry_id >= start:
                            op.acked.discard(i)
                    lh._outboxes.bookie_replaced(i, lh._pending)
        lh.bk.complete_in_order(done)
        lh._send(batches)

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

        return update_ledger_metadata(lh.bk.store, lh.ledger, lh._versioned,
                                      lambda md: md.ensembles[-1] != (start, new), transform, doubt_window(lh.conf))
