"""Re-replication benchmark: a lost bookie's share of 1 KiB-entry ledgers copied by the ReplicationWorker
(LedgerChecker + LedgerFragmentReplicator), next to the project's own client reading the same ledgers
and appending that share with ``append_batch`` to a new ledger on the same target bookie (same run).

A real ZooKeeper and four bookie processes. The ledgers are E=3, WQ=2, AQ=2 on bookies 0-2, so bookie 0
holds two thirds of every ledger and bookie 3 is the only possible replacement. Baseline first (every
bookie up): per ledger, ``read(0, last)`` (the striped range read), then the entries bookie 0 stores
appended with ``append_batch`` to a ledger on bookie 3 alone (E=WQ=AQ=1). Then bookie 0 is SIGKILLed,
every ledger marked under-replicated, and one worker in this process takes them one by one until the
list is empty: its time covers locking, opening, checking, copying and the metadata CAS. Target (issue
13): at least 0.5 of the baseline's entries/s.

    python bench/rereplication.py [--ledgers 10] [--entries 3000]
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time

from bookie.client import BookKeeper
from bookie.client.distribution_schedule import stores
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.replication.replication_worker import ReplicationWorker
from bookie.testing.local_bookkeeper import LocalBookKeeper

ENTRY = 1024
PASSWORD = b"bench"


def write_ledgers(bk: BookKeeper, bookies: list[str], count: int, entries: int) -> list[int]:
    payloads = [os.urandom(ENTRY) for _ in range(entries)]
    ids = []
    for _ in range(count):
        handle = bk.create_ledger(3, 2, 2, password=PASSWORD, bookies=bookies)
        handle.append_batch(payloads).result(120)
        handle.close()
        ids.append(handle.ledger.ledger_id)
    return ids


def baseline(bk: BookKeeper, ids: list[int], target: str) -> tuple[float, int, int]:
    """Read each ledger, append bookie 0's share to a ledger on ``target``: (seconds, entries, bytes)."""
    copied = size = 0
    start = time.perf_counter()
    for ledger_id in ids:
        with bk.open_ledger(ledger_id, PASSWORD, recovery=False) as reader:
            last = reader.metadata.last_entry_id
            share = [e.payload for e in reader.read(0, last) if stores(0, e.entry_id, 3, 2)]
        writer = bk.create_ledger(1, 1, 1, password=PASSWORD, bookies=[target])
        writer.append_batch(share).result(120)
        writer.close()
        copied += len(share)
        size += sum(len(p) for p in share)
    return time.perf_counter() - start, copied, size


def rereplicate(bk: BookKeeper, ids: list[int], lost: str) -> float:
    manager = LedgerUnderreplicationManager(bk.store, "bench")
    worker = ReplicationWorker(bk, manager)
    for ledger_id in ids:
        manager.mark_ledger_underreplicated(ledger_id, [lost])
    start = time.perf_counter()
    for _ in ids:  # each round takes one ledger and, with nothing going wrong, finishes it
        worker.rereplicate_one(timeout=60)
    elapsed = time.perf_counter() - start
    worker.shutdown()
    left = list(manager.list_underreplicated())
    if left:
        state = manager.get_state(left[0].ledger_id)
        raise RuntimeError(f"{len(left)} ledgers still under-replicated: {state}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=10)
    parser.add_argument("--entries", type=int, default=3000, help="entries per ledger")
    args = parser.parse_args()
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    base = tempfile.mkdtemp(prefix="bk-bench-rerepl-", dir=os.environ.get("BENCH_DIR"))
    cluster = LocalBookKeeper(4, base_dir=base, bookie_settings={"zkTimeout": 4000})
    try:
        cluster.start()
        b = [x.bookie_id for x in cluster.bookies]
        with BookKeeper(cluster.metadata_service_uri) as bk:
            ids = write_ledgers(bk, b[:3], args.ledgers, args.entries)
            base_s, entries, size = baseline(bk, ids, b[3])
            cluster.kill_bookie(0)
            rerepl_s = rereplicate(bk, ids, b[0])
            for ledger_id in ids:
                assert b[0] not in bk.ledger_metadata(ledger_id).ensembles[0][1]
        print(f"setup: {args.ledgers} ledgers x {args.entries} entries of {ENTRY} B, E=3 WQ=2 AQ=2; bookie 0's share "
              f"{entries:,} entries ({size / 1e6:.1f} MB)")
        print(f"baseline, client read + append_batch: {base_s:6.2f} s  {entries / base_s:10,.0f} entries/s  "
              f"{size / base_s / 1e6:7.1f} MB/s")
        print(f"ReplicationWorker re-replication:    {rerepl_s:6.2f} s  {entries / rerepl_s:10,.0f} entries/s  "
              f"{size / rerepl_s / 1e6:7.1f} MB/s  ratio {base_s / rerepl_s:.2f} (target >= 0.5)")
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
