"""entryLogRemoveFromPageCache: an entry log's pages leave the page cache once written back (a step of
``flushEntrylogBytes`` behind the writer; rotated logs at the checkpoint), the entries still read back
(from disk), and a writeback failure seen while dropping stops adds and checkpoints instead of being
lost. Residency is read with mincore(2)."""
from __future__ import annotations

import errno
import os

import pytest

from bookie.proto import entry_format
from bookie.proto.checksum import DigestManager
from bookie.server import entry_logger as entry_logger_module
from bookie.util.io import read_ahead as read_ahead_pages
from tests.helpers.engine_ops import PASSWORD
from tests.helpers.journal_files import KEY, LEDGER
from tests.helpers.page_cache import PAGE, resident_pages
from tests.helpers.waiting import wait_for

STEP = 256 * 1024  # flushEntrylogBytes in these tests
SMALL = dict(writeBufferSizeBytes=64 * 1024, flushEntrylogBytes=STEP)


def add_batches(bookie, batches: int, first_batch: int = 0) -> None:
    """``batches`` adds of 64 x 1 KiB (each payload names its entry), each waited for."""
    digest = DigestManager(LEDGER, PASSWORD)
    for b in range(first_batch, first_batch + batches):
        first = b * 64
        blob, _ = digest.build_framed(first, first - 1, 0, [payload(e) for e in range(first, first + 64)])
        bookie.add_entries(LEDGER, KEY, blob).result(10)


def payload(entry_id: int) -> bytes:
    return entry_id.to_bytes(8, "big") * 128


def assert_entries_read_back(bookie, count: int) -> None:
    digest = DigestManager(LEDGER, PASSWORD)
    for eid in range(count):
        assert digest.verify(bookie.read_entry(LEDGER, eid), eid)[1].tobytes() == payload(eid), f"entry {eid}"


@pytest.mark.parametrize("remove", [True, False])
def test_written_back_pages_leave_the_page_cache(make_bookie, remove):
    bookie = make_bookie(entryLogRemoveFromPageCache=remove, **SMALL)
    logger = bookie.storage.entry_logger
    add_batches(bookie, 64)  # 4 MiB: sixteen writeback steps
    path = logger.path_of(logger.log_id)
    if remove:
        wait_for(lambda: logger._cached_from >= 2 * 1024 * 1024, "the writer to drop 2 MiB of written-back pages")
        dropped = logger._cached_from
        assert dropped % PAGE == 0
        assert not any(resident_pages(path, dropped)), "written-back pages are still in the page cache"
        # The newest step stays for tailing reads: dropping lags a step behind the writeback.
        assert any(resident_pages(path, logger._flushed)[dropped // PAGE:]), "the newest written pages were dropped"
    else:
        wait_for(lambda: logger._flushed >= 2 * 1024 * 1024, "the writer to write 2 MiB")
        assert all(resident_pages(path, 2 * 1024 * 1024)), \
            "the control: written pages are in the page cache when nothing drops them"
    assert_entries_read_back(bookie, 64 * 64)  # dropped or not, every entry reads back whole


def test_rotated_logs_leave_the_page_cache_at_the_checkpoint(make_bookie):
    bookie = make_bookie(entryLogSizeLimit=1024 * 1024, **SMALL)
    logger = bookie.storage.entry_logger
    first_log = logger.log_id
    add_batches(bookie, 40)  # 2.5 MiB: the 1 MiB logs roll twice
    assert logger.log_id >= first_log + 2
    rotated = [logger.path_of(i) for i in range(first_log, logger.log_id)]
    bookie.checkpoint()  # fsyncs the rotated logs, patches their headers, drops them, closes them
    for path in rotated:
        assert not any(resident_pages(path, os.path.getsize(path))), f"{path}: a checkpointed rotated log is still cached"
    assert_entries_read_back(bookie, 40 * 64)


def test_a_writeback_failure_stops_adds_and_checkpoints(make_bookie, monkeypatch):
    """The kernel reports a failed writeback once, to whoever waits for it: here the writer thread, not
    the checkpoint's later fsync. So the logger must remember it: no add is taken after it, and no
    checkpoint passes (the LastLogMark stays where replay still finds the lost pages' entries)."""
    bookie = make_bookie(**SMALL)
    add_batches(bookie, 4)
    bookie.checkpoint()
    logger = bookie.storage.entry_logger

    def failed_writeback(fd, offset, end):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(entry_logger_module, "drop_written_pages", failed_writeback)
    with pytest.raises(OSError, match="did not reach the disk"):
        add_batches(bookie, 40, first_batch=4)  # crosses a writeback step: the writer meets the failure
        wait_for(lambda: logger._writeback_error is not None, "the writer to meet the failed writeback")
        add_batches(bookie, 1, first_batch=44)
    with pytest.raises(OSError, match="did not reach the disk"):
        bookie.checkpoint()
    bookie.shutdown()  # stops as after a crash: no checkpoint, nothing more written to the logs
    assert not bookie.running


def test_a_bookie_whose_writeback_failed_replays_its_entries(make_bookie, monkeypatch):
    """After the failure the bookie stops without a checkpoint; restarted, replay from the LastLogMark
    brings back every acknowledged entry, the ones whose pages were lost included."""
    bookie = make_bookie(**SMALL)
    add_batches(bookie, 8)
    bookie.checkpoint()
    logger = bookie.storage.entry_logger
    monkeypatch.setattr(entry_logger_module, "drop_written_pages",
                        lambda fd, offset, end: (_ for _ in ()).throw(OSError(errno.EIO, "Input/output error")))
    acknowledged = 8
    try:
        for b in range(8, 48):
            add_batches(bookie, 1, first_batch=b)
            acknowledged = b + 1
    except OSError:
        pass
    wait_for(lambda: logger._writeback_error is not None, "the writer to meet the failed writeback")
    assert acknowledged > 8
    bookie.shutdown()
    monkeypatch.undo()
    assert_entries_read_back(make_bookie(**SMALL), acknowledged * 64)


@pytest.mark.parametrize("read_ahead", [1024 * 1024, 0])
def test_a_range_read_has_the_kernel_read_ahead_what_was_dropped(make_bookie, monkeypatch, read_ahead):
    """entryLogReadAheadBytes: after a range read, the kernel is asked to read the bytes after it (as
    DbLedgerStorage's read-ahead cache), so the reads that follow find the pages the writer dropped in the
    page cache; asked again only once half of it is read, for the rest."""
    bookie = make_bookie(entryLogReadAheadBytes=read_ahead, **SMALL)
    logger = bookie.storage.entry_logger
    asked = []
    monkeypatch.setattr(entry_logger_module, "read_ahead",
                        lambda fd, offset, nbytes: asked.append((offset, nbytes)) or read_ahead_pages(fd, offset, nbytes))
    add_batches(bookie, 64)  # 4 MiB
    wait_for(lambda: logger._cached_from >= 3 * 1024 * 1024, "the writer to drop 3 MiB of written-back pages")
    path = logger.path_of(logger.log_id)

    def read(first: int, last: int) -> int:
        """Entries first..last read as one range; where its span read ends: at the last entry's record (read
        on its own)."""
        _, got, _ = bookie.storage.read_framed_parts(LEDGER, first, last, 1 << 62, 1, 0)
        assert got == last - first + 1
        return (bookie.storage.cache.get(LEDGER, last) & 0xFFFFFFFF) - entry_format.FRAME_LEN
    end = read(0, 255)  # 256 KiB: the log's first pages
    if not read_ahead:
        assert asked == []
        return
    assert asked == [(end, read_ahead)]
    wait_for(lambda: all(resident_pages(path, end + read_ahead)[(end + PAGE - 1) // PAGE:]),
             "the kernel to read ahead the MiB after the span")
    read(256, 511)  # within the first half of what was asked: not asked again
    assert len(asked) == 1
    later = read(512, 1023)  # past half of it: the rest of a MiB after this span is asked for
    assert asked[1] == (end + read_ahead, later + read_ahead - end - read_ahead)
    assert_entries_read_back(bookie, 64 * 64)
