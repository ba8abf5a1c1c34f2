"""A storage round trip a newcomer can read: ``make demo`` (until the Spark connector lands).

Starts a storage engine in a temporary directory, appends entries of two ledgers (one with a 128-bit
id), reads them back with digest checks, restarts the engine to show journal replay and the
checkpointed state, and removes the directory.
"""
from __future__ import annotations

import shutil
import tempfile
import time

from bookie.ledger_id import LedgerId
from bookie.proto import entry_format
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration


def main() -> None:
    root = tempfile.mkdtemp(prefix="bk-demo-")
    conf = ServerConfiguration({"journalDirectories": f"{root}/journal", "ledgerDirectories": f"{root}/ledgers",
                                "journalFlushWhenQueueEmpty": True})
    password = b"secret"
    key = generate_master_key(password)  # what a client sends to bookies: SHA1("ledger" + password)
    try:
        bookie = Bookie(conf).start()
        print(f"1. storage engine started in {root} (journal + entry logs + index, cookies written)")
        for ledger in (LedgerId(0, 1), LedgerId.of(7, scope_id=0xC0FFEE)):
            digest = DigestManager(ledger, password)  # CRC32C digests, BookKeeper's entry format
            payloads = [f"event {i} of ledger {ledger}".encode() for i in range(10_000)]
            start = time.perf_counter()
            blob, _ = digest.build_framed(0, -1, 0, payloads)  # 10,000 framed entries, one buffer
            entry_ids = bookie.add_entries(ledger, key, blob).result()  # returns once fsynced
            took = time.perf_counter() - start
            print(f"2. ledger {ledger}: {len(entry_ids):,} entries acknowledged (journal fsynced) in {took * 1000:.0f} ms")
            framed, count, _ = bookie.read_entries(ledger, 0, 9_999, max_bytes=1 << 30)
            readback = [digest.verify(e)[1].tobytes() for e in entry_format.iter_frames(framed)]
            assert readback == payloads
            print(f"3. ledger {ledger}: read {count:,} entries back, every digest checked")
        bookie.fence_ledger(LedgerId(0, 1), key).result()
        print("4. ledger 1 fenced (the fence is in the journal before this line prints)")
        bookie.shutdown()
        bookie = Bookie(conf).start()
        print(f"5. restarted: ledgers {[str(lid) for lid in bookie.ledgers()]}, ledger 1 fenced: "
              f"{bookie.is_fenced(LedgerId(0, 1))}, last entry of ledger 1: "
              f"{entry_format.parse_header(bookie.read_entry(LedgerId(0, 1), -1)).entry_id}")
        bookie.shutdown()
        print("6. shut down cleanly")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
