"""What the AutoRecovery and manual-recovery tests share: the client settings, payloads, the check that a
ledger is back to full replication, and views of the under-replication znodes."""
from __future__ import annotations

import os

from bookie.client import BookKeeper
from bookie.client.bookkeeper import as_ledger_id
from bookie.client.distribution_schedule import stores
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.proto import availability, status

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
