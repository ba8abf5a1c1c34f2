"""Spark write benchmark: df.write.format("bookkeeper") of 1 KiB payloads, next to (same run) the
client's own pipelined append rate (append_batch, one process, the sink's quorums), a Python sink that
discards what Spark hands it (Spark's own cost of turning rows into Arrow batches for a Python writer)
and Parquet on local disk. They take turns on the same bookies, so none is measured on bookies fresher
than the others' (a bookie's page cache grows with what it has written, and so does its cost per entry).
The same write from a Spark Connect session (a server of its own, local[2], the same settings) takes its
turn too. Targets: bookkeeper >= 0.7 of the client's pipelined append rate, on every run; over Spark Connect
>= 0.8 of the classic session (the rows are made and written on the server either way).

    python bench/spark_write.py [--rows 200000] [--runs 3]
"""
from __future__ import annotations

import itertools
import os

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, WriterCommitMessage

from results import Figure, record
from spark_common import (PAYLOAD, best_of_each, cluster_and_spark, connect_session, line, on_connect, parse_args,
                          payload_frame)


class DiscardWriter(DataSourceArrowWriter):
    """Reads every Arrow batch Spark sends and keeps nothing: the JVM's and the worker's share of a write."""

    def write(self, iterator):
        for _ in iterator:
            pass
        return WriterCommitMessage()


class DiscardSink(DataSource):
    @classmethod
    def name(cls):
        return "discard_ceiling"

    def writer(self, schema, overwrite):
        return DiscardWriter()


def main() -> None:
    args = parse_args(__doc__)
    from bookie.client import BookKeeper
    from bookie.client import benchmark
    with cluster_and_spark() as (cluster, spark, base), connect_session(base) as remote, \
            BookKeeper(cluster.metadata_service_uri) as bk:
        uri = cluster.metadata_service_uri
        client_runs: list = []

        def to_bookkeeper_by_client():  # about as long as the Spark write, E=3 WQ=2 AQ=2 as the sink's defaults
            client_runs.append(benchmark.batch_write_throughput(bk, 2.0, PAYLOAD, 3, 2, 2, batch=4096, in_flight=4))

        spark.dataSource.register(DiscardSink)
        data = payload_frame(spark, args.rows).cache()
        data.count()
        counter = itertools.count()

        def to_bookkeeper():
            (data.write.format("bookkeeper").mode("append").option("metadataServiceUri", uri)
             .option("log", f"bench-{next(counter)}").save())

        remote_data = on_connect(lambda: payload_frame(remote, args.rows).cache())()
        on_connect(remote_data.count)()

        def to_bookkeeper_over_connect():
            (remote_data.write.format("bookkeeper").mode("append").option("metadataServiceUri", uri)
             .option("log", f"bench-{next(counter)}").save())

        parquet = os.path.join(base, "bench.parquet")
        best = best_of_each(args.runs, {"bk": to_bookkeeper, "client": to_bookkeeper_by_client,
                                        "connect": on_connect(to_bookkeeper_over_connect),
                                        "discard": lambda: data.write.format("discard_ceiling").mode("append").save(),
                                        "parquet": lambda: data.write.mode("overwrite").parquet(parquet)})
        t_bk, t_pq, t_discard, t_connect = best["bk"], best["parquet"], best["discard"], best["connect"]
        client = max(client_runs[1:], key=lambda r: r.rate)  # the best timed turn (the first is the warm-up)
    conditions = f"{args.rows:,} rows x 1 KiB, local[2], 3 bookies on this machine, E=3 WQ=2 AQ=2, best of {args.runs}"
    print(f"spark write bench ({conditions}):")
    print(f"  client append_batch (one process)   : {client.rate:10,.0f} rows/s  {client.mb_per_s:7.1f} MB/s")
    discard = args.rows / t_discard
    # On two cores that both are short of, a sink that appends pays the hand-off and the appends: per row
    # about 1/discard + 1/client of the machine, so at best discard / (discard + client) of the client's rate.
    print(line("Python sink discarding (hand-off)", t_discard, args.rows,
               f"(a sink that also appends: ~{discard / (discard + client.rate):.2f} of the client's rate at best)"))
    print(line("Parquet on local disk", t_pq, args.rows))
    print(line("format(\"bookkeeper\") to bookies", t_bk, args.rows,
               f"({args.rows / t_bk / client.rate:.2f} of the client's rate; target >= 0.7)"))
    print(line("the same over Spark Connect", t_connect, args.rows,
               f"({t_bk / t_connect:.2f} of the classic session; target >= 0.8)"))
    rate = args.rows / t_bk
    record("spark_write", [
        Figure("bookkeeper write, vs the client", rate, "rows/s", baseline="client append_batch (one process)",
               baseline_value=client.rate, target=">= 0.7"),
        Figure("bookkeeper write, vs the hand-off", rate, "rows/s", baseline="Python sink discarding (hand-off)",
               baseline_value=discard),
        Figure("bookkeeper write, vs Parquet", rate, "rows/s", baseline="Parquet on local disk",
               baseline_value=args.rows / t_pq),
        Figure("bookkeeper write, Connect vs classic", args.rows / t_connect, "rows/s",
               baseline="bookkeeper write, classic session", baseline_value=rate, target=">= 0.8"),
    ], notes=[conditions, "Spark Connect: a server of its own on this machine (local[2], the same settings), "
                          "the client on loopback"])


if __name__ == "__main__":
    main()
