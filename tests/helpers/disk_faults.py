"""Damage a file the way a bad disk does."""
from __future__ import annotations


def flip_byte(path, offset: int, mask: int = 0x40) -> None:
    """Corrupt one byte of a file in place, as a bad disk would."""
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)
        f.seek(offset)
        f.write(bytes([byte[0] ^ mask]))
