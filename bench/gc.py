"""GC pass benchmark: one forced pass of a bookie process holding 10,000 ledgers, half of them deleted,
next to a bare kazoo listing of the same ledger ranges in the same run.

A real ZooKeeper and bookie processes (hierarchical layout, BookKeeper's default). The ledgers are
written by the BookKeeper client (E=WQ=AQ=2 on two bookies, so both hold every ledger; a few small
entries each, one batched append, several writer threads); then half are deleted. One bookie runs with
``verifyMetadataOnGC=false`` (the default), the other with ``true``. A pass is forced on each over the
GarbageCollection request and waited for; its time is the bookie's own ``lastPassDurationMs``. The
baseline is a bare kazoo client walking the same tree (``get_children`` of the root, of every inner
node and of every leaf range), as the ScanAndCompareGarbageCollector must at least do.

ZooKeeper reads are counted by the server: the ``Received`` counter of ``srvr`` before and after each
pass (nothing else talks to ZooKeeper meanwhile but the session pings of the bookies, at most one per
session per 10 s with ``zkTimeout`` 30 s). The issue's claim: the pass costs O(ranges) reads, not one
per ledger; with ``verifyMetadataOnGC=true`` it costs one more read per deleted ledger.

    python bench/gc.py [--ledgers 10000] [--threads 16]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import os
import shutil
import tempfile
import time

import logging

from kazoo.client import KazooClient

from bookie.client import BookKeeper
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.zookeeper_server import received_requests

from results import Figure, record

ENTRIES = 4  # per ledger
ENTRY = 100  # bytes
# No pass but the forced ones; the index flushed every second, so the ledgers are on disk by the pass
# (a deleted ledger is rarely younger than a checkpoint: the pass's own checkpoint is not what is measured).
# Compaction off (thresholds 0): a forced pass would otherwise compact the half-empty logs, throttled
# at compactionRateByEntries (1000 entries/s), and time that; bench/compaction.py measures compaction.
SETTINGS = {"zkTimeout": 30000, "gcWaitTime": 3_600_000, "entryLogSizeLimit": 1 << 20, "flushInterval": 1000,
            "majorCompactionThreshold": 0.0, "minorCompactionThreshold": 0.0}


def write_ledgers(bk: BookKeeper, count: int, threads: int) -> list[int]:
    payloads = [os.urandom(ENTRY)] * ENTRIES

    def one(_: int) -> int:
        handle = bk.create_ledger(2, 2, 2, password=b"bench")
        handle.append_batch(payloads).result(60)
        handle.close()
        return handle.ledger.ledger_id

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(count)))


def delete_ledgers(zk: KazooClient, bk: BookKeeper, ledger_ids: list[int]) -> None:
    """Delete the ledgers' znodes, pipelined (what clients deleting them one by one add up to)."""
    paths = [bk.store.ledger_path(LedgerId(0, i)) for i in ledger_ids]
    for result in [zk.delete_async(path) for path in paths]:
        result.get(timeout=60)


def bare_listing(zk: KazooClient, root: str) -> tuple[int, int, int]:
    """The hierarchical tree read the cheapest way: (ranges, ledgers, get_children calls)."""
    calls, ranges, ledgers = 1, 0, 0
    for level1 in sorted(c for c in zk.get_children(root) if len(c) == 2 and c.isdigit()):
        calls += 1
        for leaf in sorted(c for c in zk.get_children(f"{root}/{level1}") if len(c) == 4 and c.isdigit()):
            calls += 1
            ranges += 1
            ledgers += sum(1 for n in zk.get_children(f"{root}/{level1}/{leaf}") if n.startswith("L"))
    return ranges, ledgers, calls


def forced_pass(bk: BookKeeper, bookie: str, zk_port: int) -> tuple[pb.GarbageCollectionResponse, int]:
    """Force a pass on ``bookie``, wait for it; (its status after, ZooKeeper requests meanwhile)."""
    client = bk.bookie_client(bookie)
    before = received_requests(zk_port)
    target = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
    deadline = time.monotonic() + 600
    while (state := client.garbage_collection()).passes < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"GC pass {target} of {bookie} did not end within 600 s")
        time.sleep(0.05)
    return state, received_requests(zk_port) - before


def figures(passes: dict[bool, tuple[pb.GarbageCollectionResponse, int]], listing_ms: float,
            listing_requests: int) -> list[Figure]:
    """Each pass's ZooKeeper requests and time, by verifyMetadataOnGC, next to the bare listing's."""
    out: list[Figure] = []
    for verify, (state, requests) in passes.items():
        setting = f"verifyMetadataOnGC={str(verify).lower()}"
        out += [Figure(f"GC pass requests, {setting}", requests, "requests", baseline="bare kazoo listing",
                       baseline_value=listing_requests),
                Figure(f"GC pass time, {setting}", state.lastPassDurationMs, "ms", baseline="bare kazoo listing",
                       baseline_value=listing_ms)]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=10_000)
    parser.add_argument("--threads", type=int, default=16, help="writer threads of the setup")
    args = parser.parse_args()
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)  # "connection dropped" as clients close
    base = tempfile.mkdtemp(prefix="bk-bench-gc-", dir=os.environ.get("BENCH_DIR"))
    cluster = LocalBookKeeper(2, base_dir=base, bookie_settings=SETTINGS)
    cluster.bookies[1].settings["verifyMetadataOnGC"] = True
    try:
        cluster.start()
        zk_port = cluster.zookeeper.port
        with BookKeeper(cluster.metadata_service_uri) as bk:
            start = time.perf_counter()
            ids = write_ledgers(bk, args.ledgers, args.threads)
            written = time.perf_counter() - start
            zk = KazooClient(cluster.zookeeper.connect_string, timeout=30)
            zk.start()
            try:
                start = time.perf_counter()
                delete_ledgers(zk, bk, ids[1::2])
                deleted = time.perf_counter() - start
                print(f"setup: {len(ids):,} ledgers ({ENTRIES} x {ENTRY} B, E=WQ=AQ=2 on 2 bookies) written in "
                      f"{written:.1f} s with {args.threads} threads; {len(ids[1::2]):,} deleted in {deleted:.1f} s")
                passes = {verify: forced_pass(bk, bookie.bookie_id, zk_port)
                          for bookie, verify in zip(cluster.bookies, (False, True))}
                before = received_requests(zk_port)
                start = time.perf_counter()
                zk.sync(cluster.root)
                ranges, listed, calls = bare_listing(zk, cluster.root)
                listing = time.perf_counter() - start
                listing_requests = received_requests(zk_port) - before
            finally:
                zk.stop()
                zk.close()
        print(f"bare kazoo listing: sync + {calls} get_children ({ranges} leaf ranges, {listed:,} ledgers): "
              f"{listing * 1000:8.1f} ms, {listing_requests} ZooKeeper requests")
        for verify, (state, requests) in passes.items():
            ms = state.lastPassDurationMs
            print(f"GC pass, verifyMetadataOnGC={str(verify).lower():5}: {ms:8.1f} ms, {requests} ZooKeeper requests"
                  f" ({state.ledgersDeleted:,} ledgers deleted); ratio pass/listing {ms / (listing * 1000):.1f}")
        print("  (ZooKeeper requests include session pings. The pass's own time is mostly local: an index file\n"
              "   unlinked and its directory fsynced per deleted ledger. verifyMetadataOnGC=true adds one read per\n"
              "   deleted ledger, at most gcMetadataOpRateLimit (1000) per second.)")
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    record("gc", figures(passes, listing * 1000, listing_requests),
           notes=[f"{len(ids):,} ledgers ({ENTRIES} x {ENTRY} B, E=WQ=AQ=2 on 2 bookies), {len(ids[1::2]):,} deleted",
                  "ZooKeeper requests include session pings"])


if __name__ == "__main__":
    main()
