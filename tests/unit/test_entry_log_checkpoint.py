"""A roll and a checkpoint keep the entry log's fsyncs off the add path (BookKeeper's rotated logs), and
the writer hands the log to the disk as it goes (flushEntrylogBytes)."""
from __future__ import annotations

import os
import threading
import time

import pytest

from bookie.ledger_id import LedgerId
from bookie.server import entry_logger
from bookie.server.entry_log_format import LOG_HEADER, LOG_HEADER_SIZE
from bookie.util.io import start_writeback
from tests.helpers.engine_entries import write

DEADLINE = 60


def _header_map_offset(path: str) -> int:
    with open(path, "rb") as f:
        return LOG_HEADER.unpack(f.read(LOG_HEADER.size))[2]


def test_a_roll_leaves_the_fsync_and_the_header_to_the_checkpoint(make_bookie, monkeypatch):
    bookie = make_bookie()
    logger = bookie.storage.entry_logger
    synced: list[int] = []
    real_fsync = logger._fsync
    monkeypatch.setattr(logger, "_fsync", lambda fd: synced.append(fd) or real_fsync(fd))
    ledger = LedgerId(0, 1)
    write(bookie, ledger, 0, 10)
    rolled, rolled_fd = logger.log_id, logger.fd
    logger.roll()
    assert synced == [], "a roll runs on the add path: it must not fsync"
    path = logger.path_of(rolled)
    assert _header_map_offset(path) == 0, "the header may point at the map only once the map is on disk"
    assert set(logger.read_ledgers_map(rolled)) == {ledger}  # served from memory meanwhile

    bookie.checkpoint()
    assert synced.count(rolled_fd) == 2  # entries and map, then the header pointing at them
    assert _header_map_offset(path) > 0
    assert set(logger.read_ledgers_map(rolled)) == {ledger}  # now from the file
    assert not _open_for_writing(path), "a rotated log's write fd closes once the checkpoint has finished it"


def _open_for_writing(path: str) -> bool:
    """Whether this process holds ``path`` open for writing (a read fd of it may stay)."""
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") != path:
                continue
            with open(f"/proc/self/fdinfo/{fd}") as info:
                flags = int(info.read().split("flags:")[1].split()[0], 8)
        except OSError:
            continue  # closed meanwhile
        if flags & (os.O_WRONLY | os.O_RDWR):
            return True
    return False


def test_adds_go_on_while_a_checkpoint_fsyncs_the_entry_log(make_bookie, monkeypatch):
    bookie = make_bookie()
    logger = bookie.storage.entry_logger
    in_fsync, release, held_too_long = threading.Event(), threading.Event(), threading.Event()
    real_fsync = logger._fsync

    def held_fsync(fd: int) -> None:
        in_fsync.set()
        if not release.wait(DEADLINE):
            held_too_long.set()  # the adds below waited for this fsync: what must not happen
        real_fsync(fd)
    monkeypatch.setattr(logger, "_fsync", held_fsync)
    ledger = LedgerId(0, 1)
    payloads = write(bookie, ledger, 0, 5)
    checkpoint = threading.Thread(target=bookie.checkpoint)
    checkpoint.start()
    try:
        assert in_fsync.wait(DEADLINE)
        # The checkpoint is inside the entry log's fsync: adds (storage lock, journal fsync) complete,
        # and so does a roll.
        payloads += write(bookie, ledger, 5, 5)
        logger.roll()
        payloads += write(bookie, ledger, 10, 5)
    finally:
        release.set()
        checkpoint.join(DEADLINE)
    assert not held_too_long.is_set(), "adds waited for the checkpoint's entry-log fsync"
    assert not checkpoint.is_alive()
    assert all(bookie.read_entry(ledger, e).endswith(p) for e, p in enumerate(payloads))


def _writebacks(monkeypatch) -> list[tuple[int, int]]:
    calls: list[tuple[int, int]] = []
    real = entry_logger.start_writeback
    monkeypatch.setattr(entry_logger, "start_writeback", lambda fd, offset, n: calls.append((offset, n)) or real(fd, offset, n))
    return calls


def _written_through(logger, end: int) -> None:
    """Wait until the writer thread has written the current log up to ``end``."""
    deadline = time.monotonic() + DEADLINE
    while logger._flushed < end:
        assert time.monotonic() < deadline, "the entry log writer never wrote the buffer"
        time.sleep(0.01)


def test_the_writer_starts_writeback_every_flush_entrylog_bytes(make_bookie, monkeypatch):
    calls = _writebacks(monkeypatch)
    bookie = make_bookie(writeBufferSizeBytes=16 * 1024, flushEntrylogBytes=64 * 1024)
    logger = bookie.storage.entry_logger
    for first in range(0, 400, 20):
        write(bookie, LedgerId(0, 1), first, 20, size=1000)  # 400 entries: ~400 KiB
    _written_through(logger, logger.position - 16 * 1024)
    assert len(calls) >= 4
    # Back to back from the log's header on, each range at least flushEntrylogBytes long.
    assert calls[0][0] == LOG_HEADER_SIZE
    assert all(a + n == b for (a, n), (b, _) in zip(calls, calls[1:]))
    assert all(n >= 64 * 1024 for _, n in calls)


def test_no_writeback_is_started_when_flush_entrylog_bytes_is_zero(make_bookie, monkeypatch):
    calls = _writebacks(monkeypatch)
    bookie = make_bookie(writeBufferSizeBytes=16 * 1024, flushEntrylogBytes=0)
    logger = bookie.storage.entry_logger
    for first in range(0, 400, 20):
        write(bookie, LedgerId(0, 1), first, 20, size=1000)
    _written_through(logger, logger.position - 16 * 1024)
    assert calls == []


def test_start_writeback_on_a_file_and_on_a_bad_fd(tmp_path):
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        os.write(fd, b"x" * 65536)
        start_writeback(fd, 0, 65536)  # returns at once; the data stays readable
        assert os.pread(fd, 4, 100) == b"xxxx"
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        start_writeback(fd, 0, 65536)  # closed: EBADF, not silence


def test_removing_a_finished_log_does_not_wait_for_a_checkpoint_fsync(make_bookie, monkeypatch):
    bookie = make_bookie()
    logger = bookie.storage.entry_logger
    write(bookie, LedgerId(0, 1), 0, 5)
    finished = logger.log_id
    logger.roll()
    bookie.checkpoint()  # the rolled log is finished: fsynced, header patched, write fd closed
    write(bookie, LedgerId(0, 2), 0, 5)
    in_fsync, release, held_too_long = threading.Event(), threading.Event(), threading.Event()
    real_fsync = logger._fsync

    def held_fsync(fd: int) -> None:
        in_fsync.set()
        if not release.wait(DEADLINE):
            held_too_long.set()
        real_fsync(fd)
    monkeypatch.setattr(logger, "_fsync", held_fsync)
    checkpoint = threading.Thread(target=bookie.checkpoint)
    checkpoint.start()
    try:
        assert in_fsync.wait(DEADLINE)
        with bookie.storage.lock:  # as compaction removes a log with nothing live in it
            logger.remove_log(finished)
    finally:
        release.set()
        checkpoint.join(DEADLINE)
    assert not held_too_long.is_set(), "removing a finished log waited for the checkpoint's fsync"
    assert logger.path_of(finished) is None
