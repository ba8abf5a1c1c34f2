"""A roll and a checkpoint keep the entry log's fsyncs off the add path (BookKeeper's rotated logs)."""
from __future__ import annotations

import os
import threading

from bookie.ledger_id import LedgerId
from bookie.server.entry_logger import _HEADER
from tests.helpers.engine_entries import write

DEADLINE = 60


def _header_map_offset(path: str) -> int:
    with open(path, "rb") as f:
        return _HEADER.unpack(f.read(_HEADER.size))[2]


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
