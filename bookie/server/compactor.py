"""Entry-log compaction: live entries of a mostly-dead log copied to a new log, transactionally
(BookKeeper's TransactionalEntryLogCompactor, AbstractLogCompactor and its Throttler).

One compaction of log ``O`` into a new log ``N`` (ids from the entry logger's sequence):

1. the live entries of ``O`` (ledgers still in its metadata, whose index location still points at
   that very record) are copied, runs of records at a time, to ``<N>.log.compacting``: a header,
   the records, a ledgers map, then fsync;
2. rename to ``<N>.log.<O>.compacted`` and fsync the directory: the commit point;
3. the index is repointed at ``N`` (only entries that still point into ``O``: an entry written
   again meanwhile keeps its newer location) and flushed durably;
4. ``O`` is deleted, then ``N`` gets its final name ``<N>.log``.

Live entries are found in the index, not by scanning ``O``: for each ledger of ``O``'s metadata, the
index pages the ledger stores are read one at a time (``LedgerCache.stored_pages``: its cached pages and
the data regions of its index file; holes, such as the 134 million pages below an entry id 2^37-1,
cost nothing) and only the rows whose location lies in ``O`` are kept. The cost follows the pages a
ledger stores, never its last entry id, and memory is one page plus the live rows. Step 3 looks the
current locations of the copies' entries up on their own pages only (``LedgerCache.get_sorted``).
``O`` itself is mapped (mmap), not read: sizes and ids are gathered from the pages of the live records
only, and runs of back-to-back records are copied by the kernel (copy_file_range), as fast as the
Throttler lets them.

Step 4 runs on a finisher thread, overlapping the next log's copy; the next log's step 3 waits for it,
and ``drain()`` at the end of a pass, so the order on disk is unchanged.

``O`` is deleted *before* the final rename (BookKeeper renames first): a crash between the two then
leaves ``.compacted``, which recovery finishes, instead of an ``O.log`` that nothing marks as
compacted and that would stay behind as a second copy of its live entries.

``clean_up_and_recover`` (at bookie start and at the start of each GC pass) rolls back a
``.compacting`` file (deleted: ``O`` is untouched) and rolls forward a ``.compacted`` one (steps 3
and 4 again; repointing is idempotent). A crash at any moment leaves every live entry readable
exactly once, and no compaction file behind.

Readers never miss an entry: the index is repointed under the storage lock before the old log is
removed, and a range read that looked up a location in a log removed before it read it looks the
entries up again (ledger_storage).

Test seams, unset in production: a bookie started with ``BK_COMPACTION_STOP_AT=<step>`` stops itself
(SIGSTOP) at that step of its next compaction, for a crash test to SIGKILL it there;
``BK_COMPACTION_HOLD_FILE=<file>`` holds the compaction at a step the file names while the bookie serves.
"""
from __future__ import annotations

import logging
import mmap
import os
import signal
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from bookie.exceptions import EntryLogCorruptedException
from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.server.compaction_throttler import Throttler
from bookie.server.entry_log_format import (LOG_HEADER_SIZE, encode_ledgers_map, encode_log_header, log_path,
                                            scan_entry_log)
from bookie.server.entry_log_metadata import EntryLogMetadata
from bookie.server.ledger_storage import InterleavedLedgerStorage
from bookie.util.io import fsync_dir, pwritev_all

log = logging.getLogger(__name__)

COMPACTING_SUFFIX = ".compacting"
COMPACTED_SUFFIX = ".compacted"
COPY_CHUNK_BYTES = 8 << 20  # the "copying" test step comes after each this many bytes copied
# Test seam: a bookie started with this variable set to a step name stops itself (SIGSTOP) at that
# step of its next compaction, so a test can SIGKILL it there. Unset in production.
STOP_AT_ENV = "BK_COMPACTION_STOP_AT"
STEPS = ("copying", "compacting_written", "compacted", "index_flushed", "old_log_deleted", "done")
# Test seam that holds the compaction without stopping the process (reads go on): at a step named in
# this file, the compactor writes the step to ``<file>.at`` and waits until the file names another.
# "index_flushed" is reached under the storage lock: held there, reads would wait too.
HOLD_FILE_ENV = "BK_COMPACTION_HOLD_FILE"
HOLD_POLL_SECONDS = 0.01


def compacting_name(new_id: int) -> str:
    return f"{new_id:x}.log{COMPACTING_SUFFIX}"


def compacted_name(new_id: int, old_id: int) -> str:
    return f"{new_id:x}.log.{old_id:x}{COMPACTED_SUFFIX}"


def logs_to_compact(metas: Iterable[EntryLogMetadata], threshold: float) -> list[EntryLogMetadata]:
    """The logs one compaction round takes (GarbageCollectorThread.doCompactEntryLogs): usage under
    ``threshold``, emptiest first. A threshold <= 0 disables the round; a log with no live ledger is
    not compacted but deleted by entry-log GC."""
    if threshold <= 0:
        return []
    chosen = [m for m in metas if not m.is_empty and m.total_size > 0 and m.usage < threshold]
    return sorted(chosen, key=lambda m: (m.usage, m.entry_log_id))


@dataclass(frozen=True)
class RecoveryStep:
    """What ``clean_up_and_recover`` does with one compaction file of ``current/``."""
    kind: str  # "roll_back": delete the unfinished copy; "roll_forward": finish the compaction
    name: str
    new_id: int
    old_id: int | None = None


def recovery_plan(names: Iterable[str]) -> list[RecoveryStep]:
    """The recovery steps the files of one ``current/`` directory call for (other files: nothing).

    ``<N>.log.compacting``: the copy may be incomplete, and nothing points at it: delete it; the old
    log was never touched. ``<N>.log.<O>.compacted``: the copy is complete and durable: repoint the
    index entries still in ``O`` (idempotent), delete ``O`` if still there, rename to ``<N>.log``.
    """
    steps = []
    for name in sorted(names):
        head, _, tail = name.partition(".log")
        try:
            if tail == COMPACTING_SUFFIX:
                steps.append(RecoveryStep("roll_back", name, int(head, 16)))
            elif tail.startswith(".") and tail.endswith(COMPACTED_SUFFIX):
                old = tail[1: -len(COMPACTED_SUFFIX)]
                steps.append(RecoveryStep("roll_forward", name, int(head, 16), int(old, 16)))
        except ValueError:
            log.warning("compaction recovery: %s is not a compaction file name; left alone", name)
    return steps


@dataclass
class _LiveEntries:
    """The live records of one log, sorted by offset: parallel arrays, one row per record."""
    ledgers: list[LedgerId]
    ledger_index: np.ndarray  # index into ``ledgers``
    entry_ids: np.ndarray
    offsets: np.ndarray  # record offsets in the old log (just after the size int)


@dataclass
class _Runs:
    """Runs of back-to-back live records: the row of each run's first record, and its byte span."""
    first: np.ndarray
    spans: np.ndarray  # (n, 2): begin (its first size int) and end of each run in the old log


class TransactionalEntryLogCompactor:
    def __init__(self, storage: InterleavedLedgerStorage, conf, throttler: Throttler | None = None):
        self.storage = storage
        self.entry_logger = storage.entry_logger
        self.max_record = conf["nettyMaxFrameSizeBytes"]
        self.throttler = throttler or Throttler.from_conf(conf)
        self._stop_at = os.environ.get(STOP_AT_ENV)
        self._hold_file = os.environ.get(HOLD_FILE_ENV)
        self._lock = threading.Lock()  # one compaction at a time (BookKeeper's is single-threaded too)
        # The file work after a log's index is flushed (delete the old log, final rename) runs here,
        # overlapping the next log's copy; drain() waits for it. The order on disk is unchanged.
        self._finisher = ThreadPoolExecutor(1, thread_name_prefix="compaction-finisher")
        self._finishing: Future | None = None

    def _step(self, name: str) -> None:
        if name == self._stop_at:
            log.warning("compaction stops at step %s (%s is set)", name, STOP_AT_ENV)
            os.kill(os.getpid(), signal.SIGSTOP)
        if self._hold_file and _read_text(self._hold_file) == name:
            log.warning("compaction held at step %s while %s names it", name, self._hold_file)
            _write_atomically(self._hold_file + ".at", name)
            while _read_text(self._hold_file) == name:
                time.sleep(HOLD_POLL_SECONDS)

    # -- compaction ---------------------------------------------------------------------------------
    def compact(self, meta: EntryLogMetadata) -> int:
        """Compact one finished log; returns the bytes reclaimed (old size - new size)."""
        with self._lock:
            old_id = meta.entry_log_id
            old_path = self.entry_logger.path_of(old_id)
            if old_path is None:
                raise EntryLogCorruptedException(f"entry log {old_id:x}.log does not exist")
            if old_id == self.entry_logger.log_id:
                raise ValueError(f"entry log {old_id:x}.log is being written: it cannot be compacted")
            current = os.path.dirname(old_path)
            live = self._live_entries(old_id, meta.ledgers)
            if not len(live.entry_ids):  # nothing live: no copy to make
                old_size = os.path.getsize(old_path)
                with self.storage.lock:
                    self.entry_logger.remove_log(old_id)
                fsync_dir(current)
                log.info("entry log %x.log holds no live entry: deleted, %d bytes reclaimed", old_id, old_size)
                return old_size
            new_id = self.entry_logger.reserve_log_id(os.path.dirname(current))
            compacting = os.path.join(current, compacting_name(new_id))
            try:
                new_offsets, new_size = self._copy(old_path, compacting, live)
            except Exception:  # a failed copy leaves nothing (a kill leaves it to clean_up_and_recover)
                _unlink(compacting)
                raise
            compacted = os.path.join(current, compacted_name(new_id, old_id))
            os.rename(compacting, compacted)
            fsync_dir(current)
            self._step("compacted")
            old_size = os.path.getsize(old_path)
            # Readers reach N through an fd opened now, which survives the final rename.
            self.entry_logger.add_log(new_id, compacted, os.open(compacted, os.O_RDONLY))
            groups = _by_ledger(live, (new_id << 32) | new_offsets)
            self._repoint_and_flush(old_id, groups)
            self._finishing = self._finisher.submit(self._finish_files, old_id, new_id, compacted)
            log.info("compacted entry log %x.log into %x.log: %d live entries, %d bytes reclaimed",
                     old_id, new_id, len(live.entry_ids), old_size - new_size)
            return old_size - new_size

    def _live_entries(self, old_id: int, ledgers: Iterable[LedgerId]) -> _LiveEntries:
        """Entries of ``ledgers`` whose index location is a record of log ``old_id``: the index pages each
        ledger stores are read one at a time (holes cost nothing), and only their rows that point into the
        log are kept."""
        cache = self.storage.cache
        per = cache.entries_per_page
        kept: list[LedgerId] = []
        rows, ids, offs = [], [], []  # per page with live rows: its ledger's row in ``kept``, ids, offsets
        with self.storage.lock:
            for ledger in ledgers:
                state = self.storage.descriptor(ledger)
                if state is None or state.last_entry_id < 0:
                    continue
                for page_no, slots in cache.stored_pages(ledger, state.last_entry_id):
                    here = ((slots >> 32) == old_id).nonzero()[0]
                    if old_id == 0:  # an empty slot (location 0: a striped ledger's entry held by another
                        # bookie) is no record of log 0; a real location is never 0, it lies past the header
                        here = here[slots[here] != 0]
                    if len(here):
                        rows.append(len(kept))
                        ids.append(here + page_no * per)
                        offs.append(slots[here] & 0xFFFFFFFF)
                if rows and rows[-1] == len(kept):
                    kept.append(ledger)
        if not kept:
            empty = np.zeros(0, dtype=np.int64)
            return _LiveEntries([], empty, empty, empty)
        offsets = np.concatenate(offs)
        order = np.argsort(offsets, kind="stable")
        ledger_index = np.repeat(np.array(rows, dtype=np.int64), [len(part) for part in ids])
        return _LiveEntries(kept, ledger_index[order], np.concatenate(ids)[order], offsets[order])

    def _copy(self, old_path: str, new_path: str, live: _LiveEntries) -> tuple[np.ndarray, int]:
        """Write the live records to ``new_path`` as a finished, fsynced entry log; returns the records'
        offsets in it and its size. The old log is mapped, not read: sizes and ids are gathered from the
        pages of the live records only, and runs of back-to-back records are copied by the kernel
        (copy_file_range), COPY_CHUNK_BYTES at a time between throttle waits."""
        src = os.open(old_path, os.O_RDONLY)
        dst = os.open(new_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            with mmap.mmap(src, 0, access=mmap.ACCESS_READ) as mapped:
                sizes, runs = self._live_records(mapped, live, old_path)
            os.pwrite(dst, encode_log_header(), 0)
            framed = sizes + entry_format.FRAME_LEN
            new_offsets = LOG_HEADER_SIZE + np.cumsum(framed) - sizes
            pos, copied = LOG_HEADER_SIZE, 0
            run_records = np.diff(np.r_[runs.first, len(sizes)])
            for (a, b), records in zip(runs.spans.tolist(), run_records.tolist()):
                pos = _copy_range(src, dst, a, b - a, pos)
                copied += b - a
                self.throttler.acquire(int(records), b - a)
                if copied >= COPY_CHUNK_BYTES:
                    copied = 0
                    self._step("copying")
            self._step("copying")
            per_ledger = np.bincount(live.ledger_index, weights=framed, minlength=len(live.ledgers))
            ledgers_map = {ledger: int(size) for ledger, size in zip(live.ledgers, per_ledger)}
            map_offset = pos
            pos = pwritev_all(dst, [encode_ledgers_map(ledgers_map)], pos)
            os.pwrite(dst, encode_log_header(map_offset, len(ledgers_map)), 0)
            os.fsync(dst)
        finally:
            os.close(src)
            os.close(dst)
        self._step("compacting_written")
        return new_offsets, pos

    def _live_records(self, mapped: mmap.mmap, live: _LiveEntries, path: str) -> tuple[np.ndarray, "_Runs"]:
        """Sizes of the live records (checked with numpy gathers: sizes in bounds, ids the index's) and
        the runs of back-to-back ones. A record that is not what the index says stops the compaction:
        the log is left as it is."""
        data = np.frombuffer(mapped, dtype=np.uint8)
        try:
            offsets = live.offsets
            if len(offsets) and (offsets[0] < LOG_HEADER_SIZE or offsets[-1] + entry_format.V1_HEADER_LEN > len(data)):
                raise EntryLogCorruptedException(f"{path}: the index locates entries outside its {len(data)} bytes")
            sizes = entry_format.gather_be(data, offsets - entry_format.FRAME_LEN, 4).astype(np.int64)
            bad = np.flatnonzero((sizes < entry_format.V1_HEADER_LEN) | (sizes > self.max_record)
                                 | (offsets + sizes > len(data)))
            if len(bad):
                k = int(bad[0])
                raise EntryLogCorruptedException(f"{path}: record at offset {offsets[k]} has bad size {sizes[k]}")
            wrong = self._wrong_id(data, live)
            if wrong is not None:  # raised here, not under the gather: its frame would pin the map open
                raise EntryLogCorruptedException(f"{path}: {wrong}")
        finally:
            del data  # the map closes after this
        begins, ends = offsets - entry_format.FRAME_LEN, offsets + sizes
        first = np.r_[0, np.flatnonzero(begins[1:] != ends[:-1]) + 1]
        last = np.r_[first[1:] - 1, len(offsets) - 1]
        return sizes, _Runs(first, np.stack([begins[first], ends[last]], axis=1))

    @staticmethod
    def _wrong_id(data: np.ndarray, live: _LiveEntries) -> str | None:
        """The first live record whose ids are not the index's, described; None if all match."""
        scopes = np.array([lid.scope_id for lid in live.ledgers], dtype=np.int64)[live.ledger_index]
        lids = np.array([lid.ledger_id for lid in live.ledgers], dtype=np.int64)[live.ledger_index]
        id_at = live.offsets + np.where(scopes != 0, 1 + 8, 0)  # v2 records: flags byte and scope first
        wrong = np.flatnonzero((entry_format.gather_be(data, id_at, 8) != lids) | (entry_format.gather_be(data, id_at + 8, 8) != live.entry_ids))
        if len(wrong):
            j = int(wrong[0])
            return (f"record at offset {live.offsets[j]} is not ledger {live.ledgers[live.ledger_index[j]]} "
                    f"entry {live.entry_ids[j]}, which the index puts there")
        return None

    def drain(self) -> None:
        """Wait until the last compacted log's files are final (its old log deleted, its rename done);
        raises what that work raised."""
        finishing, self._finishing = self._finishing, None
        if finishing is not None:
            finishing.result()

    def shutdown(self) -> None:
        try:
            self.drain()
        finally:
            self._finisher.shutdown(wait=True)

    def _finish(self, old_id: int, new_id: int, compacted: str,
                groups: dict[LedgerId, tuple[np.ndarray, np.ndarray]]) -> None:
        """Steps 3 and 4, from the commit point on (recovery's roll forward)."""
        self._repoint_and_flush(old_id, groups)
        self._finish_files(old_id, new_id, compacted)

    def _repoint_and_flush(self, old_id: int, groups: dict[LedgerId, tuple[np.ndarray, np.ndarray]]) -> None:
        """Step 3: the index points at the copies, durably. A previous log's file work is waited for
        first, so no two logs are between steps 3 and 4 at once."""
        self.drain()
        with self.storage.lock:
            self._repoint(old_id, groups)
            self.storage.flush()  # entry logs, index pages and headers, fsynced
            self._step("index_flushed")

    def _finish_files(self, old_id: int, new_id: int, compacted: str) -> None:
        """Step 4. Outside the storage lock (unlinking a large cached file takes milliseconds): the
        index no longer points into the old log, and a read that looked up a location in it earlier
        finds it removed and looks the entry up again."""
        self.entry_logger.remove_log(old_id)
        current = os.path.dirname(compacted)
        fsync_dir(current)
        self._step("old_log_deleted")
        final = log_path(os.path.dirname(current), new_id)
        os.rename(compacted, final)
        fsync_dir(current)
        self.entry_logger.add_log(new_id, final)
        self._step("done")

    def _repoint(self, old_id: int, groups: dict[LedgerId, tuple[np.ndarray, np.ndarray]]) -> None:
        """Point each entry still located in ``old_id`` at its copy (caller holds the storage lock). The
        current locations are looked up on the pages the entries fall on, nothing between them."""
        cache = self.storage.cache
        for ledger, (eids, new_locs) in groups.items():
            if self.storage.descriptor(ledger) is None:
                continue  # deleted meanwhile
            if (eids[1:] < eids[:-1]).any():  # in the log's order: to id order, for lookups page by page
                order = np.argsort(eids, kind="stable")
                eids, new_locs = eids[order], new_locs[order]
            current = cache.get_sorted(ledger, eids)
            still = ((current >> 32) == old_id) & (current != 0)
            if still.any():
                cache.put(ledger, eids[still], new_locs[still])

    # -- recovery -----------------------------------------------------------------------------------
    def clean_up_and_recover(self) -> list[RecoveryStep]:
        """Finish or roll back every compaction a crash interrupted (AbstractLogCompactor.cleanUpAndRecover)."""
        done = []
        with self._lock:
            self.drain()
            for ledger_dir in self.entry_logger.ledger_dirs:
                current = os.path.join(ledger_dir, "current")
                for step in recovery_plan(os.listdir(current)):
                    path = os.path.join(current, step.name)
                    if step.kind == "roll_back":
                        log.info("compaction recovery: %s was not finished; deleted", path)
                        _unlink(path)
                        fsync_dir(current)
                    else:
                        log.info("compaction recovery: finishing %s (entry log %x.log into %x.log)",
                                 path, step.old_id, step.new_id)
                        self.entry_logger.add_log(step.new_id, path)
                        self._finish(step.old_id, step.new_id, path, _groups_of_log(path, step.new_id))
                    done.append(step)
        return done


def _by_ledger(live: _LiveEntries, new_locs: np.ndarray) -> dict[LedgerId, tuple[np.ndarray, np.ndarray]]:
    """Entry ids and new locations per ledger."""
    order = np.argsort(live.ledger_index, kind="stable")
    rows = live.ledger_index[order]
    cuts = np.flatnonzero(np.diff(rows)) + 1
    return {live.ledgers[int(part[0])]: (live.entry_ids[sel], new_locs[sel])
            for part, sel in zip(np.split(rows, cuts), np.split(order, cuts)) if len(part)}


def _groups_of_log(path: str, log_id: int) -> dict[LedgerId, tuple[np.ndarray, np.ndarray]]:
    """Entry ids and locations per ledger of a compacted log, from its records (recovery only)."""
    found: dict[LedgerId, tuple[list, list]] = {}
    for offset, entry in scan_entry_log(path):
        scope, lid, eid, _ = entry_format.peek_ids(entry, 0)
        ids, locs = found.setdefault(LedgerId(scope, lid), ([], []))
        ids.append(eid)
        locs.append((log_id << 32) | offset)
    return {ledger: (np.array(ids, dtype=np.int64), np.array(locs, dtype=np.int64))
            for ledger, (ids, locs) in found.items()}


def _copy_range(src: int, dst: int, offset: int, count: int, pos: int) -> int:
    """Copy ``count`` bytes of ``src`` at ``offset`` to ``dst`` at ``pos`` in the kernel; returns the end."""
    while count > 0:
        n = os.copy_file_range(src, dst, count, offset, pos)
        if n == 0:
            raise EntryLogCorruptedException(f"entry log ends {count} bytes before a record it holds")
        offset, pos, count = offset + n, pos + n, count - n
    return pos


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _read_text(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except FileNotFoundError:
        return None


def _write_atomically(path: str, text: str) -> None:
    with open(path + ".tmp", "w") as f:
        f.write(text)
    os.replace(path + ".tmp", path)
