"""Manual recovery and decommission (BookKeeper's BookKeeperAdmin; docs/operations/recovery.md).

``recover_bookie_data``: for each ledger with a fragment on a lost bookie, take its under-replication
lock (the one replication workers take, waiting up to ``lock_wait`` seconds while a worker holds it),
open it without recovery (its metadata as it is now, under the lock); if it is still open and its last
ensemble has a lost bookie, open it with recovery (fence + close) unless open ledgers are skipped; then
copy every fragment naming a lost bookie, the last one included, to replacements
(LedgerFragmentReplicator, the workers' code path), and release the lock after the ensemble updates.
Under the lock no worker copies the same fragment elsewhere, and no bookie's GC deletes the copy being
made as over-replicated; a ledger a worker fixed meanwhile has nothing left to copy. Unlike the
LedgerChecker, which only copies what it finds missing, the operator names the bookies: their whole
share is copied whether they answer or not.

``decommission_bookie``: the bookie must be down; its ledgers are marked under-replicated (by the auditor,
or here), it waits until neither ledger metadata nor an urL node names it, then deletes its cookie.

``open_ledger_no_recovery`` and ``read_entries`` read any ledger as an admin (with the password its metadata
holds), never fencing it; ``bookie_info`` asks every registered bookie for its disk space; ``sanity_test``
writes and reads back a ledger on one bookie only.
"""
from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator

from bookie.client.distribution_schedule import stores
from bookie.client.ledger_checker import LedgerFragment, fragments_of
from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_fragment_replicator import LedgerFragmentReplicator
from bookie.client.read_only_ledger_handle import ReadOnlyLedgerHandle
from bookie.exceptions import BKException, BKIllegalOpException, BKNoSuchLedgerExistsException, BKTimeoutException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import bookkeeper_pb2 as pb

log = logging.getLogger(__name__)
POLL_SECONDS = 1.0  # between looks at the metadata while a decommission waits (an operator's wait)
# How long a recovery waits for a replication worker to release a ledger: a worker holds it while it copies,
# through openLedgerRereplicationGracePeriod and through its backoff after a failure, which reaches
# lockReleaseOfFailedLedgerGracePeriod (300 s by default).
LOCK_WAIT_SECONDS = 300.0
DECOMMISSION_TIMEOUT_SECONDS = 86400.0  # how long a decommission waits for the bookie's ledgers to move
READ_CHUNK = 10_000  # entries per read request while an admin reads a range of a ledger
SANITY_TEST_ENTRIES = 10  # SanityTestCommand's default


@dataclass
class LedgerRecovery:
    """What recovering one ledger did (or, in a dry run, would do)."""
    ledger: LedgerId
    fragments: list[LedgerFragment] = field(default_factory=list)  # to copy / copied
    entries: int = 0  # entries copied (dry run: to copy), counted once per lost replica
    fenced: bool = False  # opened with recovery (it was open with a lost bookie in its last ensemble)
    skipped: str = ""  # why it was left alone (-sk on an open ledger)
    error: str = ""  # why it could not be recovered


@dataclass
class RecoveryReport:
    ledgers: list[LedgerRecovery] = field(default_factory=list)
    cookies_deleted: list[str] = field(default_factory=list)  # the recovered bookies' cookies deleted afterwards

    @property
    def failed(self) -> list[LedgerRecovery]:
        return [r for r in self.ledgers if r.error]

    def summary(self, dry_run: bool) -> str:
        done = [r for r in self.ledgers if not r.error and not r.skipped]
        verb = "would copy" if dry_run else "copied"
        lines = [f"{len(done)} ledgers, {sum(len(r.fragments) for r in done)} fragments, "
                 f"{sum(r.entries for r in done)} entries {verb}"
                 + (f"; {sum(r.fenced for r in done)} open ledgers fenced and closed" if not dry_run else "")]
        lines += [f"  skipped ledger {r.ledger}: {r.skipped}" for r in self.ledgers if r.skipped]
        lines += [f"  NOT RECOVERED ledger {r.ledger}: {r.error}" for r in self.failed]
        return "\n".join(lines)


def share_size(fragment: LedgerFragment, write_quorum: int) -> int:
    """Entries of ``fragment`` its bad bookies store (each counted once per bad bookie)."""
    E = len(fragment.ensemble)
    return sum(1 for i in fragment.bad for e in range(fragment.first, fragment.last + 1)
               if stores(i, e, E, write_quorum))


class BookKeeperAdmin:
    def __init__(self, bk, lock_wait: float | None = LOCK_WAIT_SECONDS):
        self.bk = bk
        self.store = bk.store
        self.replicator = LedgerFragmentReplicator(bk, bk.conf.maxBatchEntries)
        self.lock_wait = lock_wait  # seconds; None: as long as a worker holds the ledger
        self._replication: LedgerUnderreplicationManager | None = None  # made when first needed

    # -- which ledgers ---------------------------------------------------------------------------------
    def ledgers_on(self, bookies: Iterable[str], scope_id: int | None = None) -> Iterator[tuple[LedgerId, LedgerMetadata]]:
        """Each ledger with a fragment on one of ``bookies`` (all scopes by default), with its metadata."""
        wanted = set(bookies)
        for ledger, md in self.store.ledgers_with_metadata(scope_id):
            if any(wanted & set(ensemble) for _, ensemble in md.ensembles):
                yield ledger, md

    # -- read ----------------------------------------------------------------------------------------------
    def open_ledger_no_recovery(self, ledger: LedgerId) -> ReadOnlyLedgerHandle:
        """BookKeeperAdmin.openLedgerNoRecovery: ``ledger`` open for reading with the password its metadata
        holds (an admin reads any ledger), never fenced (a writer keeps writing)."""
        versioned = self.store.read_ledger(ledger)  # opened on what is read here, not read again
        return self.bk.open_ledger(ledger, versioned.value.password, recovery=False, scope_id=ledger.scope_id,
                                   versioned=versioned)

    @staticmethod
    def entry_range(handle: ReadOnlyLedgerHandle, first: int, last: int) -> range:
        """The entry ids ``read_entries`` reads: ``first..last`` (``last`` < 0: to the ledger's end, the LAC of
        an open ledger), cut at that end."""
        end = handle.last_add_confirmed
        return range(first, (end if last < 0 else min(last, end)) + 1)

    @staticmethod
    def read_entries(handle: ReadOnlyLedgerHandle, first: int, last: int) -> Iterator[LedgerEntry]:
        """BookKeeperAdmin.readEntries: the entries of ``entry_range``, READ_CHUNK per request."""
        ids = BookKeeperAdmin.entry_range(handle, first, last)
        for start in ids[::READ_CHUNK]:
            yield from handle.read(start, min(ids[-1], start + READ_CHUNK - 1))

    # -- bookies ----------------------------------------------------------------------------------------
    def bookie_info(self) -> dict[str, pb.GetBookieInfoResponse | BKException]:
        """BookKeeper.getBookieInfo: each registered bookie, writable or read-only (sorted by id), with its
        GetBookieInfoResponse (freeDiskSpace, totalDiskCapacity), or the BKException it failed with."""
        found: dict[str, pb.GetBookieInfoResponse | BKException] = {}
        for bookie in sorted(self.bk.writable_bookies() + self.bk.readonly_bookies()):
            try:
                found[bookie] = self.bk.bookie_client(bookie).bookie_info()
            except BKException as exc:
                found[bookie] = exc
        return found

    def sanity_test(self, bookie: str, entries: int = SANITY_TEST_ENTRIES) -> str | None:
        """SanityTestCommand: a ledger on exactly ``bookie`` (E=WQ=AQ=1, as LocalBookieEnsemblePlacementPolicy
        places it), ``entries`` entries written, the ledger closed, opened and read back, then deleted. Why the
        test failed, naming what went wrong (None: it passed). The client should make no ensemble change
        (maxNumEnsembleChanges=0), so that a bookie that does not take the writes fails the test instead of being
        replaced."""
        bk = self.bk
        registered = bk.writable_bookies() + bk.readonly_bookies()
        if bookie not in registered:
            return f"bookie {bookie} is not registered (registered: {', '.join(sorted(registered)) or 'none'})"
        expected = [b"entry-%d" % i for i in range(entries)]  # SanityTestCommand's payloads
        lh = reader = None
        try:
            bk.bookie_client(bookie).bookie_info()  # unreachable, or another bookie at its address: said first
            lh = bk.create_ledger(1, 1, 1, password=b"", bookies=[bookie])
            for future in [lh.append_async(payload) for payload in expected]:
                future.result()
            lh.close()
            reader = bk.open_ledger(lh.ledger_id, password=b"")
            ensembles = [tuple(members) for _, members in bk.ledger_metadata(lh.ledger_id).ensembles]
            if ensembles != [(bookie,)]:  # maxNumEnsembleChanges=0 rules it out; checked all the same
                return f"the test ledger {lh.ledger_id} left bookie {bookie}: its ensembles are {ensembles}"
            if reader.last_add_confirmed != entries - 1:
                return f"ledger {lh.ledger_id}: last entry {reader.last_add_confirmed}, expected {entries - 1}"
            read = [e.payload for e in reader.read(0, entries - 1)]
            if read != expected:
                differ = [i for i, (got, want) in enumerate(zip(read, expected)) if got != want]
                return (f"ledger {lh.ledger_id}: {len(read)} entries read back, entries {differ[:10]} differ from "
                        "those written")
            return None
        except BKException as exc:
            return f"{type(exc).__name__}: {exc}"
        finally:
            if reader is not None:
                reader.close()
            if lh is not None:
                try:
                    bk.delete_ledger(lh.ledger_id)
                except BKException:
                    pass

    # -- recover ---------------------------------------------------------------------------------------
    def recover_bookie_data(self, bookies: Iterable[str], ledger: LedgerId | None = None, dry_run: bool = False,
                            skip_open: bool = False,
                            on_ledger: Callable[[LedgerRecovery], None] | None = None,
                            delete_cookies: bool = False) -> RecoveryReport:
        """Copy the shares of ``bookies`` of every ledger on them (or of ``ledger`` only) to replacements; with
        ``delete_cookies``, delete their cookies afterwards if every ledger was recovered (not in a dry run)."""
        bookies = list(bookies)
        lost = set(bookies)
        report = RecoveryReport()
        if ledger is not None:
            md = self.store.read_ledger(ledger).value
            targets = [(ledger, md)] if any(lost & set(e) for _, e in md.ensembles) else []
        else:
            targets = list(self.ledgers_on(lost))
        for lid, _ in targets:
            result = self.recover_ledger(lid, lost, dry_run, skip_open)
            report.ledgers.append(result)
            if on_ledger is not None:
                on_ledger(result)
        if delete_cookies and not dry_run and not report.failed:
            for bookie in bookies:
                self.store.delete_cookie(bookie)
                report.cookies_deleted.append(bookie)
        return report

    def recover_ledger(self, ledger: LedgerId, lost: set[str], dry_run: bool, skip_open: bool) -> LedgerRecovery:
        """Recover one ledger under its under-replication lock (a dry run changes nothing and takes none)."""
        result = LedgerRecovery(ledger)
        if dry_run:
            return self._recover(result, lost, dry_run, skip_open)
        try:
            manager = self._replication_manager()
            if not manager.acquire_underreplicated_ledger(ledger, self.lock_wait):
                holder = manager.lock_holder(ledger) or "a replication worker"
                result.error = (f"{holder} held it for more than {self.lock_wait:.0f} s (it is re-replicating the "
                                "ledger, or backing off after a failure); run recover again once it is released")
                return result
        except BKException as exc:
            result.error = f"could not take its under-replication lock: {exc}"
            return result
        try:
            return self._recover(result, lost, dry_run, skip_open)
        finally:
            manager.release_underreplicated_ledger(ledger)

    def _recover(self, result: LedgerRecovery, lost: set[str], dry_run: bool, skip_open: bool) -> LedgerRecovery:
        ledger = result.ledger
        try:
            handle = self.open_ledger_no_recovery(ledger)  # as it is now: a worker may have fixed it meanwhile
            md = handle.metadata
            if not md.is_closed and lost & set(md.ensembles[-1][1]):
                if skip_open:
                    result.skipped = "open, and its last ensemble has a lost bookie (-sk)"
                    return result
                if not dry_run:  # the writer may be gone: fence and close so the last fragment is fixed
                    handle = self.bk.open_ledger(ledger, md.password, recovery=True, scope_id=ledger.scope_id)
                    result.fenced = True
            fragments = self._fragments(handle, lost)
            result.fragments = fragments
            result.entries = sum(share_size(f, handle.metadata.write_quorum_size) for f in fragments)
            if dry_run:
                return result
            for fragment in fragments:  # all closed: fenced above, or the open last one names no lost bookie
                self.replicator.replicate(handle, fragment)
        except BKNoSuchLedgerExistsException:
            result.skipped = "deleted meanwhile"
        except BKException as exc:
            result.error = str(exc)
        return result

    def _replication_manager(self) -> LedgerUnderreplicationManager:
        if self._replication is None:
            self._replication = LedgerUnderreplicationManager(
                self.store, f"recover@{socket.gethostname()}:{os.getpid()}")
        return self._replication

    @staticmethod
    def _fragments(handle, lost: set[str]) -> list[LedgerFragment]:
        """Fragments of the handle's ledger naming a lost bookie; an open last one ends at the LAC."""
        out = []
        for first, last, ensemble, closed in fragments_of(handle.ledger, handle.metadata, handle.last_add_confirmed):
            bad = frozenset(i for i, b in enumerate(ensemble) if b in lost)
            if bad:
                out.append(LedgerFragment(handle.ledger, first, last, tuple(ensemble), bad, closed))
        return out

    # -- decommission ----------------------------------------------------------------------------------
    def ensure_down(self, bookie: str) -> None:
        """BKIllegalOpException while ``bookie`` is registered (writable or read-only)."""
        for read_only, kind in ((False, "writable"), (True, "read-only")):
            if bookie in self.store.bookies(read_only=read_only):
                raise BKIllegalOpException(f"bookie {bookie} is registered as {kind}: stop it before decommissioning it")

    def decommission_bookie(self, bookie: str, auditor: str | None, default_delay_s: int,
                            timeout: float = DECOMMISSION_TIMEOUT_SECONDS,
                            on_started: Callable[[int | None], None] | None = None,
                            on_poll: Callable[[list[LedgerId], list[LedgerId]], None] | None = None) -> None:
        """BookKeeperAdmin.decommissionBookie: refused while ``bookie`` is registered; its ledgers are handed to
        AutoRecovery, by an audit triggered on ``auditor`` (the elected one; ``default_delay_s``: the
        lostBookieRecoveryDelay rewritten if none is stored) or, with none elected, marked under-replicated here
        so that replication workers move them; ``on_started`` is told how many were marked (None: the audit was
        triggered). Then it waits until nothing references the bookie (``wait_unreferenced``) and deletes its
        cookie."""
        self.ensure_down(bookie)
        if auditor is not None:
            self._replication_manager().trigger_audit(default_delay_s)
            marked = None
        else:
            marked = self.mark_underreplicated(bookie)
        if on_started is not None:
            on_started(marked)
        self.wait_unreferenced(bookie, timeout, on_poll)
        self.store.delete_cookie(bookie)

    def mark_underreplicated(self, bookie: str) -> int:
        """Mark the ledgers on ``bookie`` (every scope) under-replicated as the auditor would; how many."""
        manager = self._replication_manager()
        count = 0
        for ledger, _ in self.ledgers_on([bookie]):
            manager.mark_ledger_underreplicated(ledger, [bookie])
            count += 1
        return count

    def references(self, bookie: str) -> tuple[list[LedgerId], list[LedgerId]]:
        """Ledgers whose metadata names ``bookie``, and ledgers whose urL node lists it as missing."""
        in_metadata = [ledger for ledger, _ in self.ledgers_on([bookie])]
        manager = self._replication_manager()
        marked = [u.ledger for u in manager.list_underreplicated(lambda replicas: bookie in replicas)]
        return in_metadata, marked

    def wait_unreferenced(self, bookie: str, timeout: float,
                          on_poll: Callable[[list[LedgerId], list[LedgerId]], None] | None = None) -> None:
        """Return once nothing references ``bookie``; BKTimeoutException naming what still does after
        ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            in_metadata, marked = self.references(bookie)
            if on_poll is not None:
                on_poll(in_metadata, marked)
            if not in_metadata and not marked:
                return
            if time.monotonic() > deadline:
                raise BKTimeoutException(
                    f"bookie {bookie} still referenced after {timeout:.0f} s: ledgers {_ids(in_metadata)} in their "
                    f"metadata, {len(marked)} marked under-replicated (is a replication worker running? "
                    f"`bk autorecovery`, or `bk shell recover {bookie}`)")
            time.sleep(POLL_SECONDS)  # an operator's wait on other processes, not a test's synchronization


def _ids(ledgers: list[LedgerId]) -> str:
    shown = ", ".join(str(x) for x in ledgers[:10])
    return shown + (f" and {len(ledgers) - 10} more" if len(ledgers) > 10 else "")
