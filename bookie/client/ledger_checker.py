"""Which fragments of a ledger are under-replicated (BookKeeper's LedgerChecker).

A fragment is one segment of the metadata, ``first .. next segment's first - 1`` on its ensemble; the
last one of a closed ledger ends at its last entry, of an open ledger at the LAC. For each bookie index,
the striping (distribution_schedule) gives the first and last entry it must store in the fragment:
the bookie is bad if it is not registered (neither writable nor read-only), or if either entry cannot
be read from it ("no such entry" where the entry must be counts as bad, like any failure). A bookie that
stores nothing of a closed fragment is fine while it answers; unregistered or silent, it is bad too, so
that the ensemble entry of an empty fragment is replaced and the ledger stops naming a lost bookie
(BookKeeper #3220: empty ledgers stuck in the under-replicated list).

Registered means as the client's watch on the registrations has them (BookKeeper's BookieWatcher): checking
a ledger costs no ZooKeeper request. ``check_ledger_async`` leaves the reads in flight, so a caller checking
many ledgers (the auditor's check of every ledger) keeps many checks going without a thread each.
"""
from __future__ import annotations

import concurrent.futures as cf
import threading
from dataclasses import dataclass
from typing import Callable

from bookie.client.distribution_schedule import stores
from bookie.client.entry_probes import EntryProbes, read_probe
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata


@dataclass(frozen=True)
class LedgerFragment:
    """Entries ``first .. last`` of a ledger on ``ensemble`` (the segment starting at ``first``);
    ``bad``: indexes of the ensemble's bookies that miss their share. ``closed``: no entry can be
    added to it any more (every fragment of a closed ledger, every but the last of an open one)."""
    ledger: LedgerId
    first: int
    last: int  # < first: the fragment holds no entry
    ensemble: tuple[str, ...]
    bad: frozenset[int]
    closed: bool

    @property
    def bad_bookies(self) -> list[str]:
        return [self.ensemble[i] for i in sorted(self.bad)]

    def __str__(self) -> str:
        return (f"ledger {self.ledger} entries {self.first}..{self.last} on {','.join(self.ensemble)} "
                f"(missing: {','.join(self.bad_bookies) or 'none'})")


def stored_bounds(index: int, first: int, last: int, ensemble_size: int, write_quorum: int) -> tuple[int, int] | None:
    """The first and last entry of ``first .. last`` that bookie ``index`` stores; None if none."""
    lo = next((e for e in range(first, min(last, first + ensemble_size - 1) + 1)
               if stores(index, e, ensemble_size, write_quorum)), None)
    if lo is None:
        return None
    hi = next(e for e in range(last, max(first, last - ensemble_size + 1) - 1, -1)
              if stores(index, e, ensemble_size, write_quorum))
    return lo, hi


def fragments_of(ledger: LedgerId, metadata: LedgerMetadata, lac: int) -> list[tuple[int, int, tuple[str, ...], bool]]:
    """(first, last, ensemble, closed) of each fragment; an open ledger's last one ends at ``lac``."""
    out = []
    for first, last, ensemble in metadata.fragments():
        is_last = first == metadata.ensembles[-1][0]
        if is_last and not metadata.is_closed:
            out.append((first, lac, ensemble, False))
        else:
            out.append((first, last, ensemble, True))
    return out


def unregistered_fragments(ledger: LedgerId, metadata: LedgerMetadata, available: set[str]) -> set[LedgerFragment]:
    """The fragments of a closed ledger without entries, each with its unregistered bookies as bad: all a check
    of it finds without reading (BookKeeper's LedgerChecker: a bookie that stores nothing of a fragment is bad
    only if its BookieWatcher has it unavailable)."""
    found = set()
    for first, last, ensemble, closed in fragments_of(ledger, metadata, metadata.last_entry_id):
        bad = frozenset(i for i, bookie in enumerate(ensemble) if bookie not in available)
        if bad:
            found.add(LedgerFragment(ledger, first, last, tuple(ensemble), bad, closed))
    return found


class LedgerChecker:
    def __init__(self, bk):
        self.bk = bk

    def available(self) -> set[str]:
        """Registered bookies: writable or read-only (a read-only bookie still serves its entries), as the
        client's registration watch has them; a client without one (a test's stand-in) lists them."""
        if not hasattr(self.bk, "readonly_bookies"):
            return set(self.bk.store.bookies()) | set(self.bk.store.bookies(read_only=True))
        return set(self.bk.writable_bookies()) | set(self.bk.readonly_bookies())

    def check_ledger(self, handle, include_open: bool = True, available: set[str] | None = None) -> set[LedgerFragment]:
        """The under-replicated fragments of the ledger ``handle`` reads (its metadata and LAC as the
        handle knows them); with ``include_open`` False the open last fragment is not looked at.
        ``available``: the registered bookies, if the caller has them (else ``available()``)."""
        return self.check_ledger_async(handle, include_open, available).result()

    def check_ledger_async(self, handle, include_open: bool = True, available: set[str] | None = None,
                           probes: EntryProbes | None = None) -> cf.Future:
        """``check_ledger`` with its reads left in flight: a future of the set of fragments. With ``probes``,
        the reads are queued there and sent many to a call (the caller flushes them before it waits)."""
        md = handle.metadata
        ledger = handle.ledger
        available = self.available() if available is None else available
        reads: list[tuple[tuple[int, int], str, int, bool]] = []  # ((fragment first, index), bookie, entry, answered)
        plans = []
        for first, last, ensemble, closed in fragments_of(ledger, md, handle.last_add_confirmed):
            if not closed and not include_open:
                continue
            bad = set()
            for index, bookie in enumerate(ensemble):
                if bookie not in available:
                    bad.add(index)
                    continue
                bounds = stored_bounds(index, first, last, len(ensemble), md.write_quorum_size) if last >= first else None
                if bounds is not None:
                    reads += [((first, index), bookie, e, False) for e in sorted(set(bounds))]
                elif closed:  # stores nothing here: only whether it answers at all (a registration outlives
                    # a crashed bookie by a session timeout)
                    reads.append(((first, index), bookie, max(first, 0), True))
            plans.append((first, last, ensemble, closed, bad))

        out: cf.Future = cf.Future()
        failed: set[tuple[int, int]] = set()
        left = [len(reads)]
        lock = threading.Lock()

        def verdict() -> None:
            found = set()
            for first, last, ensemble, closed, bad in plans:
                bad |= {index for index in range(len(ensemble)) if (first, index) in failed}
                if bad:
                    found.add(LedgerFragment(ledger, first, last, tuple(ensemble), frozenset(bad), closed))
            out.set_result(found)

        def one_done(key: tuple[int, int], ok: bool) -> None:
            with lock:
                if not ok:
                    failed.add(key)
                left[0] -= 1
                last = left[0] == 0
            if last:
                verdict()

        if not reads:
            verdict()
        for key, bookie, entry_id, answered in reads:
            self._read(ledger, bookie, entry_id, lambda ok, key=key: one_done(key, ok), answered, probes)
        return out

    def _read(self, ledger: LedgerId, bookie: str, entry_id: int, done: Callable[[bool], None],
              answered: bool = False, probes: EntryProbes | None = None) -> None:
        """``done(whether bookie returns entry_id)`` (any failure, absence included: False); with ``answered``,
        ``done(whether it answers at all)`` (absence included: True)."""
        if probes is not None:
            probes.probe(bookie, ledger, entry_id, done, answered)
            return
        try:
            client = self.bk.bookie_client(bookie)
        except Exception:  # noqa: BLE001 - an unreachable bookie is a bad one, whatever the error
            done(False)
            return
        read_probe(client, ledger, entry_id, done, answered)
