"""A stopped bookie's index checked against its entry logs (BookKeeper's
InterleavedLedgerStorage.localConsistencyCheck, which ``bk shell localconsistencycheck`` runs as
LocalConsistencyCheckCommand does).

Every location an index file holds must lead to a readable record of that ledger and that entry in an entry
log that exists (DefaultEntryLogger.checkEntry); each one that does not is a DetectedInconsistency, and so is
an index file whose header cannot be read (entry -1: the ledger as a whole), since the bookie could serve
none of that ledger. Unlike BookKeeper's, which mounts the storage offline, the files are only read: mounting
InterleavedLedgerStorage would open a new entry log in the bookie's directories (EntryLogger starts one).
"""
from __future__ import annotations

import os
import struct
from collections import OrderedDict
from dataclasses import dataclass, field
import numpy as np

from bookie.exceptions import EntryCorruptedException, EntryLogCorruptedException, IndexCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.server.entry_log_format import LOG_HEADER_SIZE, entry_log_paths
from bookie.server.index import IndexPersistenceMgr
from bookie.server.ledger_cache import LedgerCache
from bookie.server.ledger_storage import check_ids

OPEN_LOGS = 64  # entry logs kept open at a time while the check reads records
LEDGER_WIDE = -1  # DetectedInconsistency.entry_id of a problem with the ledger as a whole


@dataclass(frozen=True)
class DetectedInconsistency:
    """LedgerStorage.DetectedInconsistency: the ledger, the entry (LEDGER_WIDE: the ledger as a whole), and
    what is wrong."""
    ledger: LedgerId
    entry_id: int
    problem: str


@dataclass
class ConsistencyReport:
    """What a check looked at, and what it found wrong."""
    ledgers: int = 0
    entries: int = 0
    problems: list[DetectedInconsistency] = field(default_factory=list)


class EntryLogFiles:
    """A stopped bookie's entry logs, read by location only (no log is opened for writing)."""

    def __init__(self, ledger_dirs: list[str], max_record: int):
        self.paths = entry_log_paths(ledger_dirs)
        self.max_record = max_record
        self._fds: OrderedDict[int, int] = OrderedDict()

    def read_record(self, loc: int) -> bytes:
        """The record at ``loc`` (without its size int); EntryLogCorruptedException when the log is missing or
        holds no whole record there."""
        log_id, offset = loc >> 32, loc & 0xFFFFFFFF
        where = f"entry log {log_id:x}.log"
        if offset < LOG_HEADER_SIZE + entry_format.FRAME_LEN:
            raise EntryLogCorruptedException(f"{where}: location {offset} is inside the log's header")
        fd = self._fd(log_id)
        head = os.pread(fd, entry_format.FRAME_LEN, offset - entry_format.FRAME_LEN)
        if len(head) < entry_format.FRAME_LEN:
            raise EntryLogCorruptedException(f"{where} ends before offset {offset}")
        (size,) = entry_format.FRAME.unpack(head)
        if not entry_format.V1_HEADER_LEN <= size <= self.max_record:
            raise EntryLogCorruptedException(f"{where}: record at offset {offset} has bad size {size}")
        record = os.pread(fd, size, offset)
        if len(record) < size:
            raise EntryLogCorruptedException(f"{where}: record at offset {offset} is cut short ({len(record)} of "
                                             f"{size} bytes)")
        return record

    def _fd(self, log_id: int) -> int:
        """The log's descriptor, opened if need be (the least recently used one closed past OPEN_LOGS)."""
        if log_id not in self._fds:
            path = self.paths.get(log_id)
            if path is None:
                raise EntryLogCorruptedException(f"entry log {log_id:x}.log does not exist")
            self._fds[log_id] = os.open(path, os.O_RDONLY)
            if len(self._fds) > OPEN_LOGS:
                os.close(self._fds.popitem(last=False)[1])
        self._fds.move_to_end(log_id)
        return self._fds[log_id]

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()


def check_stopped_bookie(conf) -> ConsistencyReport:
    """localConsistencyCheck over the index and ledger directories of ``conf`` (a stopped bookie's)."""
    index = IndexPersistenceMgr(conf.index_dirs, conf["openFileLimit"])
    cache = LedgerCache(index, conf["pageSize"], conf["pageLimit"], before_write=_read_only,
                        header_for=_read_only)
    logs = EntryLogFiles(conf.ledger_dirs, conf["nettyMaxFrameSizeBytes"])
    report = ConsistencyReport()
    try:
        for ledger in sorted(index.ledgers()):
            checked, problems = check_ledger(cache, logs, ledger)
            report.ledgers += 1
            report.entries += checked
            report.problems += problems
            cache.drop(ledger)  # its pages are not looked at again
    finally:
        logs.close()
        index.close()
    return report


def check_ledger(cache: LedgerCache, logs: EntryLogFiles, ledger: LedgerId) -> tuple[int, list[DetectedInconsistency]]:
    """(entries checked, problems) of the ledger's index file, its locations in entry id order; a header that
    cannot be read is one ledger-wide problem, and nothing else is looked at."""
    try:
        cache.index.find(ledger).read_header()
    except (IndexCorruptedException, OSError, struct.error) as exc:
        return 0, [DetectedInconsistency(ledger, LEDGER_WIDE, f"index file cannot be read: {exc}")]
    checked, problems = 0, []
    per = cache.entries_per_page
    for page_no, slots in cache.stored_pages(ledger, cache.last_entry_on_disk(ledger)):
        for slot in np.flatnonzero(slots).tolist():
            entry_id, loc = page_no * per + slot, int(slots[slot])
            checked += 1
            try:
                check_ids(logs.read_record(loc), 0, ledger, entry_id, loc)
            except EntryCorruptedException as exc:  # another record is there: the message names both
                problems.append(DetectedInconsistency(ledger, entry_id, str(exc)))
            except (EntryLogCorruptedException, OSError) as exc:
                problems.append(DetectedInconsistency(ledger, entry_id,
                                                      f"{exc} (location {loc >> 32:x}:{loc & 0xFFFFFFFF})"))
    return checked, problems


def _read_only(*_) -> None:
    raise AssertionError("the consistency check writes no index file")
