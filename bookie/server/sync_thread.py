"""SyncThread: the checkpoint that lets old journals go.

Every ``flushInterval`` ms (reference §4.1, seed 01 "Data Flush"):
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

log = logging.getLogger(__name__)


class SyncThread:
    def __init__(self, journals: list[Journal], storage: InterleavedLedgerStorage, ledger_dirs: list[str],
                 flush_interval_ms: int):
        self.journals = journals
        self.storage = storage
        self.ledger_dirs = ledger_dirs
        self.interval = flush_interval_ms / 1000.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
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

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="SyncThread", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.checkpoint()
            except Exception:  # keep checkpointing; the journal still holds everything
                log.exception("checkpoint failed")

    def shutdown(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
