"""Entries as a reader gets them."""
from __future__ import annotations

from typing import NamedTuple


class LedgerEntry(NamedTuple):
    """One entry of a ledger (a NamedTuple: cheap to make by the hundred thousand)."""

    ledger_id: int
    entry_id: int
    payload: bytes

    @property
    def length(self) -> int:
        return len(self.payload)
