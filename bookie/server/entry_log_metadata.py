"""What one entry log holds, for GC and compaction (BookKeeper's EntryLogMetadata).

Built from a finished log's ledgers map, or by scanning a log that has none. ``remaining_size`` falls
as the ledgers it holds are deleted; a log whose ledgers are all gone is deleted, and one whose usage
(remaining / total) is under a compaction threshold has its live entries copied to a new log.
"""
from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from bookie.exceptions import EntryLogCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.server.entry_log_format import LOG_HEADER, LOG_HEADER_SIZE, LOG_MAGIC, decode_ledgers_map


@dataclass
class EntryLogMetadata:
    entry_log_id: int
    total_size: int = 0
    remaining_size: int = 0
    ledgers: dict[LedgerId, int] = field(default_factory=dict)  # bytes of each ledger still in the log
    # Ledgers deleted since this bookie started whose bytes are still in the log: (bytes, GC pass that saw it)
    removed: dict[LedgerId, tuple[int, int]] = field(default_factory=dict)

    def add_ledger_size(self, ledger: LedgerId, size: int) -> None:
        self.total_size += size
        self.remaining_size += size
        self.ledgers[ledger] = self.ledgers.get(ledger, 0) + size

    def remove_ledger_if(self, dead: Callable[[LedgerId], bool], gc_pass: int = 0) -> list[LedgerId]:
        """Drop the ledgers ``dead`` says are gone (remembered as removed at ``gc_pass``: their bytes stay
        until the log is compacted or deleted); returns them."""
        gone = [ledger for ledger in self.ledgers if dead(ledger)]
        for ledger in gone:
            size = self.ledgers.pop(ledger)
            self.remaining_size -= size
            self.removed[ledger] = (size, gc_pass)
        return gone

    def contains_ledger(self, ledger: LedgerId) -> bool:
        return ledger in self.ledgers

    @property
    def usage(self) -> float:
        """Share of the log still live (0.0 for an empty log)."""
        return self.remaining_size / self.total_size if self.total_size > 0 else 0.0

    @property
    def is_empty(self) -> bool:
        return not self.ledgers


def extract_entry_log_metadata(log_id: int, path: str, max_record: int) -> EntryLogMetadata:
    """What the log at ``path`` holds, from its ledgers map, or by scanning it when it has none (the log
    being written when the bookie was killed). EntryLogCorruptedException, naming the file and the
    reason, when it cannot be told: GC then leaves the log alone (its live entries are never declared
    gone). An empty file (a crash right after its creation) holds nothing.
    """
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size == 0:
            return EntryLogMetadata(log_id)
        header = f.read(LOG_HEADER_SIZE)
        if len(header) < LOG_HEADER_SIZE or header[:4] != LOG_MAGIC:
            raise EntryLogCorruptedException(f"{path}: bad header (no BKLO entry log header in {len(header)} bytes)")
        _, _, map_offset, count = LOG_HEADER.unpack_from(header, 0)
        if map_offset == 0:
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                return _scan(log_id, path, data, max_record)
        # A log finished with no ledger (a bookie stopped before its first entry) ends at its empty map.
        if not LOG_HEADER_SIZE <= map_offset <= size or count < 0 or (map_offset == size and count):
            raise EntryLogCorruptedException(f"{path}: impossible header: ledgers map at offset {map_offset} "
                                             f"({count} ledgers) in a file of {size} bytes")
        f.seek(map_offset)
        raw = f.read()
    try:
        ledgers = decode_ledgers_map(raw, count)
    except (EntryLogCorruptedException, ValueError, struct.error) as exc:
        raise EntryLogCorruptedException(f"{path}: ledgers map at offset {map_offset} does not parse: {exc}") from None
    held = map_offset - LOG_HEADER_SIZE
    if any(n <= 0 for n in ledgers.values()) or sum(ledgers.values()) > held:
        raise EntryLogCorruptedException(f"{path}: ledgers map has impossible sizes: {sum(ledgers.values())} bytes "
                                         f"in a log holding {held}")
    meta = EntryLogMetadata(log_id)
    for ledger, nbytes in ledgers.items():
        meta.add_ledger_size(ledger, nbytes)
    return meta


def _scan(log_id: int, path: str, data: mmap.mmap, max_record: int) -> EntryLogMetadata:
    """Sum the records of an unfinished log per ledger. The scan ends at zeros up to the end of the file
    (never written) or at a record cut short by the end of the file (a torn tail: its bytes were never
    fsynced, so the journal still holds them and replay stored them again elsewhere); any other bad
    spot is corruption in the middle of the log."""
    meta = EntryLogMetadata(log_id)
    end, pos = len(data), LOG_HEADER_SIZE
    frame = entry_format.FRAME_LEN
    while pos + frame <= end:
        (size,) = entry_format.FRAME.unpack_from(data, pos)
        if size == 0 and not _any_byte(data, pos):
            return meta  # zeros to the end of the file: nothing was written there
        if size < entry_format.V1_HEADER_LEN or size > max_record:
            raise EntryLogCorruptedException(f"{path}: impossible record size {size} at offset {pos}")
        if pos + frame + size > end:
            return meta  # torn tail: the last record was cut short
        if data[pos + frame: pos + frame + 8] == b"\xff" * 8:
            return meta  # a ledgers map written by a roll that did not patch the header
        ledger, entry_id, _ = entry_format.peek_meta(data, pos + frame)
        if entry_id < 0 or ledger.ledger_id < 0:
            raise EntryLogCorruptedException(f"{path}: record at offset {pos} names ledger {ledger} entry "
                                             f"{entry_id}, which no entry is")
        meta.add_ledger_size(ledger, frame + size)
        pos += frame + size
    return meta  # at most a size int cut short follows


def _any_byte(data: mmap.mmap, pos: int) -> bool:
    """Whether anything but zeros follows ``pos``."""
    return bool(np.frombuffer(data, dtype=np.uint8, offset=pos).any())
