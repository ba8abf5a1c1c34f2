"""Compaction benchmark: TransactionalEntryLogCompactor vs a bare copy loop, same live bytes, same run.

A bookie's storage is filled with 1 KiB entries of 20 ledgers, interleaved in batches of 64, over
entry logs of ``--log-mb``; half the ledgers are deleted (logs at about 50% usage). In the same round,
a bare Python loop reads the live bytes of those logs (one ``pread`` per run of back-to-back live
records), writes them to a new file and fsyncs it; then the compactor compacts the same logs (copy,
ledgers map, fsync, renames, index repointed and flushed, old log deleted), throttle rates set out of
the way. Prints MB/s of live data moved by both and the ratio (target >= 0.5).

    python bench/compaction.py [--mb 96] [--log-mb 32] [--rounds 3]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time

import numpy as np

from bookie.ledger_id import LedgerId
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.server import Bookie, ServerConfiguration
from bookie.server.compactor import logs_to_compact
from bookie.server.entry_log_metadata import EntryLogMetadata
from bookie.testing.deleted_ledgers import delete_and_measure

from results import Figure, record

ENTRY_SIZE = 1024
BATCH = 64
LEDGERS = 20


def fill(bookie: Bookie, total_bytes: int) -> None:
    key = generate_master_key(b"bench")
    payload = os.urandom(ENTRY_SIZE)
    digests = {LedgerId(0, n): DigestManager(LedgerId(0, n), b"bench") for n in range(1, LEDGERS + 1)}
    rounds = total_bytes // (ENTRY_SIZE * BATCH * LEDGERS)
    futures = []
    for r in range(rounds):
        for ledger, dm in digests.items():
            blob, _ = dm.build_framed(r * BATCH, r * BATCH - 1, 0, [payload] * BATCH)
            futures.append(bookie.add_entries(ledger, key, blob))
    for future in futures:
        future.result()
    bookie.storage.entry_logger.roll()
    bookie.checkpoint()


def half_dead_metas(bookie: Bookie) -> list[EntryLogMetadata]:
    return delete_and_measure(bookie.storage, {LedgerId(0, n) for n in range(2, LEDGERS + 1, 2)})


def live_runs(bookie: Bookie, meta: EntryLogMetadata) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the log's back-to-back live records, from the index."""
    cache = bookie.storage.cache
    locs = np.concatenate([cache.get_range(ledger, 0, bookie.storage.descriptor(ledger).last_entry_id)
                           for ledger in meta.ledgers])
    offsets = np.sort(locs[(locs >> 32) == meta.entry_log_id] & 0xFFFFFFFF)
    size = len(bookie.storage.entry_logger.read_record((meta.entry_log_id << 32) | int(offsets[0])))
    begins, ends = offsets - 4, offsets + size  # every record has the same size here
    breaks = np.flatnonzero(begins[1:] != ends[:-1]) + 1
    return list(zip(begins[np.r_[0, breaks]].tolist(), ends[np.r_[breaks - 1, len(ends) - 1]].tolist()))


def bare_loop(bookie: Bookie, metas: list[EntryLogMetadata], directory: str) -> tuple[int, float]:
    plans = [(bookie.storage.entry_logger.path_of(m.entry_log_id), live_runs(bookie, m)) for m in metas]
    moved = 0
    start = time.perf_counter()
    for i, (path, runs) in enumerate(plans):
        src = os.open(path, os.O_RDONLY)
        dst = os.open(os.path.join(directory, f"bare{i}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        for a, b in runs:
            moved += os.write(dst, os.pread(src, b - a, a))
        os.fsync(dst)
        os.close(dst)
        os.close(src)
    return moved, time.perf_counter() - start


def one_round(directory: str, total_bytes: int, log_bytes: int) -> tuple[float, float, float]:
    conf = ServerConfiguration({"journalDirectories": os.path.join(directory, "journal"),
                                "ledgerDirectories": os.path.join(directory, "ledgers"),
                                "entryLogSizeLimit": log_bytes, "diskCheckInterval": 3600000,
                                "compactionRateByEntries": 10 ** 12, "compactionRateByBytes": 10 ** 15})
    bookie = Bookie(conf).start()
    try:
        fill(bookie, total_bytes)
        metas = half_dead_metas(bookie)
        usage = sum(m.remaining_size for m in metas) / sum(m.total_size for m in metas)
        bare_bytes, bare_time = bare_loop(bookie, metas, directory)
        compactor = bookie.compactor
        chosen = logs_to_compact(metas, 0.8)
        moved = sum(m.remaining_size for m in chosen)
        start = time.perf_counter()
        for meta in chosen:
            compactor.compact(meta)
        compactor.drain()  # every old log deleted and every copy renamed: the whole job, as a GC pass waits for it
        compact_time = time.perf_counter() - start
    finally:
        bookie.shutdown()
    return bare_bytes / bare_time / 1e6, moved / compact_time / 1e6, usage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=96, help="MB of entries written per round")
    parser.add_argument("--log-mb", type=int, default=32, help="entryLogSizeLimit, MB")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    bare, comp = [], []
    for r in range(args.rounds):
        directory = tempfile.mkdtemp(prefix="bk-bench-compaction-", dir=os.environ.get("BENCH_DIR"))
        try:
            b, c, usage = one_round(directory, args.mb << 20, args.log_mb << 20)
        finally:
            shutil.rmtree(directory, ignore_errors=True)
        bare.append(b)
        comp.append(c)
        print(f"round {r + 1}: logs at {usage:.0%} usage; bare copy loop {b:,.0f} MB/s, compaction {c:,.0f} MB/s")
    b, c = statistics.median(bare), statistics.median(comp)
    print(f"compaction bench (1 KiB entries, {LEDGERS} ledgers, half deleted, median of {args.rounds}):")
    print(f"  bare read+write+fsync loop : {b:10,.1f} MB/s of live data")
    print(f"  TransactionalEntryLogCompactor: {c:7,.1f} MB/s of live data")
    print(f"  ratio compaction/bare      : {c / b:10.2f}   (target >= 0.5)")
    record("compaction", [Figure("compaction", c, "MB/s", baseline="bare read+write+fsync loop", baseline_value=b,
                                 target=">= 0.5")],
           notes=[f"1 KiB entries, {LEDGERS} ledgers, half deleted, median of {args.rounds} rounds",
                  "MB/s of live data moved"])


if __name__ == "__main__":
    main()
