"""Open a ledger with recovery and check every entry: ``python -m tests.helpers.client_recover URI LEDGER``.

Prints ``LAST <last entry id> BAD <entries whose payload is not payload_for(ledger, id)>``.
"""
from __future__ import annotations

import sys

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from tests.helpers.engine_child import payload_for


def main() -> None:
    uri, ledger_id = sys.argv[1], int(sys.argv[2])
    with BookKeeper(uri) as bk:
        rh = bk.open_ledger(ledger_id, password=b"stress")
        last = rh.last_add_confirmed
        ledger = LedgerId(0, ledger_id)
        entries = rh.read(0, last) if last >= 0 else []
        bad = [e.entry_id for i, e in enumerate(entries) if e.entry_id != i or e.payload != payload_for(ledger, i)]
        print(f"LAST {last} BAD {len(bad)} {bad[:10]}", flush=True)


if __name__ == "__main__":
    main()
