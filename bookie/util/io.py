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


def fsync_dir(path: str) -> None:
    """Make the directory's entries durable (files created, renamed or removed in it)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


SYNC_FILE_RANGE_WRITE = 2  # <fcntl.h>: start writeback of the range's dirty pages, do not wait


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


def start_writeback(fd: int, offset: int, nbytes: int) -> None:
    """Have the kernel start writing ``[offset, offset + nbytes)`` to disk now, without waiting (Linux's
    sync_file_range); elsewhere, fdatasync the file. Durability still comes from the fsync after it:
    this only spreads the writes, so that fsync does not find gigabytes to write at once."""
    if _SYNC_FILE_RANGE is None:
        os.fdatasync(fd)
    elif _SYNC_FILE_RANGE(fd, offset, nbytes, SYNC_FILE_RANGE_WRITE) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"sync_file_range: {os.strerror(err)}")
