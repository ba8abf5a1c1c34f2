"""Spark write benchmark: df.write.format("bookkeeper") of 1 KiB payloads, next to (same run) the
client's own pipelined append rate (append_batch, one process) and Parquet on local disk.
Target: bookkeeper >= 0.5 of the client's pipelined append rate.

    python bench/spark_write.py [--rows 200000] [--runs 3]
"""
from __future__ import annotations

import itertools
import os

from spark_common import parse_args, PAYLOAD, best_of_each, cluster_and_spark, line, payload_frame


def main() -> None:
    args = parse_args(__doc__)
    from bookie.client import BookKeeper
    from bookie.client import benchmark
    with cluster_and_spark() as (cluster, spark, base):
        uri = cluster.metadata_service_uri
        with BookKeeper(uri) as bk:
            client = benchmark.batch_write_throughput(bk, 4.0, PAYLOAD, 3, 2, 2, batch=4096, in_flight=4)
        data = payload_frame(spark, args.rows).cache()
        data.count()
        counter = itertools.count()

        def to_bookkeeper():
            (data.write.format("bookkeeper").mode("append").option("metadataServiceUri", uri)
             .option("log", f"bench-{next(counter)}").save())

        parquet = os.path.join(base, "bench.parquet")
        best = best_of_each(args.runs, {"bk": to_bookkeeper,
                                        "parquet": lambda: data.write.mode("overwrite").parquet(parquet)})
        t_bk, t_pq = best["bk"], best["parquet"]
    print(f"spark write bench ({args.rows:,} rows x 1 KiB, local[2], 3 bookies on this machine, E=3 WQ=2 AQ=2, best of {args.runs}):")
    print(f"  client append_batch (one process)   : {client.rate:10,.0f} rows/s  {client.mb_per_s:7.1f} MB/s")
    print(line("Parquet on local disk", t_pq, args.rows))
    print(line("format(\"bookkeeper\") to bookies", t_bk, args.rows,
               f"({args.rows / t_bk / client.rate:.2f} of the client's rate; target >= 0.5)"))


if __name__ == "__main__":
    main()
