"""Interop benchmark (issue 11; cold and warm figures, issue 31): BookKeeper's Java client and this
project's client, against real Apache BookKeeper bookies and against this project's bookies, in one run
on one real ZooKeeper.

Three bookies, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on, everything on this machine. Each contender gets
three freshly started bookies of its own (its own ledgers root), one contender at a time:
 (a) BookKeeper's Java client against three Java bookies (realbk ``bin/bench``): the baseline;
 (b) this project's client against Java bookies (BookKeeper's native protocol, v3);
 (c) BookKeeper's Java client against three of this project's bookies (native protocol, v3), once they
     serve it (they register a ``bookie-rpc`` endpoint); skipped with why otherwise;
 (d) this project's client against its own three bookies (gRPC);
 (e) this project's client against its own three bookies over the native protocol (v3; client
     configuration ``bookieProtocol=native``: the ``bookie-rpc`` endpoint although they also register ``grpc``);
 (f) the same with ``useV2WireProtocol=true``: adds as v2 ADDENTRY (as Pulsar runs BookKeeper's client).

Each contender is measured twice:
 cold: the first phase on the fresh bookies with a fresh client (a new JVM for ``bin/bench`` with
       ``--warmup-seconds 0``; a new BookKeeper client here): pipelined appends for --seconds, then a
       read of that ledger;
 warm: then, on the same bookies, a warm-up of pipelined appends for --warmup seconds (a new JVM for
       ``bin/bench``: its JIT compiles the add path; this client: connections, caches), then pipelined
       appends for --seconds, ``append_batch`` for --seconds (this client only), --single one-at-a-time
       appends, and a read of the pipelined phase's ledger (the JVM's read path is warmed by the read
       itself, as in ``bin/bench``).
Each prints pipelined appends/s (window of W adds in flight), batched appends/s, one-at-a-time append
p50 and read entries/s; then, cold and warm, (b)/(a) (target >= 0.5 for appends and reads), (c)/(a)
(target >= 1.0), (e)/(d) and (f)/(d) (target >= 0.9).

    python bench/interop.py [--seconds 20] [--warmup 10] [--window 1000] [--single 300] [--only c ...]

Short runs while developing: ``--seconds 3 --warmup 2``. Needs a real BookKeeper (``$REALBK_HOME`` or
../shared/realbk); without one it says how to get one and exits 0.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import tempfile
from dataclasses import dataclass
from typing import Iterator

from bookie.client import BookKeeper
from bookie.client import benchmark
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.meta.bookie_service_info import BOOKIE_RPC
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.testing.local_bookkeeper import LocalBookKeeper
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk
from bookie.testing.zookeeper_server import ZooKeeperServer
from results import Figure, record, record_skipped

ENTRY_SIZE = 1024
ENSEMBLE, WRITE_QUORUM, ACK_QUORUM = 3, 3, 2
BATCH, BATCHES_IN_FLIGHT = 256, 8
TARGETS = {"b": ("a", 0.5), "c": ("a", 1.0), "e": ("d", 0.9), "f": ("d", 0.9)}  # contender: (baseline, target)
# The Java bookies get more memory than the interop tests give them: a 20 s phase writes ~1 GB to each, and
# DbLedgerStorage's write cache (a quarter of the direct memory) must absorb it between flushes.
BENCH_BOOKIE_JAVA_OPTS = "-Xms512m -Xmx512m -XX:MaxDirectMemorySize=1g -XX:+UseSerialGC"


@dataclass
class Figures:
    """One measurement's figures; None where it has no such figure."""
    appends_s: float
    batch_appends_s: float | None
    single_p50_ms: float | None
    read_entries_s: float


@dataclass
class Result:
    cold: Figures
    warm: Figures


def java_client(cluster: RealBookKeeper, uri: str, args) -> Result:
    """realbk's ``bin/bench`` (BookKeeper's BenchThroughputLatency), twice: a fresh JVM without warm-up
    (cold), then a fresh JVM with one (warm). One JSON line each."""
    def bench(warmup: float) -> dict:
        result = cluster.run("bench", uri, "--ensemble", str(ENSEMBLE), "--write-quorum", str(WRITE_QUORUM),
                             "--ack-quorum", str(ACK_QUORUM), "--entry-size", str(ENTRY_SIZE),
                             "--window", str(args.window), "--seconds", str(args.seconds),
                             "--warmup-seconds", str(warmup), "--single", str(args.single))
        return json.loads(result.stdout.strip().splitlines()[-1])
    cold, warm = bench(0), bench(args.warmup)
    return Result(Figures(cold["entries_s"], None, None, cold["read_entries_s"]),
                  Figures(warm["entries_s"], None, warm["single_p50_ms"], warm["read_entries_s"]))


def this_client(uri: str, args, native: bool = False, v2_adds: bool = False) -> Result:
    """The same phases with this project's client (bookie.client.benchmark, as ``bk bench``); with
    ``native``, over BookKeeper's native protocol to bookies that also offer gRPC; with ``v2_adds``, its
    adds in v2 (``useV2WireProtocol``)."""
    shape = (ENTRY_SIZE, ENSEMBLE, WRITE_QUORUM, ACK_QUORUM)
    with BookKeeper(uri, bookieProtocol="native" if native else "auto", useV2WireProtocol=v2_adds) as bk:
        cold = benchmark.write_throughput(bk, args.seconds, *shape, in_flight=args.window)
        cold_read, _, cold_read_s = benchmark.read_throughput(bk, cold.ledger_ids[0])
        benchmark.write_throughput(bk, args.warmup, *shape, in_flight=args.window)
        window = benchmark.write_throughput(bk, args.seconds, *shape, in_flight=args.window)
        batched = benchmark.batch_write_throughput(bk, args.seconds, *shape, batch=BATCH, in_flight=BATCHES_IN_FLIGHT)
        single = benchmark.append_latency(bk, args.single, *shape)
        entries, _, read_s = benchmark.read_throughput(bk, window.ledger_ids[0])
        transports = {type(client) for client in bk._clients.values()}
        if native and transports != {NativeBookieClient}:
            raise RuntimeError(f"a native contender used {transports}, not only the native protocol")
    return Result(Figures(cold.rate, None, None, cold_read / cold_read_s),
                  Figures(window.rate, batched.rate, single.percentile(50), entries / read_s))


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
    parser.add_argument("--seconds", type=float, default=20.0, help="per pipelined phase (cold, warm, batched)")
    parser.add_argument("--warmup", type=float, default=10.0,
                        help="seconds of warm-up appends before the warm phases (bin/bench's --warmup-seconds)")
    parser.add_argument("--window", type=int, default=1000, help="adds in flight (bin/bench's default)")
    parser.add_argument("--single", type=int, default=300, help="one-at-a-time appends")
    parser.add_argument("--only", choices=tuple(CONTENDERS), action="append",
                        help="run only these contenders (repeatable; for profiling one of them)")
    args = parser.parse_args()
    home = find_realbk()
    if home is None:
        print(f"interop bench skipped: {SKIP_REASON}")
        record_skipped("interop", SKIP_REASON)
        return
    base = tempfile.mkdtemp(prefix="bk-bench-interop-", dir=os.environ.get("BENCH_DIR"))
    try:
        version = bookkeeper_version(home)
        print(f"real BookKeeper: {version} at {home}")
        results = run(args, base, [k for k in CONTENDERS if k in set(args.only or CONTENDERS)])
        report(results, args)
        record("interop", figures(results), notes=[f"BookKeeper {version}; {conditions(args)}"]
               + [f"({key}) no figures: {result}" for key, result in results.items() if isinstance(result, str)])
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args, base: str, wanted: list[str]) -> dict[str, Result | str]:
    results: dict[str, Result | str] = {}
    zookeeper = ZooKeeperServer(os.path.join(base, "zookeeper")).start()
    try:
        # One cluster at a time (they would share the 2 cores otherwise), fresh for each contender.
        for key in wanted:
            try:
                results[key] = run_one(key, args, base, zookeeper)
            except Exception as exc:  # the other contenders still run; this one says why it has no figures
                lines = str(exc).splitlines() or [type(exc).__name__]
                why = next((line.strip() for line in lines[1:] if "Exception" in line), lines[-1].strip())
                results[key] = f"failed: {lines[0]}" + (f" ... {why}" if len(lines) > 1 else "")
    finally:
        zookeeper.stop()
    return results


def run_one(key: str, args, base: str, zookeeper: ZooKeeperServer) -> Result | str:
    """One contender on bookies of its own, whose data is removed when it is done: a contender writes
    gigabytes, and the six together would fill the disk the last one journals to."""
    where = os.path.join(base, key)
    try:
        return _measure(key, args, base, where, zookeeper)
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _measure(key: str, args, base: str, where: str, zookeeper: ZooKeeperServer) -> Result | str:
    if key in ("a", "b"):
        java = RealBookKeeper(zookeeper.connect_string, where, 3, java_opts=BENCH_BOOKIE_JAVA_OPTS,
                              root=f"/ledgers-{key}").start()
        try:
            uri = java.metadata_service_uri
            return java_client(java, uri, args) if key == "a" else this_client(uri, args)
        finally:
            java.stop()
    with LocalBookKeeper(3, base_dir=where, zookeeper=zookeeper, root=f"/ledgers-{key}") as ours:
        if key != "c":
            return this_client(ours.metadata_service_uri, args, native=key in ("e", "f"), v2_adds=key == "f")
        if not serves_native(ours):
            return "bk bookie does not serve the native protocol yet"
        # The Java tools only; no Java bookie is started on this root.
        tools = RealBookKeeper(zookeeper.connect_string, os.path.join(base, "tools"), 0, root=ours.root)
        return java_client(tools, ours.metadata_service_uri, args)


CONTENDERS = {
    "a": "(a) Java client  -> Java bookies (v3)",
    "b": "(b) this client  -> Java bookies (v3)",
    "c": "(c) Java client  -> our bookies (v3)",
    "d": "(d) this client  -> our bookies (gRPC)",
    "e": "(e) this client  -> our bookies (v3)",
    "f": "(f) this client  -> our bookies (v2 add)",
}


def _cell(value: float | None, unit: str = "") -> str:
    return f"{'-':>11s}" if value is None else (f"{value:8.2f}{unit}" if unit else f"{value:11,.0f}")


def conditions(args) -> str:
    return (f"3 bookies + client on this machine, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on; "
            f"fresh bookies per contender; {args.seconds:g} s per phase, warm-up {args.warmup:g} s, "
            f"window {args.window}, batches {BATCH} x {BATCHES_IN_FLIGHT}")


def report(results: dict[str, Result | str], args) -> None:
    print(f"interop bench ({conditions(args)}):")
    print(f"  {'':46s} {'appends/s':>11s} {'batch/s':>11s} {'single p50':>11s} {'reads/s':>11s}")
    for key, label in CONTENDERS.items():
        result = results.get(key)
        if result is None:
            continue
        if isinstance(result, str):
            print(f"  ({key}) no figures: {result}")
            continue
        for phase in ("cold", "warm"):
            f = getattr(result, phase)
            print(f"  {label:40s} {phase:5s} {_cell(f.appends_s)} {_cell(f.batch_appends_s)} "
                  f"{_cell(f.single_p50_ms, ' ms')} {_cell(f.read_entries_s)}")
    for key, base_key, target, phase, f, b in targeted(results):
        single = (f"; single p50 {f.single_p50_ms / b.single_p50_ms:.2f}x ({base_key})'s"
                  if f.single_p50_ms is not None and b.single_p50_ms else "")
        print(f"  ({key})/({base_key}) {phase}: appends {f.appends_s / b.appends_s:.2f}, "
              f"reads {f.read_entries_s / b.read_entries_s:.2f} (target >= {target}){single}")


def targeted(results: dict[str, Result | str]) -> Iterator[tuple[str, str, float, str, Figures, Figures]]:
    """(contender, baseline contender, target, phase, its figures, the baseline's) of each pair in TARGETS that
    both have figures, cold then warm."""
    for key, (base_key, target) in TARGETS.items():
        result, baseline = results.get(key), results.get(base_key)
        if isinstance(result, Result) and isinstance(baseline, Result):
            for phase in ("cold", "warm"):
                yield key, base_key, target, phase, getattr(result, phase), getattr(baseline, phase)


def figure_name(key: str) -> str:
    """A contender's label as a figure's name: "(c) Java client on our bookies (v3)"."""
    return " ".join(CONTENDERS[key].split()).replace(" -> ", " on ")


def figures(results: dict[str, Result | str]) -> list[Figure]:
    """Appends/s and reads/s of each targeted pair as results.Figure, the ratio held to the pair's target."""
    return [Figure(f"{figure_name(key)}, {what}, {phase}", value, "entries/s", baseline=figure_name(base_key),
                   baseline_value=base_value, target=f">= {target}")
            for key, base_key, target, phase, f, b in targeted(results)
            for what, value, base_value in (("appends", f.appends_s, b.appends_s),
                                            ("reads", f.read_entries_s, b.read_entries_s))]


if __name__ == "__main__":
    main()
