"""Reading a journal back (BookKeeper's Journal.scanJournal): replay at start-up and
``bk shell readjournal``.

Every group ends with a padding record carrying ``BKGC`` + CRC32C + the group's length (see
bookie.server.journal), so each group is verified before it is handed over. At a bad spot the scan
looks for the next group that verifies: none means a torn tail (its fsync never returned, nothing in
it was acknowledged); one means corruption of acknowledged data (``JournalCorruption``).
"""
from __future__ import annotations

import logging
import mmap
import os
import struct
from dataclasses import dataclass, field
from typing import Callable, Iterator, NamedTuple

import crc32c

from bookie.proto import entry_format
from bookie.server.journal import (_GROUP_CHECK, _PAD_HEADER, GROUP_CHECK_MAGIC, HEADER_SIZE, JOURNAL_MAGIC,
                                   PADDING_MASK, LogMark, journal_path)

log = logging.getLogger(__name__)


@dataclass
class JournalCorruption:
    """A bad spot with a verified group after it: not a torn tail, so it held acknowledged entries."""

    path: str
    offset: int  # where the bad group starts
    reason: str
    next_group: int  # where the next verified group starts

    def __str__(self) -> str:
        return (f"{self.path} is corrupt at byte {self.offset} ({self.reason}); "
                f"a verified group follows at byte {self.next_group}")


@dataclass
class ScanResult:
    end: LogMark  # position just after the last good group
    groups: int = 0
    records: int = 0
    torn: str | None = None  # why the scan stopped early, if it did
    corrupt: JournalCorruption | None = None  # the stop is not a torn tail: verified groups follow it
    skipped: list[JournalCorruption] = field(default_factory=list)  # passed over (skip_invalid)


class _Group(NamedTuple):
    start: int
    records_end: int  # where its padding record starts
    end: int  # after its padding
    count: int  # records
    checked: bool  # its padding carried a BKGC check, and it matched


def scan_journal(journal_dir: str, log_id: int, start: int, on_group: Callable[[memoryview], None],
                 skip_invalid: bool = False) -> ScanResult:
    """Feed every complete, verified group of records from ``start`` on to ``on_group``.

    A group is handed over as one memoryview of framed records (padding excluded). The scan ends at
    the end of the journal (a zero length where a group starts). At a torn or corrupt group, and at
    that end, it looks for a verified group further on. None: the bad spot is a torn tail, whose
    fsync never returned, so nothing in it was acknowledged; ``ScanResult.torn`` says why the scan
    stopped. One: the bad spot is corruption of acknowledged data, named in ``ScanResult.corrupt``,
    and the scan stops there; with ``skip_invalid`` (skipReplayJournalInvalidRecord) it is logged,
    listed in ``ScanResult.skipped`` and the scan goes on at the verified group.
    """
    path = journal_path(journal_dir, log_id)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        if size < 8:
            return ScanResult(LogMark(log_id, start), torn=f"{path}: {size}-byte file has no journal header")
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        view = memoryview(mm)
        try:
            return _scan(mm, view, path, log_id, start, on_group, skip_invalid)
        finally:
            view.release()
            try:
                mm.close()
            except BufferError:  # a group's slice is still referenced (a cycle the GC has not freed yet):
                log.debug("journal %s: mapping left to the collector", path)  # unmapped when it goes


def _scan(data: mmap.mmap, view: memoryview, path: str, log_id: int, start: int, on_group,
          skip_invalid: bool) -> ScanResult:
    result = ScanResult(LogMark(log_id, start))
    if bytes(view[:4]) != JOURNAL_MAGIC:
        pos, reason = 0, "the header has no BKLG magic"
    else:
        (version,) = struct.unpack_from(">i", view, 4)
        pos, reason = max(start, HEADER_SIZE if version >= 5 else 8), None
        result.end = LogMark(log_id, pos)
    checked = False  # once one group carried a BKGC check, every later one must
    while True:
        if reason is None:
            group = _read_group(view, pos, checked)
            if isinstance(group, _Group):
                if group.count:
                    on_group(view[pos:group.records_end])
                    result.groups += 1
                    result.records += group.count
                checked = checked or group.checked
                pos = group.end
                result.end = LogMark(log_id, pos)
                continue
            reason = group  # None: a zero length, the end of the journal unless a verified group follows
        found = _find_verified_group(data, view, pos)
        if found is None:
            if reason is not None:
                result.torn = f"{path}: {reason}"
            return result
        corruption = JournalCorruption(path, pos, reason or "a zero length where a group should start", found.start)
        if not skip_invalid:
            result.corrupt = corruption
            result.torn = str(corruption)
            return result
        log.error("skipping corrupt journal bytes, as skipReplayJournalInvalidRecord=true asks: %s; "
                  "entries written there are lost on this bookie", corruption)
        result.skipped.append(corruption)
        if found.count:
            on_group(view[found.start:found.records_end])
            result.groups += 1
            result.records += found.count
        checked, pos, reason = True, found.end, None
        result.end = LogMark(log_id, pos)


def _read_group(view: memoryview, pos: int, require_check: bool) -> _Group | str | None:
    """The group starting at ``pos``; or why it is bad; or None at the end of the journal."""
    size, first, count = len(view), pos, 0
    while pos + 4 <= size:
        (length,) = entry_format.FRAME.unpack_from(view, pos)
        if length == 0:
            break
        if length == PADDING_MASK:
            if pos + 8 > size:
                return f"padding record at byte {pos} is cut short"
            (pad_len,) = struct.unpack_from(">i", view, pos + 4)
            end = pos + 8 + pad_len
            if pad_len < 0 or end > size:
                return f"padding of {pad_len} bytes at byte {pos} runs past the file end"
            has_check = pad_len >= _GROUP_CHECK.size and bytes(view[pos + 8: pos + 12]) == GROUP_CHECK_MAGIC
            if has_check:
                _, crc, glen = _GROUP_CHECK.unpack_from(view, pos + 8)
                if glen != pos - first or crc32c.crc32c(view[first:pos]) != crc:
                    return f"group at bytes {first}..{pos} fails its checksum"
            elif require_check:  # BookKeeper's own journals have no check; ours have it on every group
                return f"group at bytes {first}..{pos} lacks the BKGC check the groups before it carry"
            return _Group(first, pos, end, count, has_check)
        if length < 0 or pos + 4 + length > size:
            return f"record of length {length} at byte {pos} runs past the file end"
        pos += 4 + length
        count += 1
    return f"{count} records at bytes {first}..{pos} have no group end" if count else None


def _find_verified_group(data: mmap.mmap, view: memoryview, start: int) -> _Group | None:
    """The first group starting at or after ``start`` whose BKGC check matches its records.

    Candidates are found by their check's magic (a C-speed search), so the preallocated zeros after
    the end of a journal cost next to nothing.
    """
    size = len(view)
    at = data.find(GROUP_CHECK_MAGIC, start + _PAD_HEADER.size)
    while at >= 0 and at + _GROUP_CHECK.size <= size:
        pad = at - _PAD_HEADER.size
        marker, pad_len = _PAD_HEADER.unpack_from(view, pad)
        _, crc, glen = _GROUP_CHECK.unpack_from(view, at)
        first, end = pad - glen, pad + _PAD_HEADER.size + pad_len
        if marker == PADDING_MASK and pad_len >= _GROUP_CHECK.size and end <= size and first >= start:
            count = _count_records(view, first, pad)
            if count is not None and crc32c.crc32c(view[first:pad]) == crc:
                return _Group(first, pad, end, count, True)
        at = data.find(GROUP_CHECK_MAGIC, at + 1)
    return None


def _count_records(view: memoryview, pos: int, stop: int) -> int | None:
    """How many records exactly fill ``[pos, stop)``; None if they do not."""
    count = 0
    while pos < stop:
        if pos + 4 > stop:
            return None
        (length,) = entry_format.FRAME.unpack_from(view, pos)
        if length <= 0:
            return None
        pos += 4 + length
        count += 1
    return count if pos == stop else None


def iter_records(group: memoryview) -> Iterator[memoryview]:
    """The records (payloads) of a group handed over by ``scan_journal``."""
    return entry_format.iter_frames(group)
