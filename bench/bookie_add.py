"""Bookie add benchmark: one client streams 1 KiB entries in batches of 256 to one bookie process
(journal fsync on), next to the same client against a bare servicer that acks without storing, and
against a journal-only servicer (bench/bare_journal_bookie.py: one writev + one fdatasync per group,
then the acks; no entry log, no index, no checks), the least any servicer that fsyncs before it acks
can do on this machine.

The bookie runs with metrics and the HTTP admin server on, /metrics scraped every second; a second bookie
with both off (enableStatistics=false) is measured in the same rounds: what metrics cost (target >= 0.97).

Prints entries/s and per-batch latency p50/p99 for each, and the ratios. Targets: >= 120,000
entries/s into the bookie, >= 0.6 of the bare servicer.

    python bench/bookie_add.py [--seconds 5] [--rounds 3] [--in-flight 16]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import deque

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.util.processes import free_ports, stop_process, wait_for_port

from metrics_scraper import METRICS_OFF, METRICS_ON, scraped
from results import Figure, record

BATCH = 256
ENTRY = 1024
KEY = generate_master_key(b"bench")


def run_client(address: str, ledger: LedgerId, seconds: float, in_flight: int) -> tuple[float, float, float]:
    """Stream batches for ``seconds``; return (entries/s, p50 ms, p99 ms) of batch latency."""
    digest = DigestManager(ledger, b"bench")
    payload = os.urandom(ENTRY)
    # Pre-build the batches (the client's framing is not what is measured here).
    batches, length = [], 0
    for b in range(64):
        blob, length = digest.build_framed(b * BATCH, b * BATCH - 1, length, [payload] * BATCH)
        batches.append(blob)
    client = BookieClient(address, timeout=30)  # gRPC: the bookie's grpcPort, or the bare servicer
    latencies, pending, sent, acked = [], deque(), 0, 0
    try:
        start = time.perf_counter()
        end = start + seconds
        while time.perf_counter() < end or pending:
            while len(pending) < in_flight and time.perf_counter() < end:
                # Entry ids restart every 64 batches: the bookie keeps the newest copy, as on a retry.
                pending.append((time.perf_counter(), client.add(ledger, KEY, batches[sent % len(batches)])))
                sent += 1
            t0, future = pending.popleft()
            response = future.result()
            if response.status != status.EOK:
                raise RuntimeError(f"add failed: {status.name_of(response.status)} {response.message}")
            latencies.append(time.perf_counter() - t0)
            acked += 1
        elapsed = time.perf_counter() - start
    finally:
        client.close()
    latencies.sort()
    return acked * BATCH / elapsed, latencies[len(latencies) // 2] * 1000, latencies[int(len(latencies) * 0.99)] * 1000


def figures(med: dict[str, list[float]]) -> list[Figure]:
    """The figures of ``med``: per servicer, the medians of (entries/s, batch p50 ms, batch p99 ms)."""
    bookie, p50, p99 = med["bookie"]
    unmetered = med["unmetered"][0]
    journal, journal_p50, journal_p99 = med["journal"]
    bare = med["bare"][0]
    bare_name, journal_name = "bare servicer (acks only)", "journal-only servicer"
    return [Figure("bookie", bookie, "entries/s", target=">= 120000"),
            Figure("bookie vs bare servicer", bookie, "entries/s", baseline=bare_name, baseline_value=bare,
                   target=">= 0.6"),
            Figure("bookie vs journal-only servicer", bookie, "entries/s", baseline=journal_name,
                   baseline_value=journal),
            Figure("journal-only vs bare servicer", journal, "entries/s", baseline=bare_name, baseline_value=bare),
            Figure("bookie with metrics and HTTP vs without", bookie, "entries/s",
                   baseline="bookie, enableStatistics=false, no HTTP", baseline_value=unmetered, target=">= 0.97"),
            # Latency next to the journal-only servicer's: what the bookie adds to an fsync before the ack.
            Figure("bookie batch p50", p50, "ms", baseline=f"{journal_name} batch p50", baseline_value=journal_p50),
            Figure("bookie batch p99", p99, "ms", baseline=f"{journal_name} batch p99", baseline_value=journal_p99)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--in-flight", type=int, default=16, help="batches in flight")
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bk-bench-add-", dir=os.environ.get("BENCH_DIR"))
    here = os.path.dirname(__file__)
    cluster = unmetered = bare = journal_only = None
    results = {"bookie": [], "unmetered": [], "bare": [], "journal": []}
    settings = json.loads(os.environ.get("BK_SETTINGS", "{}"))
    try:
        cluster = LocalBookKeeper(1, base_dir=os.path.join(base, "metered"),
                                  bookie_settings={**settings, **METRICS_ON}).start()
        unmetered = LocalBookKeeper(1, base_dir=os.path.join(base, "unmetered"),
                                    bookie_settings={**settings, **METRICS_OFF}).start()
        bare_port, journal_port = free_ports(2)
        bare = subprocess.Popen([sys.executable, os.path.join(here, "bare_bookie.py"), str(bare_port)],
                                start_new_session=True, stdout=subprocess.DEVNULL)
        journal_only = subprocess.Popen([sys.executable, os.path.join(here, "bare_journal_bookie.py"), str(journal_port),
                                         os.path.join(base, "journal-only.txn")],
                                        start_new_session=True, stdout=subprocess.DEVNULL)
        wait_for_port(bare_port, bare, 30, "bare servicer")
        wait_for_port(journal_port, journal_only, 30, "journal-only servicer")
        with scraped([cluster.bookies[0].http_address]) as scrapes:
            for r in range(args.rounds):
                # The two bookies swap places every round: neither is always measured first.
                bookies = [("unmetered", unmetered.bookies[0].grpc_address), ("bookie", cluster.bookies[0].grpc_address)]
                for name, target in (("bare", f"127.0.0.1:{bare_port}"), ("journal", f"127.0.0.1:{journal_port}"),
                                     *(bookies if r % 2 == 0 else reversed(bookies))):
                    results[name].append(run_client(target, LedgerId(0, 1 + r), args.seconds, args.in_flight))
                    rate, p50, p99 = results[name][-1]
                    print(f"round {r + 1} {name:9s}: {rate:10,.0f} entries/s  batch p50 {p50:6.1f} ms  "
                          f"p99 {p99:6.1f} ms")
        print(f"/metrics scraped {len(scrapes)} times")
    finally:
        for proc in (bare, journal_only):
            if proc is not None:
                stop_process(proc)
        for c in (cluster, unmetered):
            if c is not None:
                c.stop()
        shutil.rmtree(base, ignore_errors=True)
    med = {k: [statistics.median(x[i] for x in v) for i in range(3)] for k, v in results.items()}
    print(f"bookie add bench (1 KiB entries, {BATCH} per message, {args.in_flight} in flight, fsync on, median of {args.rounds}):")
    print(f"  bare servicer (acks only) : {med['bare'][0]:10,.0f} entries/s  p50 {med['bare'][1]:5.1f} ms  p99 {med['bare'][2]:5.1f} ms")
    print(f"  journal-only servicer     : {med['journal'][0]:10,.0f} entries/s  p50 {med['journal'][1]:5.1f} ms  p99 {med['journal'][2]:5.1f} ms"
          f"  ({med['journal'][0] / med['bare'][0]:.2f} of the bare servicer)")
    print(f"  bookie (journal + storage): {med['bookie'][0]:10,.0f} entries/s  p50 {med['bookie'][1]:5.1f} ms  p99 {med['bookie'][2]:5.1f} ms"
          "  (metrics and HTTP on, scraped)")
    print(f"  bookie, metrics off       : {med['unmetered'][0]:10,.0f} entries/s  ({med['bookie'][0] / med['unmetered'][0]:.3f} "
          "of it with metrics on; target >= 0.97)")
    print(f"  ratio bookie/bare         : {med['bookie'][0] / med['bare'][0]:10.2f}   (targets: >= 120,000 entries/s, >= 0.6)")
    print(f"  ratio bookie/journal-only : {med['bookie'][0] / med['journal'][0]:10.2f}")
    record("bookie_add", figures(med), notes=[f"1 KiB entries, {BATCH} per message, {args.in_flight} in flight, "
                                              f"fsync on, median of {args.rounds} rounds"])


if __name__ == "__main__":
    main()
