"""What the AutoRecovery and manual-recovery tests share: the client settings, payloads, the check that a
ledger is back to full replication, and views of the under-replication znodes."""
from __future__ import annotations

import os
import threading

from bookie.client import BookKeeper
from bookie.client.bookkeeper import as_ledger_id
from bookie.client.distribution_schedule import stores
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import availability, status
from bookie.replication.replication_worker import ReplicationSettings, ReplicationWorker

CLIENT = {"addEntryTimeout": 3.0, "readTimeout": 3.0}


def payloads(tag: str, n: int) -> list[bytes]:
    return [f"{tag}-{i}-".encode() * (i % 7 + 1) for i in range(n)]


def write(handle, data: list[bytes]) -> None:
    for p in data:
        handle.append(p)


def assert_fully_replicated(bk: BookKeeper, ledger: int | LedgerId) -> None:
    """Each bookie's list of entries is what the striping of the metadata gives it, and every copy of
    every entry is byte-identical. An int is a scope-0 ledger id."""
    ledger = as_ledger_id(ledger)
    md = bk.ledger_metadata(ledger)
    wanted: dict[str, set[int]] = {}
    for first, last, ensemble in md.fragments():
        for index, bookie in enumerate(ensemble):
            wanted.setdefault(bookie, set()).update(
                e for e in range(first, last + 1) if stores(index, e, len(ensemble), md.write_quorum_size))
    for bookie, entries in wanted.items():
        listing = bk.bookie_client(bookie).list_entries(ledger)
        held = set(availability.decode(listing.availabilityOfEntriesOfLedger)) if listing.status == status.EOK else set()
        assert held == entries, f"bookie {bookie} holds {sorted(held ^ entries)} differently from the striping"
    for first, last, ensemble in md.fragments():
        for e in range(first, last + 1):
            bodies = {bk.bookie_client(b).read_entry(ledger, e).body
                      for i, b in enumerate(ensemble) if stores(i, e, len(ensemble), md.write_quorum_size)}
            assert len(bodies) == 1, f"ledger {ledger} entry {e}: copies differ"


def marked(store) -> dict[int | LedgerId, tuple[str, ...]]:
    """Marked ledgers -> their missing replicas: scope-0 ledgers by their int id, others by LedgerId."""
    return {u.ledger.ledger_id if u.ledger.scope_id == 0 else u.ledger: u.replicas
            for u in LedgerUnderreplicationManager(store).list_underreplicated()}


def logged(path: str, text: str) -> bool:
    return os.path.exists(path) and text in open(path).read()


def first_ledger_check_done(store) -> bool:
    """The auditor's check of every ledger, which runs at once when it never ran (BookKeeper's Auditor),
    has run: tests kill bookies after it, so that it cannot race the kill."""
    return LedgerUnderreplicationManager(store).get_check_all_ledgers_ctime() > 0


def names(bk: BookKeeper, ledger: int | LedgerId, bookie: str) -> bool:
    return any(bookie in ensemble for _, ensemble in bk.ledger_metadata(ledger).ensembles)


def assert_restored(bk: BookKeeper, written: dict[int, list[bytes]], lost: str) -> None:
    """Every ledger of ``written`` names ``lost`` nowhere, is fully replicated and reads back as written."""
    for ledger_id, data in written.items():
        assert not names(bk, ledger_id, lost), f"ledger {ledger_id} still names {lost}"
        assert_fully_replicated(bk, ledger_id)
        with bk.open_ledger(ledger_id, b"pw", recovery=False) as reader:
            assert [e.payload for e in reader.read(0, len(data) - 1)] == data


def holdings(bk: BookKeeper, bookies: list[str], ledgers: list[int]) -> dict:
    """(bookie, ledger) -> the entries it holds (None: it answered no such ledger)."""
    out = {}
    for b in bookies:
        for ledger in ledgers:
            listing = bk.bookie_client(b).list_entries(LedgerId(0, ledger))
            out[b, ledger] = (sorted(availability.decode(listing.availabilityOfEntriesOfLedger))
                              if listing.status == status.EOK else None)
    return out


def unregistered(bk: BookKeeper, bookie: str):
    return lambda: bookie not in bk.store.bookies() and bookie not in bk.store.bookies(read_only=True)


class Workers:
    """Replication workers, each with its own client and ZooKeeper session; records overlapping copies."""

    def __init__(self, uri: str, n: int, settings: ReplicationSettings):
        self.active: set = set()
        self.overlaps: list = []
        self.unrecoverable_reports: list[LedgerId] = []
        self._lock = threading.Lock()
        self.clients = [BookKeeper(uri, CLIENT) for _ in range(n)]
        self.workers = [ReplicationWorker(bk, LedgerUnderreplicationManager(bk.store, f"worker-{i}"), settings)
                        for i, bk in enumerate(self.clients)]
        for worker in self.workers:
            self._watch(worker)

    def _watch(self, worker: ReplicationWorker) -> None:
        replicate, report = worker.replicator.replicate, worker._report_unrecoverable

        def watched_replicate(handle, fragment, targets=None):
            with self._lock:
                if handle.ledger in self.active:
                    self.overlaps.append(handle.ledger)
                self.active.add(handle.ledger)
            try:
                return replicate(handle, fragment, targets)
            finally:
                with self._lock:
                    self.active.discard(handle.ledger)

        def counted_report(ledger, exc):
            self.unrecoverable_reports.append(ledger)
            report(ledger, exc)

        worker.replicator.replicate = watched_replicate
        worker._report_unrecoverable = counted_report

    def start(self) -> "Workers":
        for worker in self.workers:
            worker.start()
        return self

    def stop(self) -> None:
        for worker in self.workers:
            worker.shutdown()
        for bk in self.clients:
            bk.close()
