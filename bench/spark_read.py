"""Spark read benchmark: spark.read.format("bookkeeper") of a log, 1 KiB payloads, next to (same run)
a Python data source yielding the same bytes from memory (the API's ceiling), Parquet on local disk, and the
same read from a Spark Connect session (a server of its own, local[2], the same settings; the runs take turns).
Targets: bookkeeper >= 0.7 of the in-memory ceiling; over Spark Connect >= 0.8 of the classic session (the
rows never leave the server either way: Connect adds the plan's round trips only).

    python bench/spark_read.py [--rows 200000] [--runs 3]
"""
from __future__ import annotations

import os

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

from results import Figure, record
from spark_common import (PAYLOAD, PARTITIONS, best_of_each, cluster_and_spark, connect_session, line, on_connect,
                          parse_args, payload_frame)


class MemoryReader(DataSourceReader):
    """Yields ``rows`` 1 KiB payloads as Arrow batches made in memory, with the columns a read of a log
    has (ledger_id, entry_id, payload, log, segment): what the API can carry at best."""

    def __init__(self, rows: int, schema):
        self.rows = rows

    def partitions(self):
        per = self.rows // (PARTITIONS * 3)
        return [InputPartition((i * per, per)) for i in range(PARTITIONS * 3)]

    def read(self, partition):
        import numpy as np
        start, count = partition.value
        blob = b"x" * PAYLOAD
        for s in range(0, count, 8192):
            n = min(8192, count - s)
            offsets = pa.py_buffer(np.arange(0, (n + 1) * PAYLOAD, PAYLOAD, dtype=np.int32))
            payload = pa.Array.from_buffers(pa.binary(), n, [None, offsets, pa.py_buffer(blob * n)])
            ids = pa.array(np.arange(start + s, start + s + n, dtype=np.int64))
            yield pa.RecordBatch.from_arrays([pa.array(np.zeros(n, dtype=np.int64)), ids, payload,
                                              pa.repeat(pa.scalar("bench", pa.string()), n),
                                              pa.array(np.zeros(n, dtype=np.int32))],
                                             names=["ledger_id", "entry_id", "payload", "log", "segment"])


class MemorySource(DataSource):
    @classmethod
    def name(cls):
        return "memory_ceiling"

    def schema(self):
        return "ledger_id long, entry_id long, payload binary, log string, segment int"

    def reader(self, schema):
        return MemoryReader(int(self.options["rows"]), schema)


def main() -> None:
    args = parse_args(__doc__)
    with cluster_and_spark() as (cluster, spark, base), connect_session(base) as remote:
        uri = cluster.metadata_service_uri
        data = payload_frame(spark, args.rows)
        data.write.format("bookkeeper").mode("append").option("metadataServiceUri", uri).option("log", "bench").save()
        parquet = os.path.join(base, "bench.parquet")
        data.write.mode("overwrite").parquet(parquet)
        spark.dataSource.register(MemorySource)

        def noop(df):
            return lambda: df.write.format("noop").mode("overwrite").save()

        bk = spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", "bench").load()
        memory = spark.read.format("memory_ceiling").option("rows", str(args.rows)).load()
        bk_connect = on_connect(lambda: remote.read.format("bookkeeper").option("metadataServiceUri", uri)
                                .option("log", "bench").load())()
        best = best_of_each(args.runs, {"bk": noop(bk), "memory": noop(memory),
                                        "parquet": noop(spark.read.parquet(parquet)),
                                        "connect": on_connect(noop(bk_connect))})
        t_bk, t_mem, t_pq, t_connect = best["bk"], best["memory"], best["parquet"], best["connect"]
    conditions = f"{args.rows:,} rows x 1 KiB, local[2], 3 bookies on this machine, best of {args.runs}"
    print(f"spark read bench ({conditions}):")
    print(line("Python data source from memory", t_mem, args.rows, "(the API's ceiling)"))
    print(line("Parquet on local disk", t_pq, args.rows))
    print(line("format(\"bookkeeper\") from bookies", t_bk, args.rows,
               f"({t_mem / t_bk:.2f} of the ceiling; target >= 0.7)"))
    print(line("the same over Spark Connect", t_connect, args.rows,
               f"({t_bk / t_connect:.2f} of the classic session; target >= 0.8)"))
    rate = args.rows / t_bk
    record("spark_read", [
        Figure("bookkeeper read, vs the ceiling", rate, "rows/s", baseline="Python data source from memory",
               baseline_value=args.rows / t_mem, target=">= 0.7"),
        Figure("bookkeeper read, vs Parquet", rate, "rows/s", baseline="Parquet on local disk",
               baseline_value=args.rows / t_pq),
        Figure("bookkeeper read, Connect vs classic", args.rows / t_connect, "rows/s",
               baseline="bookkeeper read, classic session", baseline_value=rate, target=">= 0.8"),
    ], notes=[conditions, "Spark Connect: a server of its own on this machine (local[2], the same settings), "
                          "the client on loopback"])


if __name__ == "__main__":
    main()
