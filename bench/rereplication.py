"""Re-replication benchmark: a SIGKILLed bookie's share of 1 KiB-entry ledgers copied to a replacement by
the project's replication code, next to the project's own client doing the same copy (same run).

A real ZooKeeper and four bookie processes. The ledgers are E=3, WQ=2, AQ=2 on bookies 0-2 (written with
``append_batch``), so bookie 0 holds two thirds of every ledger; then bookie 0 is SIGKILLed, and bookie 3
is the only possible replacement. Everything below runs with bookie 0 dead, reading from the survivors:

- baseline (all ledgers): per ledger, the client's ``read(0, last)`` (it has no strided read, so it
  reads the whole ledger, 1.5x the share), then the entries bookie 0 stored appended with
  ``append_batch`` (a) to a new ledger of the same quorums on bookies 1-3 (what the issue asks: it
  writes every entry twice) and (b) to a new ledger on bookie 3 alone, E=WQ=AQ=1 (the strict
  comparison: as many bytes written as the replicator writes). Each timed apart, the read counted in both.
- LedgerFragmentReplicator (first half of the ledgers): the under-replicated fragments found by
  LedgerChecker (not timed), then ``replicate`` on each, as the ReplicationWorker does: the copy
  (strided range reads from the survivors, RECOVERY_ADD of the entries exactly as stored) plus the
  metadata CAS. No marking, no locking.
- ReplicationWorker (second half): the ledgers marked under-replicated (not timed), then one worker
  in this process takes them one by one until the list is empty: locking, opening, checking, copying,
  the CAS and marking them replicated are all in its time.

Target (issue 13): each at least 0.5 of the baseline's entries/s.

    python bench/rereplication.py [--ledgers 20] [--entries 10000]
"""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from dataclasses import dataclass

from bookie.client import BookKeeper
from bookie.client.distribution_schedule import stores
from bookie.client.ledger_checker import LedgerChecker
from bookie.client.ledger_fragment_replicator import LedgerFragmentReplicator
from bookie.meta.ledger_underreplication_manager import LedgerUnderreplicationManager
from bookie.replication.replication_worker import ReplicationWorker
from bookie.testing.local_bookkeeper import LocalBookKeeper

from results import Figure, record

ENTRY = 1024
E, WQ, AQ = 3, 2, 2
PASSWORD = b"bench"
LOST = 0  # index of the SIGKILLed bookie, in the cluster and in every ledger's ensemble


@dataclass
class Throughput:
    seconds: float = 0.0
    entries: int = 0
    size: int = 0

    @property
    def rate(self) -> float:
        return self.entries / self.seconds

    def line(self, label: str, baseline: "Throughput | None" = None) -> str:
        text = (f"{label:46} {self.seconds:7.2f} s  {self.rate:9,.0f} entries/s  "
                f"{self.size / self.seconds / 1e6:6.1f} MB/s")
        if baseline is not None:
            text += f"  ratio {self.rate / baseline.rate:.2f}"
        return text


def write_ledgers(bk: BookKeeper, bookies: list[str], count: int, entries: int) -> list[int]:
    payloads = [os.urandom(ENTRY) for _ in range(entries)]
    ids = []
    for _ in range(count):
        handle = bk.create_ledger(E, WQ, AQ, password=PASSWORD, bookies=bookies)
        handle.append_batch(payloads).result(120)
        handle.close()
        ids.append(handle.ledger.ledger_id)
    return ids


def append_timed(bk: BookKeeper, share: list[bytes], quorums: tuple[int, int, int], bookies: list[str]) -> float:
    start = time.perf_counter()
    writer = bk.create_ledger(*quorums, password=PASSWORD, bookies=bookies)
    writer.append_batch(share).result(120)
    writer.close()
    return time.perf_counter() - start


def baseline(bk: BookKeeper, ids: list[int], survivors: list[str], target: str) -> tuple[Throughput, Throughput]:
    """The lost share read by the client and appended: (same quorums on ``survivors`` + ``target``,
    ``target`` alone)."""
    same, alone = Throughput(), Throughput()
    for ledger_id in ids:
        start = time.perf_counter()
        with bk.open_ledger(ledger_id, PASSWORD, recovery=False) as reader:
            share = [e.payload for e in reader.read(0, reader.metadata.last_entry_id) if stores(LOST, e.entry_id, E, WQ)]
        read_s = time.perf_counter() - start
        size = sum(len(p) for p in share)
        for figure, quorums, bookies in ((same, (E, WQ, AQ), survivors + [target]), (alone, (1, 1, 1), [target])):
            figure.seconds += read_s + append_timed(bk, share, quorums, bookies)
            figure.entries += len(share)
            figure.size += size
    return same, alone


def replicate_fragments(bk: BookKeeper, ids: list[int]) -> Throughput:
    """LedgerFragmentReplicator.replicate over every under-replicated fragment; only that is timed."""
    checker, replicator = LedgerChecker(bk), LedgerFragmentReplicator(bk)
    figure = Throughput()
    for ledger_id in ids:
        with bk.open_ledger(ledger_id, PASSWORD, recovery=False) as handle:
            fragments = checker.check_ledger(handle)
            if not fragments:
                raise RuntimeError(f"ledger {ledger_id}: LedgerChecker found nothing under-replicated")
            for fragment in sorted(fragments, key=lambda f: f.first):
                progress = []
                replicator.on_progress = progress.append
                start = time.perf_counter()
                replicator.replicate(handle, fragment)
                figure.seconds += time.perf_counter() - start
                figure.entries += progress[-1].entries  # its bytes are framed: the size is the share's payload
    return figure


def rereplicate_worker(bk: BookKeeper, ids: list[int], lost: str) -> float:
    """Seconds one ReplicationWorker takes to empty the under-replicated list of ``ids``."""
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
        raise RuntimeError(f"{len(left)} ledgers still under-replicated: {manager.get_state(left[0].ledger)}")
    return elapsed


def figures(same: Throughput, alone: Throughput, direct: Throughput, worker: Throughput) -> list[Figure]:
    """Replicator and worker, each next to both client copies; the target is on the copy of the same quorums."""
    baselines = ((f"E{E}WQ{WQ}AQ{AQ}", same, ">= 0.5"), ("E1WQ1AQ1", alone, None))
    return [Figure(f"{name} vs client {quorums}", measured.rate, "entries/s",
                   baseline=f"client read + append_batch {quorums}", baseline_value=base.rate, target=target)
            for name, measured in (("LedgerFragmentReplicator", direct), ("ReplicationWorker", worker))
            for quorums, base, target in baselines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=20)
    parser.add_argument("--entries", type=int, default=10_000, help="entries per ledger")
    args = parser.parse_args()
    if args.ledgers < 2:
        parser.error("--ledgers: at least 2 (half for the replicator, half for the worker)")
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    base = tempfile.mkdtemp(prefix="bk-bench-rerepl-", dir=os.environ.get("BENCH_DIR"))
    cluster = LocalBookKeeper(4, base_dir=base, bookie_settings={"zkTimeout": 4000})
    try:
        cluster.start()
        b = [x.bookie_id for x in cluster.bookies]
        with BookKeeper(cluster.metadata_service_uri) as bk:
            ids = write_ledgers(bk, b[:3], args.ledgers, args.entries)
            cluster.kill_bookie(LOST)
            same, alone = baseline(bk, ids, b[1:3], b[3])
            half = len(ids) // 2
            direct = replicate_fragments(bk, ids[:half])
            worker_s = rereplicate_worker(bk, ids[half:], b[LOST])
            for ledger_id in ids:
                ensemble = bk.ledger_metadata(ledger_id).ensembles[0][1]
                assert b[LOST] not in ensemble and b[3] in ensemble, (ledger_id, ensemble)
        per_ledger = same.entries // len(ids)
        worker = Throughput(worker_s, per_ledger * (len(ids) - half), same.size // len(ids) * (len(ids) - half))
        if direct.entries != per_ledger * half:
            raise RuntimeError(f"the replicator copied {direct.entries} entries, the share is {per_ledger * half}")
        direct.size = same.size // len(ids) * half
        print(f"setup: {args.ledgers} ledgers x {args.entries:,} entries of {ENTRY} B, E={E} WQ={WQ} AQ={AQ} on bookies "
              f"0-2; bookie 0 SIGKILLed, its share {per_ledger:,} entries per ledger, copied to bookie 3")
        print(same.line(f"baseline: client read + append_batch E{E}WQ{WQ}AQ{AQ}"))
        print(alone.line("baseline: client read + append_batch E1WQ1AQ1"))
        print(direct.line(f"LedgerFragmentReplicator, {half} ledgers (vs E{E})", same)
              + f"  vs E1 {direct.rate / alone.rate:.2f}")
        print(worker.line(f"ReplicationWorker, {len(ids) - half} ledgers (vs E{E})", same)
              + f"  vs E1 {worker.rate / alone.rate:.2f}")
        print("  (target: ratio >= 0.5. Replicator: copy + metadata CAS, no marking or locking; worker: locking,\n"
              "   opening, checking, copy, CAS and marking replicated included. The baseline reads whole ledgers.)")
    finally:
        cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
    record("rereplication", figures(same, alone, direct, worker),
           notes=[f"{args.ledgers} ledgers x {args.entries:,} entries of {ENTRY} B, E={E} WQ={WQ} AQ={AQ}; "
                  "the share of SIGKILLed bookie 0 copied to bookie 3",
                  f"replicator: {half} ledgers (copy + metadata CAS); worker: {len(ids) - half} ledgers (locking to "
                  "marking replicated)"])


if __name__ == "__main__":
    main()
