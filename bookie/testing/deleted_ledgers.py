"""Deleting ledgers from a bookie's storage directly and reading back what its finished entry logs
still hold (EntryLogMetadata per log), as a GC pass would: for compaction tests and the benchmark."""
from __future__ import annotations

from bookie.ledger_id import LedgerId
from bookie.server.entry_log_metadata import EntryLogMetadata
from bookie.server.ledger_storage import InterleavedLedgerStorage


def delete_and_measure(storage: InterleavedLedgerStorage, dead: set[LedgerId]) -> list[EntryLogMetadata]:
    """Delete ``dead`` from ``storage``; the metadata of every finished log, from its ledgers map."""
    for ledger in dead:
        storage.delete_ledger(ledger)
    logger = storage.entry_logger
    metas = []
    for log_id in logger.log_ids():
        if log_id == logger.log_id:
            continue
        meta = EntryLogMetadata(log_id)
        for ledger, nbytes in logger.read_ledgers_map(log_id).items():
            meta.add_ledger_size(ledger, nbytes)
        meta.remove_ledger_if(dead.__contains__)
        metas.append(meta)
    return metas
