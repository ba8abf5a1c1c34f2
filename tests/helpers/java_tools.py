"""What the tests check the Java tools' output against (bookie/testing/realbk.py runs the tools)."""
from __future__ import annotations

import hashlib
import struct


def summary_of(entries: list[bytes]) -> str:
    """realbk's ``read --format summary`` sha256: each entry's 4-byte big-endian length, then its bytes."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(struct.pack(">i", len(e)))
        digest.update(e)
    return digest.hexdigest()
