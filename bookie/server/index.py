"""Index files: per ledger, entry id -> entry log location (FileInfo + IndexPersistenceMgr).

Scope 0 (BookKeeper's IndexPersistenceMgr layout): ``<indexDir>/current/<hex((id>>8)&0xff)>/<hex(id&0xff)>/<hex(id)>.idx``.
Other scopes (BP-35 ids, 4 levels), kept under ``scoped/`` so the scope-0 tree stays BookKeeper's:
``<indexDir>/current/scoped/<scope hi32>/<scope lo32>/<id hi32>/<id lo32>.idx`` (8 hex digits each).

File layout: a 1024-byte header ``int "BKLE" | int version=1 | int keyLen | masterKey | int stateBits
(bit 0 = fenced) | int lacLen | explicitLac``, then 8 bytes per entry at ``1024 + entryId * 8``
(big-endian location, 0 = absent). The files are sparse: entry ids far apart leave holes, which
readers skip with SEEK_DATA/SEEK_HOLE (FileInfo.next_data) instead of reading them. Entry ids stop at
MAX_ENTRY_ID and master keys at MAX_MASTER_KEY_LENGTH, so every header and slot can be written.
"""
from __future__ import annotations

import errno
import logging
import os
import struct
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from bookie.exceptions import IndexCorruptedException
from bookie.ledger_id import LedgerId

log = logging.getLogger(__name__)

INDEX_MAGIC = b"BKLE"
INDEX_HEADER_SIZE = 1024
INDEX_HEADER_VERSION = 1
STATE_FENCED_BIT = 0x1
LOCATION_DTYPE = np.dtype(">i8")
# The largest entry id an index file represents: its location slot ends 1 TiB into the (sparse) file,
# well under ext4's 16 TiB file size limit (4 KiB blocks), and 1.4e11 entries are more than any ledger
# holds. Adds past it are refused (EBADREQ); reads past it are "no such entry".
MAX_ENTRY_ID = 2 ** 37 - 1
# The explicit LAC blob (DigestManager.build_lac): ledgerId | lac | digest, the digest 0, 4, 8 or 20 bytes.
LAC_METADATA_LENGTH = 16
EXPLICIT_LAC_LENGTHS = (16, 20, 24, 36)
_HEADER_FIXED = 20  # magic, version, keyLen, stateBits, lacLen
# The longest master key that still fits the header next to the largest explicit LAC (BookKeeper's is 20).
MAX_MASTER_KEY_LENGTH = INDEX_HEADER_SIZE - _HEADER_FIXED - max(EXPLICIT_LAC_LENGTHS)


@dataclass
class IndexHeader:
    master_key: bytes
    fenced: bool = False
    explicit_lac: bytes | None = None

    def encode(self) -> bytes:
        lac = self.explicit_lac or b""
        body = b"".join((INDEX_MAGIC, struct.pack(">ii", INDEX_HEADER_VERSION, len(self.master_key)), self.master_key,
                         struct.pack(">ii", STATE_FENCED_BIT if self.fenced else 0, len(lac)), lac))
        if len(body) > INDEX_HEADER_SIZE:
            raise ValueError("index header does not fit in 1024 bytes")
        return body.ljust(INDEX_HEADER_SIZE, b"\0")

    @classmethod
    def decode(cls, data: bytes, path: str) -> "IndexHeader":
        if len(data) < 16 or data[:4] != INDEX_MAGIC:
            raise IndexCorruptedException(f"{path}: missing BKLE index signature")
        _, key_len = struct.unpack_from(">ii", data, 4)
        key = data[12: 12 + key_len]
        state, lac_len = struct.unpack_from(">ii", data, 12 + key_len)
        start = 20 + key_len
        lac = data[start: start + lac_len] if lac_len > 0 else None
        return cls(key, bool(state & STATE_FENCED_BIT), lac)


def index_path(index_dir: str, ledger: LedgerId) -> str:
    scope, lid = ledger
    current = os.path.join(index_dir, "current")
    if scope == 0:
        return os.path.join(current, f"{(lid >> 8) & 0xFF:x}", f"{lid & 0xFF:x}", f"{lid:x}.idx")
    return os.path.join(current, "scoped", f"{scope >> 32:08x}", f"{scope & 0xFFFFFFFF:08x}", f"{lid >> 32:08x}",
                        f"{lid & 0xFFFFFFFF:08x}.idx")


class FileInfo:
    """One ledger's index file."""

    def __init__(self, path: str, fd: int):
        self.path = path
        self.fd = fd

    def read_header(self) -> IndexHeader:
        return IndexHeader.decode(os.pread(self.fd, INDEX_HEADER_SIZE, 0), self.path)

    def write_header(self, header: IndexHeader) -> None:
        os.pwrite(self.fd, header.encode(), 0)

    def entry_slots(self) -> int:
        return max(0, (os.fstat(self.fd).st_size - INDEX_HEADER_SIZE) // 8)

    def read_slots(self, first: int, count: int) -> np.ndarray:
        """Locations of entries ``first .. first+count-1`` (zeros past the end of the file)."""
        data = os.pread(self.fd, count * 8, INDEX_HEADER_SIZE + first * 8)
        out = np.zeros(count, dtype=np.int64)
        n = len(data) // 8
        out[:n] = np.frombuffer(data, dtype=LOCATION_DTYPE, count=n)
        return out

    def next_data(self, pos: int) -> int | None:
        """The first byte at or after ``pos`` in a data region of the file (None: only holes follow).

        Index files are sparse (a slot at 1024 + entryId * 8), so SEEK_DATA finds what is written without
        reading the holes. A file system without SEEK_DATA reports the whole file as data: still correct.
        """
        try:
            return os.lseek(self.fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return None
            raise

    def data_extents(self) -> list[tuple[int, int]]:
        """The file's data regions past the header, as (start, end) byte offsets."""
        extents, pos = [], INDEX_HEADER_SIZE
        while (start := self.next_data(pos)) is not None:
            pos = os.lseek(self.fd, start, os.SEEK_HOLE)
            extents.append((start, pos))
        return extents

    def write_slots(self, first: int, locations: np.ndarray) -> None:
        data = locations.astype(LOCATION_DTYPE).tobytes()
        pos = INDEX_HEADER_SIZE + first * 8
        view = memoryview(data)
        while view:
            n = os.pwrite(self.fd, view, pos)
            pos += n
            view = view[n:]

    def fsync(self) -> None:
        os.fsync(self.fd)


class IndexPersistenceMgr:
    """Finds, creates, lists and deletes index files; keeps at most ``openFileLimit`` of them open."""

    def __init__(self, index_dirs: list[str], open_file_limit: int):
        self.index_dirs = index_dirs
        self.open_file_limit = open_file_limit
        self._open: OrderedDict[LedgerId, FileInfo] = OrderedDict()
        self.writable_dirs = list(index_dirs)

    def find(self, ledger: LedgerId) -> FileInfo | None:
        info = self._open.get(ledger)
        if info is not None:
            self._open.move_to_end(ledger)
            return info
        for index_dir in self.index_dirs:
            path = index_path(index_dir, ledger)
            if os.path.exists(path):
                return self._remember(ledger, FileInfo(path, os.open(path, os.O_RDWR)))
        return None

    def create(self, ledger: LedgerId, header: IndexHeader) -> FileInfo:
        dirs = self.writable_dirs or self.index_dirs
        index_dir = dirs[hash(ledger) % len(dirs)]
        path = index_path(index_dir, ledger)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        info = FileInfo(path, os.open(path, os.O_RDWR | os.O_CREAT, 0o644))
        info.write_header(header)
        return self._remember(ledger, info)

    def _remember(self, ledger: LedgerId, info: FileInfo) -> FileInfo:
        self._open[ledger] = info
        while len(self._open) > self.open_file_limit:
            _, old = self._open.popitem(last=False)
            os.close(old.fd)
        return info

    def exists(self, ledger: LedgerId) -> bool:
        """Whether the ledger has an index file (nothing is opened)."""
        return ledger in self._open or any(os.path.exists(index_path(d, ledger)) for d in self.index_dirs)

    def ledgers(self) -> set[LedgerId]:
        """Every ledger with an index file, from the directory trees (GC's local snapshot)."""
        found: set[LedgerId] = set()
        for index_dir in self.index_dirs:
            current = os.path.join(index_dir, "current")
            for dirpath, dirnames, filenames in os.walk(current):
                rel = os.path.relpath(dirpath, current).split(os.sep)
                scoped = rel[0] == "scoped"
                if not scoped and rel != ["."] and len(rel) >= 2:
                    dirnames.clear()  # scope 0: the files are two levels down
                for name in filenames:
                    ledger = _ledger_of_index(rel, name, scoped)
                    if ledger is not None:
                        found.add(ledger)
        return found

    def delete(self, ledger: LedgerId) -> str | None:
        """Remove the ledger's index file; returns the directory it was in (to fsync), None if it had none."""
        info = self._open.pop(ledger, None)
        if info is not None:
            os.close(info.fd)
        removed = None
        for index_dir in self.index_dirs:
            path = index_path(index_dir, ledger)
            try:
                os.unlink(path)
                removed = os.path.dirname(path)
            except FileNotFoundError:
                pass
        return removed

    def close(self) -> None:
        for info in self._open.values():
            os.close(info.fd)
        self._open.clear()


def _ledger_of_index(rel: list[str], name: str, scoped: bool) -> LedgerId | None:
    """The ledger an index file names, from its place in the tree (None: not an index file of ours)."""
    if not name.endswith(".idx"):
        return None
    try:
        if scoped:  # scoped/<scope hi>/<scope lo>/<id hi>/<id lo>.idx
            if len(rel) != 4:
                return None
            return LedgerId(int(rel[1] + rel[2], 16), int(rel[3] + name[:-4], 16))
        if len(rel) != 2:
            return None
        return LedgerId(0, int(name[:-4], 16))
    except ValueError:
        return None
