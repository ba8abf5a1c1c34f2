"""Journal benchmark: the storage engine vs a bare write+fdatasync loop, same bytes, same run.

Appends 1 KiB entries in framed batches of 256 through the whole engine (journal with fsync, entry
log, index) and, in the same run, through a bare Python loop that writes each batch with one
``os.write`` and one ``os.fdatasync``. Prints entries/s of both and the ratio (target >= 0.5).

    python bench/journal.py [--batches 400] [--rounds 3] [--in-flight 8]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections import deque

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration

from results import Figure, record

ENTRY_SIZE = 1024
BATCH = 256


def make_batches(ledger: LedgerId, batches: int) -> list[bytes]:
    dm = DigestManager(ledger, b"bench")
    payload = os.urandom(ENTRY_SIZE)
    out, length = [], 0
    for b in range(batches):
        blob, length = dm.build_framed(b * BATCH, b * BATCH - 1, length, [payload] * BATCH)
        out.append(blob)
    return out


def bare_loop(directory: str, batches: list[bytes]) -> float:
    path = os.path.join(directory, "bare.log")
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    start = time.perf_counter()
    for blob in batches:
        os.write(fd, blob)
        os.fdatasync(fd)
    elapsed = time.perf_counter() - start
    os.close(fd)
    os.unlink(path)
    return len(batches) * BATCH / elapsed


def engine(directory: str, ledger: LedgerId, batches: list[bytes], in_flight: int) -> float:
    conf = ServerConfiguration({"journalDirectories": os.path.join(directory, "journal"),
                                "ledgerDirectories": os.path.join(directory, "ledgers"),
                                "diskCheckInterval": 3600000})
    bookie = Bookie(conf).start()
    key = generate_master_key(b"bench")
    pending: deque = deque()
    start = time.perf_counter()
    for blob in batches:
        if len(pending) >= in_flight:
            pending.popleft().result()
        pending.append(bookie.add_entries(ledger, key, blob))
    for future in pending:
        future.result()
    elapsed = time.perf_counter() - start
    bookie.shutdown()
    return len(batches) * BATCH / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=400, help="batches of 256 x 1 KiB per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-flight", type=int, default=8, help="batches the engine may have queued")
    args = parser.parse_args()
    ledger = LedgerId(0, 1)
    batches = make_batches(ledger, args.batches)
    bare, eng = [], []
    for r in range(args.rounds):
        directory = tempfile.mkdtemp(prefix="bk-bench-journal-", dir=os.environ.get("BENCH_DIR"))
        try:
            bare.append(bare_loop(directory, batches))
            eng.append(engine(directory, ledger, batches, args.in_flight))
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        print(f"round {r + 1}: bare loop {bare[-1]:,.0f} entries/s, engine {eng[-1]:,.0f} entries/s")
    b, e = statistics.median(bare), statistics.median(eng)
    print(f"journal bench (1 KiB entries, batches of {BATCH}, fsync on, median of {args.rounds}):")
    print(f"  bare write+fdatasync loop : {b:12,.0f} entries/s")
    print(f"  storage engine            : {e:12,.0f} entries/s")
    print(f"  ratio engine/bare         : {e / b:12.2f}   (target >= 0.5)")
    record("journal", [Figure("storage engine", e, "entries/s", baseline="bare write+fdatasync loop",
                              baseline_value=b, target=">= 0.5")],
           notes=[f"1 KiB entries, batches of {BATCH}, fsync on, median of {args.rounds} rounds"])


if __name__ == "__main__":
    main()
