"""Ledger ids from ZooKeeper (ZkLedgerIdGenerator, LongZkLedgerIdGenerator).

An EPHEMERAL_SEQUENTIAL ``<root>/idgen/ID-`` znode gives the id (its sequence number) and is deleted
at once. Past Integer.MAX_VALUE, ids come from ``<root>/idgen-long/HOB-<high 32 bits>/ID-<seq>``:
the high bits from the HOB directory, the low 31 bits from the sequence; a full HOB moves to the next.
"""
from __future__ import annotations

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError

from bookie.meta.layout import IDGEN, IDGEN_LONG, LEDGER_ID_GEN_PREFIX as ID_PREFIX, MAX_SHORT_ID

HOB_PREFIX = "HOB-"


class ZkLedgerIdGenerator:
    def __init__(self, zk: KazooClient, root: str):
        self.zk = zk
        self.root = root

    def generate(self) -> int:
        path = self.zk.create(f"{self.root}/{IDGEN}/{ID_PREFIX}", b"", ephemeral=True, sequence=True, makepath=True)
        self.zk.delete(path)
        ledger_id = int(path.rsplit(ID_PREFIX, 1)[1])
        if ledger_id >= MAX_SHORT_ID:
            return self.generate_long()
        return ledger_id

    def generate_long(self) -> int:
        base = f"{self.root}/{IDGEN_LONG}"
        self.zk.ensure_path(base)
        hobs = sorted(int(c[len(HOB_PREFIX):]) for c in self.zk.get_children(base) if c.startswith(HOB_PREFIX))
        high = hobs[-1] if hobs else 1  # HOB 0 would collide with the short ids
        while True:
            hob = f"{base}/{HOB_PREFIX}{high:010d}"
            try:
                self.zk.create(hob, b"")
            except NodeExistsError:
                pass
            path = self.zk.create(f"{hob}/{ID_PREFIX}", b"", ephemeral=True, sequence=True)
            self.zk.delete(path)
            seq = int(path.rsplit(ID_PREFIX, 1)[1])
            if seq < MAX_SHORT_ID:
                return (high << 31) | seq
            high += 1  # this HOB's sequence is used up
