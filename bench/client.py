"""Client benchmark: three bookie processes and the client on this machine, 1 KiB entries, E=3 WQ=3 AQ=2.

Prints, each next to its baseline measured in the same run:
- ``append_async``, one entry per call, 10,000 in flight: entries/s vs ``append_batch`` (target >= 0.6);
- ``append_batch`` of 256, 16 in flight: entries/s vs the bare pipeline (target >= 0.9): a Python writer
  sending pre-framed 256-entry batches over gRPC to three servicers that only journal and fsync
  (bench/bare_pipeline.py); and, for information, the same writer sending 1,024-entry messages (the
  size the client's outboxes coalesce 256-entry batches into);
- for both, and the bare writer, the client process's CPU per acknowledged entry (µs);
- one append at a time: p50 latency (target <= 2 ms);
- reading the closed ledger: entries/s (target >= 200,000);
- ZooKeeper used as a log (kazoo async creates of 1 KiB sequential znodes);
- what metrics cost: the client and its bookies record metrics and serve /metrics (scraped every second);
  ``append_batch`` and ``append_async`` are measured again against three bookies with both off
  (enableStatistics=false) and a client without a stats logger (target >= 0.97 each).

    python bench/client.py [--seconds 5]
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from kazoo.client import KazooClient

import bare_pipeline
from bookie.client import BookKeeper
from bookie.client import benchmark
from bookie.stats.prometheus_metrics_provider import PrometheusMetricsProvider
from bookie.testing.local_bookkeeper import LocalBookKeeper

from metrics_scraper import METRICS_OFF, METRICS_ON, scraped
from results import Figure, record


def zookeeper_as_a_log(hosts: str, seconds: float, entry_size: int = 1024, window: int = 256) -> float:
    """1 KiB sequential znodes created asynchronously, ``window`` in flight: znodes/s."""
    zk = KazooClient(hosts=hosts)
    zk.start()
    zk.ensure_path("/bench-log")
    data = os.urandom(entry_size)
    pending, done = [], 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        pending.append(zk.create_async("/bench-log/entry-", data, sequence=True))
        if len(pending) >= window:
            pending.pop(0).get()
            done += 1
    for p in pending:
        p.get()
        done += 1
    elapsed = time.perf_counter() - start
    zk.stop()
    zk.close()
    return done / elapsed


def cpu_timed(fn, *args, **kwargs):
    """(result, CPU seconds of this process, all its threads, while ``fn`` ran)."""
    cpu = time.process_time()
    result = fn(*args, **kwargs)
    return result, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    args = parser.parse_args()
    base = tempfile.mkdtemp(prefix="bk-bench-client-", dir=os.environ.get("BENCH_DIR"))
    try:
        measured = run(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    record("client", measured, notes=["3 bookies + client on this machine, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on"])


def run(args, base: str) -> list[Figure]:
    provider = PrometheusMetricsProvider().start()  # the client's metrics, as an application would keep them
    with LocalBookKeeper(3, base_dir=os.path.join(base, "metered"), bookie_settings=METRICS_ON) as cluster, \
            LocalBookKeeper(3, base_dir=os.path.join(base, "unmetered"), bookie_settings=METRICS_OFF) as unmetered, \
            bare_pipeline.bare_servicers(base) as bare_addresses, \
            scraped([b.http_address for b in cluster.bookies]) as scrapes:
        with BookKeeper(cluster.metadata_service_uri, stats_logger=provider.get_stats_logger()) as bk, \
                BookKeeper(unmetered.metadata_service_uri) as bk_off:
            for client in (bk, bk_off):
                benchmark.write_throughput(client, 1.0, 1024, 3, 3, 2, 10000)  # warm-up: connections, caches
            # Without metrics before and after with them: the order does not favour either.
            write_off = benchmark.write_throughput(bk_off, args.seconds, 1024, 3, 3, 2, in_flight=10000)
            write, write_cpu = cpu_timed(benchmark.write_throughput, bk, args.seconds, 1024, 3, 3, 2, in_flight=10000)
            batched, batch_cpu = cpu_timed(benchmark.batch_write_throughput, bk, args.seconds, 1024, 3, 3, 2,
                                           batch=256, in_flight=16)
            batched_off = benchmark.batch_write_throughput(bk_off, args.seconds, 1024, 3, 3, 2, batch=256, in_flight=16)
            bare = bare_pipeline.run_writer(bare_addresses, args.seconds, 1024, batch=256, in_flight=16, ack_quorum=2)
            # The same bytes in flight as messages of 1,024 entries: the size the client's outboxes coalesce to.
            bare_large = bare_pipeline.run_writer(bare_addresses, args.seconds, 1024, batch=1024, in_flight=4,
                                                  ack_quorum=2)
            latency = benchmark.append_latency(bk, 2000, 1024, 3, 3, 2)
            entries, size, read_s = benchmark.read_throughput(bk, write.ledger_ids[0])
        zk_rate = zookeeper_as_a_log(cluster.zookeeper.connect_string, args.seconds)
    provider.stop()
    read_rate = entries / read_s
    write_us, batch_us = write_cpu / write.entries * 1e6, batch_cpu / batched.entries * 1e6
    print("client bench (3 bookies + client on this machine, 1 KiB entries, E=3 WQ=3 AQ=2, fsync on):")
    print(f"  ZooKeeper as a log (async creates)     : {zk_rate:10,.0f} entries/s")
    print(f"  append_async, 1 per call, 10,000 pending: {write.rate:9,.0f} entries/s  "
          f"{write.rate / batched.rate:.2f} of append_batch (target >= 0.6)  "
          f"CPU {write_us:.1f} us/entry  p50 {write.percentile(50):.1f} ms "
          f"p99 {write.percentile(99):.1f} ms  ({write.rate / zk_rate:.0f}x ZooKeeper)")
    print(f"  append_batch (256 x 16)                : {batched.rate:10,.0f} entries/s  "
          f"{batched.rate / bare.rate:.2f} of the bare pipeline (target >= 0.9)  "
          f"CPU {batch_us:.1f} us/entry  batch p50 {batched.percentile(50):.1f} ms "
          f"p99 {batched.percentile(99):.1f} ms")
    print(f"  bare pipeline (pre-framed 256 x 16, 3 journal-only servicers): {bare.rate:10,.0f} entries/s  "
          f"CPU {bare.cpu_us_per_entry:.1f} us/entry")
    print(f"  bare pipeline, 1,024-entry messages x 4: {bare_large.rate:9,.0f} entries/s  "
          f"(append_batch {batched.rate / bare_large.rate:.2f} of it)  CPU {bare_large.cpu_us_per_entry:.1f} us/entry")
    print(f"  one append at a time                   : p50 {latency.percentile(50):6.2f} ms  "
          f"p99 {latency.percentile(99):6.2f} ms  (target p50 <= 2 ms)")
    print(f"  read of the closed ledger              : {read_rate:10,.0f} entries/s  ({size / read_s / 1e6:.0f} MB/s; "
          f"target >= 200,000: {'met' if read_rate >= 200_000 else 'MISSED'})")
    print(f"  metrics and HTTP on (client and bookies, /metrics scraped {len(scrapes)} times) vs off: "
          f"append_batch {batched.rate / batched_off.rate:.3f}, append_async {write.rate / write_off.rate:.3f} "
          "(target >= 0.97)")
    return figures(write, batched, bare, bare_large, latency, read_rate, zk_rate, write_us, batch_us) + [
        Figure("append_batch with metrics and HTTP vs without", batched.rate, "entries/s",
               baseline="append_batch, enableStatistics=false, no HTTP, client without stats",
               baseline_value=batched_off.rate, target=">= 0.97"),
        Figure("append_async with metrics and HTTP vs without", write.rate, "entries/s",
               baseline="append_async, enableStatistics=false, no HTTP, client without stats",
               baseline_value=write_off.rate, target=">= 0.97")]


def figures(write: benchmark.WriteResult, batched: benchmark.WriteResult, bare: bare_pipeline.PipelineResult,
            bare_large: bare_pipeline.PipelineResult, latency: benchmark.WriteResult, read_rate: float,
            zk_rate: float, write_us: float, batch_us: float) -> list[Figure]:
    """The printed figures, each next to its baseline (``*_us``: the client's CPU per entry, µs)."""
    batch_name, bare_name = "append_batch (256 x 16)", "bare pipeline (pre-framed 256 x 16)"
    bare_cpu = f"{bare_name} CPU per entry"
    return [Figure("append_async vs append_batch", write.rate, "entries/s", baseline=batch_name,
                   baseline_value=batched.rate, target=">= 0.6"),
            Figure("append_batch vs bare pipeline", batched.rate, "entries/s", baseline=bare_name,
                   baseline_value=bare.rate, target=">= 0.9"),
            Figure("append_batch vs bare pipeline 1,024 x 4", batched.rate, "entries/s",
                   baseline="bare pipeline (pre-framed 1,024 x 4)", baseline_value=bare_large.rate),
            Figure("append_async vs ZooKeeper as a log", write.rate, "entries/s",
                   baseline="ZooKeeper as a log (async creates)", baseline_value=zk_rate),
            Figure("append_async CPU per entry", write_us, "us/entry", baseline=bare_cpu,
                   baseline_value=bare.cpu_us_per_entry),
            Figure("append_batch CPU per entry", batch_us, "us/entry", baseline=bare_cpu,
                   baseline_value=bare.cpu_us_per_entry),
            Figure("single append p50", latency.percentile(50), "ms", target="<= 2"),
            Figure("read closed ledger", read_rate, "entries/s", target=">= 200000")]


if __name__ == "__main__":
    main()
