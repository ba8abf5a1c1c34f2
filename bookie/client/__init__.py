"""The BookKeeper client: ledgers with quorum writes, ensemble change, fencing and recovery.

``from bookie.client import BookKeeper``; its errors are in ``bookie.exceptions`` (root BKException).
"""
from bookie.client.bookkeeper import BookKeeper
from bookie.client.conf import ClientConfiguration
from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_handle import LedgerHandle
from bookie.client.ledger_handle_adv import LedgerHandleAdv
from bookie.client.read_only_ledger_handle import ReadOnlyLedgerHandle
from bookie.proto.columnar_framing import PayloadColumn

__all__ = ["BookKeeper", "ClientConfiguration", "LedgerEntry", "LedgerHandle", "LedgerHandleAdv", "PayloadColumn",
           "ReadOnlyLedgerHandle"]
