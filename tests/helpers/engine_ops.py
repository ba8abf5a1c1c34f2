"""Run scripted operations on a storage engine, print READY, then wait to be SIGKILLed.

    python -m tests.helpers.engine_ops CONF_JSON OPS_JSON

OPS is a list of ``[op, scope, ledger, arg]``: ``add`` (arg = number of entries, payload b"e<id>"),
``fence``, ``lac`` (explicit LAC = arg), ``checkpoint``. Every operation is acknowledged (fsynced)
before the next one starts. Password is b"pw".
"""
from __future__ import annotations

import json
import sys
import time

from bookie.exceptions import NoLedgerException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration

PASSWORD = b"pw"


def payload(entry_id: int) -> bytes:
    return b"e%d" % entry_id


def main() -> None:
    bookie = Bookie(ServerConfiguration(json.loads(sys.argv[1]))).start()
    key = generate_master_key(PASSWORD)
    for op, scope, lid, arg in json.loads(sys.argv[2]):
        ledger = LedgerId(scope, lid)
        digest = DigestManager(ledger, PASSWORD)
        if op == "add":
            try:
                first = bookie.storage.require(ledger).last_entry_id + 1
            except NoLedgerException:
                first = 0
            blob, _ = digest.build_framed(first, first + arg - 2, 0, [payload(i) for i in range(first, first + arg)])
            bookie.add_entries(ledger, key, blob).result()
        elif op == "fence":
            bookie.fence_ledger(ledger, key).result()
        elif op == "lac":
            bookie.set_explicit_lac(ledger, key, digest.build_lac(arg)).result()
        elif op == "checkpoint":
            bookie.checkpoint()
    print("READY", flush=True)
    time.sleep(3600)


if __name__ == "__main__":
    main()
