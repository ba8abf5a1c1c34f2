"""Interop benchmark (issue 11): BookKeeper's Java client and this project's client, against real Apache
BookKeeper bookies and against this project's bookies, in one run on one real ZooKeeper.

Three bookies, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on, everything on this machine:
 (a) BookKeeper's Java client against three Java bookies (realbk ``bin/bench``): the baseline;
 (b) this project's client against the same Java bookies (BookKeeper's native protocol, v3);
 (c) BookKeeper's Java client against three of this project's bookies, once they serve the native
     protocol (they register a ``bookie-rpc`` endpoint); skipped with why otherwise;
 (d) this project's client against its own three bookies (gRPC).
Each prints pipelined appends/s (window of W adds in flight; this client also ``append_batch``),
one-at-a-time append p50 and read entries/s of the closed ledger, then (b)/(a) (target >= 0.5 for
appends and reads) and (c)/(a).

    python bench/interop.py [--seconds 3] [--window 1000] [--single 300]

Needs a real BookKeeper (``$REALBK_HOME`` or ../shared/realbk); without one it says how to get one
and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass

from bookie.client import BookKeeper
from bookie.client import benchmark
from bookie.meta.bookie_service_info import BOOKIE_RPC
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk
from bookie.testing.zookeeper_server import ZooKeeperServer

ENTRY_SIZE = 1024
ENSEMBLE, WRITE_QUORUM, ACK_QUORUM = 3, 3, 2
BATCH, BATCHES_IN_FLIGHT = 256, 8
TARGET_B_OVER_A = 0.5
# The Java bookies get more heap than the interop tests give them (a benchmark keeps ~1,000 adds of
# 1 KiB in flight per bookie), still small enough for six bookies on a 2-core machine.
BENCH_BOOKIE_JAVA_OPTS = "-Xms256m -Xmx256m -XX:MaxDirectMemorySize=256m -XX:+UseSerialGC"


@dataclass
class Figures:
    """One contender's figures; None where it has no such figure."""
    appends_s: float
    batch_appends_s: float | None
    single_p50_ms: float
    read_entries_s: float


def java_client(cluster: RealBookKeeper, uri: str, args) -> Figures:
    """realbk's ``bin/bench`` (BookKeeper's BenchThroughputLatency): one JSON line."""
    result = cluster.run("bench", uri, "--ensemble", str(ENSEMBLE), "--write-quorum", str(WRITE_QUORUM),
                         "--ack-quorum", str(ACK_QUORUM), "--entry-size", str(ENTRY_SIZE),
                         "--window", str(args.window), "--seconds", str(args.seconds),
                         "--warmup-seconds", str(args.warmup), "--single", str(args.single))
    out = json.loads(result.stdout.strip().splitlines()[-1])
    return Figures(out["entries_s"], None, out["single_p50_ms"], out["read_entries_s"])


def this_client(uri: str, args) -> Figures:
    """The same phases with this project's client (bookie.client.benchmark, as ``bk bench``)."""
    shape = (ENTRY_SIZE, ENSEMBLE, WRITE_QUORUM, ACK_QUORUM)
    with BookKeeper(uri) as bk:
        benchmark.write_throughput(bk, args.warmup, *shape, in_flight=args.window)  # connections, caches
        window = benchmark.write_throughput(bk, args.seconds, *shape, in_flight=args.window)
        batched = benchmark.batch_write_throughput(bk, args.seconds, *shape, batch=BATCH, in_flight=BATCHES_IN_FLIGHT)
        single = benchmark.append_latency(bk, args.single, *shape)
        entries, _, read_s = benchmark.read_throughput(bk, window.ledger_ids[0])
        for ledger in (*window.ledger_ids, *batched.ledger_ids, *single.ledger_ids):
            bk.delete_ledger(ledger)
    return Figures(window.rate, batched.rate, single.percentile(50), entries / read_s)


def bookkeeper_version(home: pathlib.Path) -> str:
    """The version in the name of the install's BookKeeper jar (lib/bookkeeper-<version>[-offline].jar)."""
    for jar in sorted(home.glob("lib/bookkeeper-*.jar")):
        return jar.name.removeprefix("bookkeeper-").removesuffix(".jar").removesuffix("-offline")
    return "version unknown"


def serves_native(cluster: LocalBookKeeper) -> bool:
    """Whether every one of this project's bookies registered BookKeeper's native endpoint."""
    with ZKMetadataStore(cluster.metadata_service_uri) as store:
        infos = [store.bookie_service_info(b.bookie_id) for b in cluster.bookies]
    return all(info is not None and info.endpoint(BOOKIE_RPC) is not None for info in infos)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per pipelined phase")
    parser.add_argument("--warmup", type=float, default=2.0,
                        help="seconds of warm-up per contender (bin/bench's default: the JVM compiles its hot paths)")
    parser.add_argument("--window", type=int, default=1000, help="adds in flight (bin/bench's default)")
    parser.add_argument("--single", type=int, default=300, help="one-at-a-time appends")
    parser.add_argument("--only", choices=("a", "b", "c", "d"), action="append",
                        help="run only these contenders (repeatable; for profiling one of them)")
    args = parser.parse_args()
    home = find_realbk()
    if home is None:
        print(f"interop bench skipped: {SKIP_REASON}")
        return
    base = tempfile.mkdtemp(prefix="bk-bench-interop-", dir=os.environ.get("BENCH_DIR"))
    try:
        print(f"real BookKeeper: {bookkeeper_version(home)} at {home}")
        report(run(args, base, set(args.only or "abcd")), args)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args, base: str, wanted: set[str]) -> dict[str, Figures | str]:
    results: dict[str, Figures | str] = {}
    zookeeper = ZooKeeperServer(os.path.join(base, "zookeeper")).start()
    try:
        # One kind of bookie at a time: the two clusters would share the 2 cores otherwise.
        if wanted & {"a", "b"}:
            java = RealBookKeeper(zookeeper.connect_string, os.path.join(base, "realbk"), 3,
                                  java_opts=BENCH_BOOKIE_JAVA_OPTS).start()
            try:
                if "a" in wanted:
                    results["a"] = java_client(java, java.metadata_service_uri, args)
                if "b" in wanted:
                    results["b"] = this_client(java.metadata_service_uri, args)
            finally:
                java.stop()
        if wanted & {"c", "d"}:
            with LocalBookKeeper(3, base_dir=os.path.join(base, "ours"), zookeeper=zookeeper, root="/ledgers-ours") as ours:
                if "d" in wanted:
                    results["d"] = this_client(ours.metadata_service_uri, args)
                if "c" in wanted:
                    if serves_native(ours):
                        # The Java tools only; no Java bookie is started on this root.
                        tools = RealBookKeeper(zookeeper.connect_string, os.path.join(base, "tools"), 0,
                                               root=ours.root)
                        results["c"] = java_client(tools, ours.metadata_service_uri, args)
                    else:
                        results["c"] = "bk bookie does not serve the native protocol yet"
    finally:
        zookeeper.stop()
    return results


CONTENDERS = {
    "a": "(a) Java client  -> Java bookies (v3)",
    "b": "(b) this client  -> Java bookies (v3)",
    "c": "(c) Java client  -> our bookies (v3)",
    "d": "(d) this client  -> our bookies (gRPC)",
}


def report(results: dict[str, Figures | str], args) -> None:
    print(f"interop bench (3 bookies + client on this machine, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on; "
          f"{args.seconds:g} s per phase, window {args.window}, batches {BATCH} x {BATCHES_IN_FLIGHT}):")
    print(f"  {'':40s} {'appends/s':>11s} {'batch/s':>11s} {'single p50':>11s} {'reads/s':>11s}")
    for key, label in CONTENDERS.items():
        figures = results.get(key)
        if figures is None:
            continue
        if isinstance(figures, str):
            print(f"  ({key}) skipped: {figures}")
            continue
        batch = f"{figures.batch_appends_s:11,.0f}" if figures.batch_appends_s is not None else f"{'-':>11s}"
        print(f"  {label:40s} {figures.appends_s:11,.0f} {batch} {figures.single_p50_ms:8.2f} ms "
              f"{figures.read_entries_s:11,.0f}")
    baseline = results.get("a")
    if not isinstance(baseline, Figures):
        return
    for key, target in (("b", TARGET_B_OVER_A), ("c", None), ("d", None)):
        figures = results.get(key)
        if not isinstance(figures, Figures):
            continue
        goal = f" (target >= {target})" if target else ""
        batch = (f", batch appends {figures.batch_appends_s / baseline.appends_s:.2f}"
                 if figures.batch_appends_s is not None else "")
        print(f"  ({key})/(a): appends {figures.appends_s / baseline.appends_s:.2f}{batch}, "
              f"reads {figures.read_entries_s / baseline.read_entries_s:.2f}{goal}; "
              f"single p50 {figures.single_p50_ms / baseline.single_p50_ms:.2f}x (a)'s")


if __name__ == "__main__":
    main()
