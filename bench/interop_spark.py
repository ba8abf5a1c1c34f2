"""Spark read from real BookKeeper bookies (issue 11 benchmark): ``spark.read.format("bookkeeper")`` of
a ledger BookKeeper's Java client wrote on three Java bookies (executors over BookKeeper's native
protocol), next to, in the same run, the in-memory ceiling of bench/spark_read.py (a Python data source
yielding the same shape of rows from memory). 1 KiB entries, E=3 WQ=3 AQ=2.
Target: bookkeeper >= 0.7 of the ceiling.

    python bench/interop_spark.py [--rows 200000] [--runs 3]

Needs a real BookKeeper (``$REALBK_HOME`` or ../shared/realbk); without one it says how to get one
and exits 0.
"""
from __future__ import annotations

import os
import shutil
import tempfile

import spark_read
from interop import ACK_QUORUM, BENCH_BOOKIE_JAVA_OPTS, ENSEMBLE, WRITE_QUORUM, bookkeeper_version
from results import Figure, record, record_skipped
from spark_common import PAYLOAD, best_of_each, line, parse_args
from pyspark import cloudpickle
from spark_read import MemorySource

from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk
from bookie.testing.zookeeper_server import ZooKeeperServer
from spark_bookkeeper.local_session import local_spark_session

TARGET = 0.7
# The executors' Python has no bench/ on its path: ship the ceiling's reader by value, as it is when
# spark_read.py runs as __main__.
cloudpickle.register_pickle_by_value(spark_read)


def main() -> None:
    args = parse_args(__doc__)
    home = find_realbk()
    if home is None:
        print(f"spark interop bench skipped: {SKIP_REASON}")
        record_skipped("interop_spark", SKIP_REASON)
        return
    base = tempfile.mkdtemp(prefix="bk-bench-interop-spark-", dir=os.environ.get("BENCH_DIR"))
    zookeeper = ZooKeeperServer(os.path.join(base, "zookeeper")).start()
    try:
        with RealBookKeeper(zookeeper.connect_string, os.path.join(base, "realbk"), 3,
                            java_opts=BENCH_BOOKIE_JAVA_OPTS) as java:
            uri = java.metadata_service_uri
            ledger = java.client("write", str(args.rows), "--ensemble", str(ENSEMBLE), "--write-quorum",
                                 str(WRITE_QUORUM), "--ack-quorum", str(ACK_QUORUM),
                                 "--entry-size", str(PAYLOAD)).stdout.split()[-1]
            spark = local_spark_session("bench-interop-spark")
            try:
                spark.dataSource.register(MemorySource)

                def noop(df):
                    return lambda: df.write.format("noop").mode("overwrite").save()

                bk = spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("ledgers", ledger).load()
                memory = spark.read.format("memory_ceiling").option("rows", str(args.rows)).load()
                best = best_of_each(args.runs, {"bk": noop(bk), "memory": noop(memory)})
                # What the Java bookies themselves spend serving one read: on a small machine it comes
                # out of the same cores Spark uses, and bounds the ratio.
                pids = [b.proc.pid for b in java.bookies]
                before = sum(cpu_seconds(pid) for pid in pids)
                noop(bk)()
                java_cpu = sum(cpu_seconds(pid) for pid in pids) - before
            finally:
                spark.stop()
    finally:
        zookeeper.stop()
        shutil.rmtree(base, ignore_errors=True)
    t_bk, t_mem = best["bk"], best["memory"]
    conditions = (f"BookKeeper {bookkeeper_version(home)}; {args.rows:,} rows x 1 KiB written by its Java client, "
                  f"E={ENSEMBLE} WQ={WRITE_QUORUM} AQ={ACK_QUORUM}; local[2], 3 Java bookies on this machine, "
                  f"best of {args.runs}")
    print(f"spark read from Java bookies ({conditions}):")
    print(line("Python data source from memory", t_mem, args.rows, "(the API's ceiling)"))
    print(line("bookkeeper from Java bookies", t_bk, args.rows,
               f"({t_mem / t_bk:.2f} of the ceiling; target >= {TARGET})"))
    print(f"  the Java bookies' own CPU per read: {java_cpu:.2f} s ({java_cpu / args.rows * 1e6:.1f} us per entry), "
          f"on the {os.cpu_count()} cores Spark reads with")
    record("interop_spark", [
        Figure("bookkeeper read from Java bookies", args.rows / t_bk, "rows/s",
               baseline="Python data source from memory", baseline_value=args.rows / t_mem, target=f">= {TARGET}"),
        Figure("Java bookies' CPU per read", java_cpu, "s"),  # no baseline: what bounds the ratio on few cores
    ], notes=[conditions])


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


if __name__ == "__main__":
    main()
