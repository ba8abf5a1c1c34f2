"""File writes without joining buffers in Python, and writeback started ahead of a fsync."""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

IOV_MAX = 1024


def pwritev_all(fd: int, buffers: list, pos: int) -> int:
    """Write ``buffers`` back to back at ``pos`` (IOV_MAX at a time, short writes resumed); returns the end."""
    for i in range(0, len(buffers), IOV_MAX):
        batch = [memoryview(b) for b in buffers[i: i + IOV_MAX]]
        while batch:
            n = os.pwritev(fd, batch, pos)
            pos += n
            while batch and n >= len(batch[0]):
                n -= len(batch[0])
                batch.pop(0)
            if batch and n:
                batch[0] = batch[0][n:]
    return pos


def sendmsg_all(sock, buffers: list) -> None:
    """Send ``buffers`` back to back on a blocking socket (IOV_MAX at a time, short sends resumed): one copy,
    the kernel's, where joining them first would copy them twice."""
    for i in range(0, len(buffers), IOV_MAX):
        batch = [memoryview(b) for b in buffers[i: i + IOV_MAX]]
        while batch:
            n = sock.sendmsg(batch)
            while batch and n >= len(batch[0]):
                n -= len(batch[0])
                batch.pop(0)
            if batch and n:
                batch[0] = batch[0][n:]


def fsync_dir(path: str) -> None:
    """Make the directory's entries durable (files created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# <fcntl.h>: wait for writeback already under way / start writeback of the dirty pages / wait for it
SYNC_FILE_RANGE_WAIT_BEFORE, SYNC_FILE_RANGE_WRITE, SYNC_FILE_RANGE_WAIT_AFTER = 1, 2, 4
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _sync_file_range():
    if not sys.platform.startswith("linux"):
        return None
    try:
        fn = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_SYNC_FILE_RANGE = _sync_file_range()


def _sync_range(fd: int, offset: int, nbytes: int, flags: int) -> None:
    if _SYNC_FILE_RANGE is None:
        os.fdatasync(fd)
    elif _SYNC_FILE_RANGE(fd, offset, nbytes, flags) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sync_file_range: {os.strerror(err)}")


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Have the kernel start writing ``[offset, offset + nbytes)`` to disk now, without waiting (Linux's
    sync_file_range); elsewhere, fdatasync the file. Durability still comes from the fsync after it:
    this only spreads the writes, so that fsync does not find gigabytes to write at once."""
    _sync_range(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE)


def drop_written_pages(fd: int, offset: int, end: int) -> int:
    """Wait until the whole pages of ``[offset, end)`` are written to disk (their writeback was started
    earlier, so this rarely waits), then drop them from the page cache, clean. Returns the offset the
    dropped pages end at: the page holding ``end`` stays (later writes continue it; dropped, it would be
    read back first). Raises OSError if their writeback failed: the kernel reports that once, to this
    wait, and not to a later fsync. The drop itself is advice (``drop_clean_pages``)."""
    end -= end % PAGE_SIZE
    if end > offset:
        # A failure here is a failed writeback (the pages may be lost): the caller must not go on.
        _sync_range(fd, offset, end - offset,
                    SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER)
        drop_clean_pages(fd, offset, end - offset)
    return max(end, offset)


def drop_clean_pages(fd: int, offset: int = 0, nbytes: int = 0) -> None:
    """Advise the kernel to drop the file's clean pages in ``[offset, offset + nbytes)`` (0: to the end)
    from the page cache. Advice only: refused, the pages just stay cached."""
    try:
        os.posix_fadvise(fd, offset, nbytes, os.POSIX_FADV_DONTNEED)
    except OSError:
        pass


def read_ahead(fd: int, offset: int, nbytes: int) -> None:
    """Advise the kernel to read the file's ``[offset, offset + nbytes)`` into the page cache (started, not
    waited for). Advice only: refused, the reads that want those pages read them."""
    try:
        os.posix_fadvise(fd, offset, nbytes, os.POSIX_FADV_WILLNEED)
    except OSError:
        pass
