"""File writes without joining buffers in Python."""
from __future__ import annotations

import os

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
