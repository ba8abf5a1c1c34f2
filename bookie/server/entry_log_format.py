"""The entry log file format (BookKeeper's DefaultEntryLogger files), read and written by the
entry logger, compaction, GC and ``bk shell readlog``.

``<ledgerDir>/current/<hex logId>.log``: a 1024-byte header (``BKLO | int ver=1 | long ledgersMapOffset |
int ledgersCount``), then records ``int32 size | entry``. An entry's *location* is
``logId << 32 | offset`` (the offset just after its size int). A finished log ends with its ledgers map:
records framed like entries, ledger id -1 and a marker entry id, listing (ledger, bytes) pairs.
"""
from __future__ import annotations

import os
import struct

from bookie.exceptions import EntryLogCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format

LOG_MAGIC = b"BKLO"
LOG_HEADER_SIZE = 1024
LOG_HEADER_VERSION = 1
LOG_HEADER = struct.Struct(">4siqi")  # magic, version, ledgers map offset, ledgers count
# Ledgers map records are framed like entries, with ledger id -1 and a marker entry id.
INVALID_LEDGER_ID = -1
LEDGERS_MAP_ENTRY_ID = -2
LEDGERS_MAP_SCOPED_ENTRY_ID = -3  # our addition: (scope, ledger, bytes) triples for 128-bit ids
LEDGERS_MAP_MAX_BATCH = 10000
MAX_LOG_SIZE = (1 << 32) - 1  # offsets are 32 bits in a location


def location(log_id: int, offset: int) -> int:
    return (log_id << 32) | offset


def log_path(ledger_dir: str, log_id: int) -> str:
    return os.path.join(ledger_dir, "current", f"{log_id:x}.log")


def entry_log_paths(ledger_dirs: list[str]) -> dict[int, str]:
    """The entry logs in the ledger directories, by id: every ``current/<hex id>.log`` file (a compaction's
    ``.compacting`` / ``.compacted`` files are not entry logs yet)."""
    paths: dict[int, str] = {}
    for ledger_dir in ledger_dirs:
        current = os.path.join(ledger_dir, "current")
        for name in os.listdir(current) if os.path.isdir(current) else ():
            if name.endswith(".log"):
                try:
                    paths[int(name[:-4], 16)] = os.path.join(current, name)
                except ValueError:
                    pass  # not one of ours
    return paths


def encode_log_header(map_offset: int = 0, ledgers_count: int = 0) -> bytes:
    """The 1024-byte header of an entry log (map offset 0: not finished yet)."""
    return LOG_HEADER.pack(LOG_MAGIC, LOG_HEADER_VERSION, map_offset, ledgers_count).ljust(LOG_HEADER_SIZE, b"\0")


def log_id_in(name: str) -> int | None:
    """The log id a file of ``current/`` holds: ``<id>.log``, or a compaction's ``<id>.log.compacting``
    and ``<id>.log.<old id>.compacted`` (their ids are taken too, so the writer never reuses them)."""
    head, dot, _ = name.partition(".log")
    try:
        return int(head, 16) if dot else None
    except ValueError:
        return None


def encode_ledgers_map(ledgers: dict[LedgerId, int]) -> bytes:
    plain = [(lid.ledger_id, size) for lid, size in ledgers.items() if lid.scope_id == 0]
    scoped = [(lid.scope_id, lid.ledger_id, size) for lid, size in ledgers.items() if lid.scope_id != 0]
    parts = []
    for rows, marker, fmt in ((plain, LEDGERS_MAP_ENTRY_ID, ">qq"), (scoped, LEDGERS_MAP_SCOPED_ENTRY_ID, ">qqq")):
        for i in range(0, len(rows), LEDGERS_MAP_MAX_BATCH):
            batch = rows[i: i + LEDGERS_MAP_MAX_BATCH]
            body = struct.pack(">qqi", INVALID_LEDGER_ID, marker, len(batch)) + b"".join(struct.pack(fmt, *r) for r in batch)
            parts += (entry_format.FRAME.pack(len(body)), body)
    return b"".join(parts)


def decode_ledgers_map(data: bytes, count: int) -> dict[LedgerId, int]:
    result: dict[LedgerId, int] = {}
    for record in entry_format.iter_frames(data):
        lid, marker, n = struct.unpack_from(">qqi", record)
        if lid != INVALID_LEDGER_ID or marker not in (LEDGERS_MAP_ENTRY_ID, LEDGERS_MAP_SCOPED_ENTRY_ID):
            raise EntryLogCorruptedException("ledgers map record has a bad marker")
        if marker == LEDGERS_MAP_ENTRY_ID:
            for ledger_id, size in struct.iter_unpack(">qq", record[20: 20 + 16 * n]):
                result[LedgerId(0, ledger_id)] = size
        else:
            for scope, ledger_id, size in struct.iter_unpack(">qqq", record[20: 20 + 24 * n]):
                result[LedgerId(scope, ledger_id)] = size
    if len(result) != count:
        raise EntryLogCorruptedException(f"ledgers map lists {len(result)} ledgers, header says {count}")
    return result


def scan_entry_log(path: str):
    """Yield ``(offset, entry)`` for every record of an entry log file, stopping at its ledgers map.

    For ``bk shell readlog`` and for GC of logs that were never finished (no ledgers map).
    """
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != LOG_MAGIC:
        raise EntryLogCorruptedException(f"{path}: no BKLO entry log header")
    _, _, map_offset, _ = LOG_HEADER.unpack_from(data, 0)
    end = map_offset or len(data)
    pos = LOG_HEADER_SIZE
    while pos + entry_format.FRAME_LEN <= end:
        (size,) = entry_format.FRAME.unpack_from(data, pos)
        if size <= 0 or pos + entry_format.FRAME_LEN + size > end:
            return  # zeros or a record cut short: the end of what was written
        entry = data[pos + entry_format.FRAME_LEN: pos + entry_format.FRAME_LEN + size]
        if entry_format.peek_meta(entry, 0)[0].scope_id == 0 and entry[:8] == b"\xff" * 8:
            return  # a ledgers map written by a roll that did not patch the header
        yield pos + entry_format.FRAME_LEN, entry
        pos += entry_format.FRAME_LEN + size
