"""A ledger's metadata as tests write it: three bookies, quorums of two, one custom property."""
from __future__ import annotations

from bookie.meta import ledger_metadata


def metadata(**changes) -> ledger_metadata.LedgerMetadata:
    base = ledger_metadata.LedgerMetadata(ensemble_size=3, write_quorum_size=2, ack_quorum_size=2,
                             ensembles=((0, ("127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3")),), password=b"pw",
                             custom_metadata=(("owner", b"etl"),))
    return ledger_metadata.LedgerMetadata(**{**base.__dict__, **changes})
