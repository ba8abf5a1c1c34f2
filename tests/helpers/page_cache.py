"""Which pages of a file are in the page cache: mmap + mincore(2), without reading the file."""
from __future__ import annotations

import ctypes
import mmap
import os

PAGE = mmap.PAGESIZE
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]


def resident_pages(path: str, length: int) -> list[bool]:
    """Which pages of the file's first ``length`` bytes are in the page cache."""
    pages = (length + PAGE - 1) // PAGE
    fd = os.open(path, os.O_RDONLY)
    try:
        address = _libc.mmap(None, length, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if _libc.mincore(ctypes.c_void_p(address), ctypes.c_size_t(length), vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
            return [bool(v & 1) for v in vec]
        finally:
            _libc.munmap(ctypes.c_void_p(address), ctypes.c_size_t(length))
    finally:
        os.close(fd)
