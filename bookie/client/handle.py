"""What every ledger handle has (BookKeeper's ``Handle``): its id, its metadata, ``with`` support."""
from __future__ import annotations

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned


class Handle:
    ledger: LedgerId
    _versioned: Versioned[LedgerMetadata]

    @property
    def ledger_id(self) -> int:
        return self.ledger.ledger_id

    @property
    def scope_id(self) -> int:
        return self.ledger.scope_id

    @property
    def metadata(self) -> LedgerMetadata:
        return self._versioned.value

    def close(self) -> None:
        """Release the handle (a writer records CLOSED; a reader has nothing to record)."""

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()
