"""Storage audit benchmark: ``run_storage_audit`` of a cluster holding 10,000 ledgers, next to reading the
``ledgers`` metadata table alone in the same run (same SparkSession, same cluster). Target: the audit takes at
most 3x the table read.

A real ZooKeeper and three bookie processes; the ledgers are written by the BookKeeper client (E=3 WQ=2 AQ=2, a
few small entries each in one batched append, several writer threads); a tenth of them are deleted and one
forced GC pass per bookie gives the entry logs' GC state (compaction off, so the garbage stays to be audited).
Then, taking turns after a warm-up round (bench/spark_common.py's best_of_each), the best of ``--runs``:
the ``ledgers`` table read to the end (``format("noop")``), and the whole storage audit (one pass over the
ledger metadata for ``ledgers`` and the plans of ``entrylogs`` and ``bookie_ledgers`` with every bookie's list of
entries of every ledger; its tables written as Parquet and its Markdown report with plots), each audit run into
a fresh output directory. The ``entrylogs`` and ``bookie_ledgers`` tables are also read alone through
format("bookkeeper"), to show what each costs on its own (each reads all the metadata again).

    python bench/audit.py [--ledgers 10000] [--runs 2] [--threads 16]
"""
from __future__ import annotations

import argparse
import concurrent.futures
import logging
import os
import shutil
import tempfile
import time

from bookie.client import BookKeeper
from bookie.proto import bookkeeper_pb2 as pb
from bookie.testing.local_bookkeeper import LocalBookKeeper

from results import Figure, record
from spark_common import best_of_each

ENTRIES = 4  # per ledger
ENTRY = 100  # bytes
# Entry logs of 1 MB (several per bookie), no timed GC pass, compaction off: the forced pass only notices
# the deleted ledgers; the index flushed every second so the pass sees every log.
SETTINGS = {"zkTimeout": 30000, "gcWaitTime": 3_600_000, "entryLogSizeLimit": 1 << 20, "flushInterval": 1000,
            "majorCompactionThreshold": 0.0, "minorCompactionThreshold": 0.0}


def write_ledgers(bk: BookKeeper, count: int, threads: int) -> list[int]:
    payloads = [os.urandom(ENTRY)] * ENTRIES

    def one(i: int) -> int:
        handle = bk.create_ledger(3, 2, 2, password=b"bench", custom_metadata={"application": f"app-{i % 7}".encode()})
        handle.append_batch(payloads).result(60)
        handle.close()
        return handle.ledger.ledger_id

    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        return list(pool.map(one, range(count)))


def forced_pass(bk: BookKeeper, bookie: str) -> None:
    client = bk.bookie_client(bookie)
    target = client.garbage_collection(pb.GarbageCollectionRequest.FORCE).forcedPass
    deadline = time.monotonic() + 600
    while client.garbage_collection().passes < target:
        if time.monotonic() > deadline:
            raise TimeoutError(f"GC pass {target} of {bookie} did not end within 600 s")
        time.sleep(0.05)


def figures(best: dict[str, float]) -> list[Figure]:
    """The audit, and the tables it reads besides ``ledgers`` each read alone, next to the ledgers table."""
    table = "ledgers table read alone"
    return [Figure("storage audit", best["audit"], "s", baseline=table, baseline_value=best["table"], target="<= 3"),
            *(Figure(f"{name} table read alone", best[name], "s", baseline=table, baseline_value=best["table"])
              for name in ("entrylogs", "bookie_ledgers"))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledgers", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--threads", type=int, default=16, help="writer threads of the setup")
    args = parser.parse_args()
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    from spark_bookkeeper.audit import run_storage_audit
    from spark_bookkeeper.notebook import spark_session
    base = tempfile.mkdtemp(prefix="bk-bench-audit-", dir=os.environ.get("BENCH_DIR"))
    spark = spark_session("bench-audit")  # before any gRPC thread of this process: the JVM is forked
    try:
        with LocalBookKeeper(3, base_dir=os.path.join(base, "cluster"), bookie_settings=SETTINGS) as cluster:
            uri = cluster.metadata_service_uri
            with BookKeeper(uri) as bk:
                start = time.perf_counter()
                ids = write_ledgers(bk, args.ledgers, args.threads)
                written = time.perf_counter() - start
                for ledger in ids[::10]:
                    bk.delete_ledger(ledger)
                for bookie in bk.writable_bookies():
                    forced_pass(bk, bookie)
            print(f"setup: {len(ids):,} ledgers ({ENTRIES} x {ENTRY} B, E=3 WQ=2 AQ=2 on 3 bookies) written in "
                  f"{written:.1f} s with {args.threads} threads; {len(ids[::10]):,} deleted, one GC pass per bookie")
            outputs = iter(range(1_000_000))
            results = []

            def table_read(table: str):
                return lambda: (spark.read.format("bookkeeper").option("metadataServiceUri", uri)
                                .option("table", table).load().write.format("noop").mode("overwrite").save())

            def audit() -> None:
                results.append(run_storage_audit(spark, uri, os.path.join(base, f"audit-{next(outputs)}")))

            # The audit's other two tables read alone too: where its time goes beyond the ledgers table.
            best = best_of_each(args.runs, {"table": table_read("ledgers"), "audit": audit,
                                            "entrylogs": table_read("entrylogs"),
                                            "bookie_ledgers": table_read("bookie_ledgers")})
            last = results[-1]
    finally:
        spark.stop()
        shutil.rmtree(base, ignore_errors=True)
    t_table, t_audit = best["table"], best["audit"]
    print(f"storage audit bench ({args.ledgers:,} ledgers, 3 bookies, local[2], best of {args.runs}):")
    print(f"  read table=ledgers alone           : {t_table:7.1f} s")
    print(f"  storage audit (tables + report)    : {t_audit:7.1f} s  ({t_audit / t_table:.1f}x the table read; "
          f"target <= 3x)")
    print(f"  (read alone through format(\"bookkeeper\"), each reading all the metadata again: entrylogs "
          f"{best['entrylogs']:.1f} s, bookie_ledgers {best['bookie_ledgers']:.1f} s; the audit reads it once)")
    print("  findings of the last run: " + "; ".join(f"{f.kind} {f.count}" for f in last.findings))
    record("audit", figures(best), notes=[f"{args.ledgers:,} ledgers, 3 bookies, local[2], best of {args.runs}",
                                          "storage audit: its tables and report written"])


if __name__ == "__main__":
    main()
