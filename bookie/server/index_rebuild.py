"""Index files rebuilt from the entry logs (BookKeeper's InterleavedStorageRegenerateIndexOp, which ``bk shell
regenerate-interleaved-storage-index-file`` runs as RegenerateInterleavedStorageIndexFileCommand does).

Every entry log of a stopped bookie is scanned (``scan_entry_log``) in log id order, and the location of each
entry of the wanted ledgers is kept, a later log's over an earlier one's (the copy compaction made). Each
ledger found is then written as a new index file through the ledger cache (IndexPersistenceMgr, LedgerCache):
the master key its password gives (DigestManager.generateMasterKey), fenced as BookKeeper's op writes it (a
writer that had not noticed adds nothing more), every location, the file fsynced, then the directories that
hold it. An index file the ledger had is replaced: the entry logs are the truth it is rebuilt from. A dry run
scans and reports, and writes nothing. Nothing else of the bookie is touched (no entry log is opened for
writing, as mounting the storage would).
"""
from __future__ import annotations

import os
import struct
from array import array
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bookie.exceptions import EntryLogCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.checksum import generate_master_key
from bookie.server.entry_log_format import entry_log_paths, location, scan_entry_log
from bookie.server.index import IndexHeader, IndexPersistenceMgr
from bookie.server.ledger_cache import LedgerCache
from bookie.util.io import fsync_dir


@dataclass
class LedgerLocations:
    """Where the entry logs hold a ledger's entries: entry ids, increasing, and their locations
    (BookKeeper's RecoveryStats, with the locations)."""
    entry_ids: np.ndarray
    locations: np.ndarray

    @property
    def entries(self) -> int:
        return len(self.entry_ids)

    @property
    def first(self) -> int:
        return int(self.entry_ids[0])

    @property
    def last(self) -> int:
        return int(self.entry_ids[-1])


@dataclass
class RebuildResult:
    """What the scan found per wanted ledger (a ledger without entries is not in ``found``), the logs it could
    not read, and the index files written (none in a dry run)."""
    found: dict[LedgerId, LedgerLocations] = field(default_factory=dict)
    unreadable_logs: list[str] = field(default_factory=list)
    written: list[str] = field(default_factory=list)


ScanProgress = Callable[[int, int, int], None]  # (log id, logs scanned, logs in all)


def rebuild_index(conf, ledgers: set[LedgerId], password: bytes, dry_run: bool = False,
                  on_log: ScanProgress | None = None) -> RebuildResult:
    """InterleavedStorageRegenerateIndexOp.initiate over the directories of ``conf`` (a stopped bookie's)."""
    result = RebuildResult()
    result.found = scan_locations(conf.ledger_dirs, ledgers, result.unreadable_logs, on_log)
    if not dry_run and result.found:
        header = IndexHeader(generate_master_key(password), fenced=True)
        result.written = write_index_files(conf, result.found, header)
    return result


def scan_locations(ledger_dirs: list[str], ledgers: set[LedgerId], unreadable: list[str],
                   on_log: ScanProgress | None = None) -> dict[LedgerId, LedgerLocations]:
    """The entries of ``ledgers`` in every entry log, the last log's location of each; a log that cannot be read
    (to its end) is named in ``unreadable``, and what was read of it kept."""
    ids: dict[LedgerId, array] = {}
    locs: dict[LedgerId, array] = {}
    logs = sorted(entry_log_paths(ledger_dirs).items())
    for done, (log_id, path) in enumerate(logs, 1):
        try:
            for offset, entry in scan_entry_log(path):
                scope, ledger_id, entry_id, _ = entry_format.peek_ids(entry, 0)
                ledger = LedgerId(scope, ledger_id)
                if ledger in ledgers and entry_id >= 0:
                    ids.setdefault(ledger, array("q")).append(entry_id)
                    locs.setdefault(ledger, array("q")).append(location(log_id, offset))
        except (EntryLogCorruptedException, OSError, struct.error) as exc:  # struct.error: a record too short
            unreadable.append(f"{path}: {exc}")
        if on_log is not None:
            on_log(log_id, done, len(logs))
    return {ledger: _latest(ids[ledger], locs[ledger]) for ledger in sorted(ids)}


def _latest(ids: array, locs: array) -> LedgerLocations:
    """Each entry id once, increasing, with the location found last."""
    backwards = np.frombuffer(ids, dtype=np.int64)[::-1]
    entry_ids, last_seen = np.unique(backwards, return_index=True)
    return LedgerLocations(entry_ids, np.frombuffer(locs, dtype=np.int64)[::-1][last_seen])


def write_index_files(conf, found: dict[LedgerId, LedgerLocations], header: IndexHeader) -> list[str]:
    """A new index file per ledger (any old one deleted first) with ``header`` and the ledger's locations,
    fsynced, its directories too; returns their paths."""
    index = IndexPersistenceMgr(conf.index_dirs, conf["openFileLimit"])
    # The entry logs of a stopped bookie are on disk: nothing to flush before an index write.
    cache = LedgerCache(index, conf["pageSize"], conf["pageLimit"], before_write=lambda: None,
                        header_for=lambda ledger: header)
    try:
        emptied = {index.delete(ledger) for ledger in found} - {None}  # the old files' directories
        for ledger, where in found.items():
            cache.put(ledger, where.entry_ids, where.locations)
        cache.flush({ledger: header for ledger in found})
        paths = [index.find(ledger).path for ledger in found]
    finally:
        index.close()
    for directory in emptied:
        fsync_dir(directory)  # an old file must not come back beside the new one after a crash
    for path in paths:
        _fsync_parents(path, conf.index_dirs)
    return paths


def _fsync_parents(path: str, index_dirs: list[str]) -> None:
    """fsync the directories from the file's up to its index directory: the file, and any directory made for
    it, are then found after a crash."""
    tops = {os.path.abspath(d) for d in index_dirs}
    directory = os.path.dirname(os.path.abspath(path))
    while True:
        fsync_dir(directory)
        if directory in tops or directory == os.path.dirname(directory):
            return
        directory = os.path.dirname(directory)
