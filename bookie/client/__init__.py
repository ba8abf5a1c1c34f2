"""The BookKeeper client: ledgers with quorum writes, ensemble change, fencing and recovery.

``from bookie.client import BookKeeper``. The exceptions load eagerly (the metadata layer raises
them too); the rest loads on first use, so importing an exception never pulls the client in.
"""
import importlib

from bookie.client.exceptions import *  # noqa: F401,F403 - BKException and its subclasses

_LAZY = {
    "BookKeeper": "bookie.client.bookkeeper",
    "ClientConfiguration": "bookie.client.conf",
    "LedgerEntry": "bookie.client.ledger_entry",
    "LedgerHandle": "bookie.client.ledger_handle",
    "LedgerHandleAdv": "bookie.client.ledger_handle",
    "ReadOnlyLedgerHandle": "bookie.client.read_only_ledger_handle",
}


def __getattr__(name: str):
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'bookie.client' has no attribute {name!r}")
