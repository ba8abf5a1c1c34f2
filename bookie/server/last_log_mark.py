"""LastLogMark: the journal position up to which everything is in the entry logs and index files.

Persisted as 16 bytes (``journalId:i64 | offset:i64``) in ``<ledgerDir>/current/lastMark`` of every
ledger directory, ``lastMark.<i>`` when there are several journals (BookKeeper's Journal.LastLogMark). On start the
largest mark found in any ledger directory wins. Written to a temporary file, fsynced, then renamed,
so a crash leaves the old mark or the new one, never a torn one.
"""
from __future__ import annotations

import logging
import os
import struct

from bookie.server.journal import LogMark

log = logging.getLogger(__name__)
_MARK = struct.Struct(">qq")


def mark_file_name(journal_index: int, journal_count: int) -> str:
    return "lastMark" if journal_count == 1 else f"lastMark.{journal_index}"


def read_last_mark(ledger_dirs: list[str], journal_index: int = 0, journal_count: int = 1) -> LogMark:
    """The largest persisted mark for this journal across ``ledger_dirs`` (``LogMark(0, 0)`` if none)."""
    name = mark_file_name(journal_index, journal_count)
    best = LogMark(0, 0)
    for ledger_dir in ledger_dirs:
        path = os.path.join(ledger_dir, "current", name)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            continue
        if len(data) != _MARK.size:
            log.warning("ignoring %s: %d bytes, a mark has 16", path, len(data))
            continue
        best = max(best, LogMark(*_MARK.unpack(data)))
    return best


def write_last_mark(ledger_dirs: list[str], mark: LogMark, journal_index: int = 0, journal_count: int = 1) -> None:
    name = mark_file_name(journal_index, journal_count)
    data = _MARK.pack(*mark)
    for ledger_dir in ledger_dirs:
        current = os.path.join(ledger_dir, "current")
        tmp = os.path.join(current, name + ".tmp")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, os.path.join(current, name))
        fd = os.open(current, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
