"""Entries written straight into a storage engine (no client, no server), for the engine's unit tests."""
from __future__ import annotations

import os

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key

PASSWORD = b"pw"
KEY = generate_master_key(PASSWORD)


def write(bookie, ledger: LedgerId, first: int, count: int, size: int = 200) -> list[bytes]:
    """Add entries ``first`` .. ``first + count - 1`` of random payloads (acknowledged, i.e. fsynced)."""
    digest = DigestManager(ledger, PASSWORD)
    payloads = [os.urandom(size) for _ in range(count)]
    bookie.add_entries(ledger, KEY, digest.build_framed(first, first - 1, 0, payloads)[0]).result(10)
    return payloads
