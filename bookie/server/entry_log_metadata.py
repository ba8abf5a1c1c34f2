"""What one entry log holds, for GC and compaction (BookKeeper's EntryLogMetadata).

Built from a finished log's ledgers map, or by scanning a log that has none. ``remaining_size`` falls
as the ledgers it holds are deleted; a log whose ledgers are all gone is deleted, and one whose usage
(remaining / total) is under a compaction threshold has its live entries copied to a new log.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from bookie.ledger_id import LedgerId


@dataclass
class EntryLogMetadata:
    entry_log_id: int
    total_size: int = 0
    remaining_size: int = 0
    ledgers: dict[LedgerId, int] = field(default_factory=dict)  # bytes of each ledger still in the log

    def add_ledger_size(self, ledger: LedgerId, size: int) -> None:
        self.total_size += size
        self.remaining_size += size
        self.ledgers[ledger] = self.ledgers.get(ledger, 0) + size

    def remove_ledger_if(self, dead: Callable[[LedgerId], bool]) -> list[LedgerId]:
        """Drop the ledgers ``dead`` says are gone; returns them."""
        gone = [ledger for ledger in self.ledgers if dead(ledger)]
        for ledger in gone:
            self.remaining_size -= self.ledgers.pop(ledger)
        return gone

    def contains_ledger(self, ledger: LedgerId) -> bool:
        return ledger in self.ledgers

    @property
    def usage(self) -> float:
        """Share of the log still live (0.0 for an empty log)."""
        return self.remaining_size / self.total_size if self.total_size > 0 else 0.0

    @property
    def is_empty(self) -> bool:
        return not self.ledgers
