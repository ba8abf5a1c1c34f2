"""Apache BookKeeper in Python: the bookie (server), the client, metadata, replication and the `bk` command."""
from bookie.ledger_id import LedgerId

__all__ = ["LedgerId"]
