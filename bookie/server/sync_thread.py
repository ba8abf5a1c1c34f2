"""SyncThread: the checkpoint that lets old journals go.

Every ``flushInterval`` ms (BookKeeper's SyncThread and CheckpointSource):
1. record each journal's LastLogMark (what is written and fsynced so far) in memory;
2. flush the ledger storage: entry logs fsynced, then index pages and ledger headers;
3. persist the marks in every ledger directory;
4. delete journals older than the mark, keeping ``journalMaxBackups``.
Everything added before step 1 was already in the ledger storage (adds reach storage before the
journal), so after step 3 replay from the mark finds everything else.
"""
from __future__ import annotations

import logging
import threading

from bookie.server.journal import Journal, LogMark
from bookie.server.last_log_mark import write_last_mark
from bookie.server.ledger_storage import InterleavedLedgerStorage
from bookie.util.periodic_thread import PeriodicThread

log = logging.getLogger(__name__)


class SyncThread(PeriodicThread):
    def __init__(self, journals: list[Journal], storage: InterleavedLedgerStorage, ledger_dirs: list[str],
                 flush_interval_ms: int):
        super().__init__("SyncThread", flush_interval_ms / 1000.0)
        self.journals = journals
        self.storage = storage
        self.ledger_dirs = ledger_dirs
        self._lock = threading.Lock()
        self.checkpoints = 0

    def checkpoint(self) -> list[LogMark]:
        with self._lock:
            marks = [j.last_log_mark for j in self.journals]
            self.storage.flush()
            for i, mark in enumerate(marks):
                write_last_mark(self.ledger_dirs, mark, i, len(self.journals))
            for journal, mark in zip(self.journals, marks):
                journal.gc_journals(mark)
            self.checkpoints += 1
            return marks

    def run_once(self) -> None:
        self.checkpoint()  # a failure is logged and retried next round; the journal still holds everything
