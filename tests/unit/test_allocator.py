"""The allocator tuning range reads rely on takes effect where glibc is the C library."""
from __future__ import annotations

import platform

import pytest

from bookie.util import allocator


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_keep_large_buffers_tunes_glibc_once():
    assert allocator.keep_large_buffers() is True
    assert allocator.keep_large_buffers() is True  # idempotent
