"""What the tests check the Java tools' output against (bookie/testing/realbk.py runs the tools)."""
from __future__ import annotations

import hashlib
import struct

from tests.helpers.waiting import wait_for


def summary_of(entries: list[bytes]) -> str:
    """realbk's ``read --format summary`` sha256: each entry's 4-byte big-endian length, then its bytes."""
    digest = hashlib.sha256()
    for e in entries:
        digest.update(struct.pack(">i", len(e)))
        digest.update(e)
    return digest.hexdigest()


def ledger_being_written(bk, known: set, min_lac: int) -> int:
    """The id of the ledger a spawned Java writer creates (the one not in ``known``), once ``min_lac``
    of its entries are acknowledged (read without recovery: the writer is not fenced)."""
    new: list = []
    wait_for(lambda: new.extend(lid.ledger_id for lid in bk.list_ledgers() if lid not in known) or new,
             what="the Java writer's ledger")
    wait_for(lambda: bk.open_ledger(new[0], recovery=False).last_add_confirmed >= min_lac,
             what=f"{min_lac} entries acknowledged")
    return new[0]
