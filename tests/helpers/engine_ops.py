"""Run scripted operations on a storage engine, print READY, then wait to be SIGKILLed.

    python -m tests.helpers.engine_ops CONF_JSON OPS_JSON

OPS is a list of ``[op, scope, ledger, arg]``: ``add`` (arg = number of entries, payload b"e<id>"),
``fence``, ``lac`` (explicit LAC = arg), ``checkpoint``. Every operation is acknowledged (fsynced)
before the next one starts. Password is b"pw".

Tests call ``run_then_sigkill`` (the parent side) and ``engine_settings`` (the settings both sides use).
"""
from __future__ import annotations

import json
import os
import sys
import time

from bookie.exceptions import NoLedgerException
from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration

PASSWORD = b"pw"


def engine_settings(root, **overrides) -> dict:
    """Settings for a storage engine under ``root``; tests pass BookKeeper keys to shrink limits."""
    settings = {
        "journalDirectories": os.path.join(str(root), "journal"),
        "ledgerDirectories": os.path.join(str(root), "ledgers"),
        "journalFlushWhenQueueEmpty": True,
        "flushInterval": 3600000,  # checkpoints only when a test asks, unless it overrides this
        "diskCheckInterval": 3600000,
        "journalPreAllocSizeMB": 1,
    }
    settings.update(overrides)
    return settings


def run_then_sigkill(settings: dict, ops: list) -> None:
    """Run ``ops`` in a child engine (this module as a process) and SIGKILL it once they are acknowledged."""
    from tests.procs import child

    with child("-m", "tests.helpers.engine_ops", json.dumps(settings), json.dumps(ops)) as proc:
        line = proc.stdout.readline()
        assert line.strip() == "READY", proc.stderr.read()


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
