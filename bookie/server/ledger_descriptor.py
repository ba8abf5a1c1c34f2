"""What a bookie keeps per ledger (BookKeeper's LedgerDescriptor), beside its entries and index."""
from __future__ import annotations

from dataclasses import dataclass, field

from bookie.server.index import IndexHeader


@dataclass
class LedgerDescriptor:
    """What a bookie keeps per ledger (BookKeeper's LedgerDescriptor): master key, fence, explicit LAC,
    the highest LAC piggybacked and entry stored. Not the metadata's OPEN/IN_RECOVERY/CLOSED state."""
    master_key: bytes
    fenced: bool = False
    explicit_lac: bytes | None = None
    lac: int = -1  # highest LAC piggybacked on an entry this bookie stores
    last_entry_id: int = -1  # highest entry id stored here
    header_dirty: bool = True
    lac_watchers: list = field(default_factory=list)  # callables(lac), for long polls

    def raise_lac(self, lac: int) -> None:
        if lac > self.lac:
            self.lac = lac
            for watcher in list(self.lac_watchers):
                watcher(lac)

    def header(self) -> IndexHeader:
        return IndexHeader(self.master_key, self.fenced, self.explicit_lac)
