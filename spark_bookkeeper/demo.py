"""``make demo``: a local cluster, a DataFrame written to a log through the sink, read back, inspected.

Starts a real ZooKeeper and 3 bookie processes on loopback (data in a temporary directory), writes
100,000 rows with ``df.write.format("bookkeeper")``, reads them with ``spark.read.format("bookkeeper")``,
shows counts, a few rows and the metadata tables, and stops everything it started.
"""
from __future__ import annotations

import logging
import time


def main() -> None:
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)  # connection chatter while ZooKeeper starts
    from pyspark.sql import functions as F

    from bookie.testing.local_bookkeeper import LocalBookKeeper
    from spark_bookkeeper.local_session import local_spark_session

    print("starting ZooKeeper and 3 bookies on 127.0.0.1 ...", flush=True)
    with LocalBookKeeper(3) as cluster:
        uri = cluster.metadata_service_uri
        print(f"metadataServiceUri = {uri}")
        print("starting Spark (local[2]) ...", flush=True)
        spark = local_spark_session("spark-bookkeeper-demo")
        try:
            rows = 100_000
            df = spark.range(rows, numPartitions=4).select(
                F.concat(F.lit('{"event": '), F.col("id").cast("string"), F.lit('}')).alias("payload"))
            start = time.perf_counter()
            (df.write.format("bookkeeper").mode("append").option("metadataServiceUri", uri)
             .option("log", "events").option("ensembleSize", "3").option("writeQuorum", "2").option("ackQuorum", "2")
             .save())
            print(f"\nwrote {rows:,} rows to log 'events' in {time.perf_counter() - start:.1f} s "
                  "(each task: one ledger, every entry on 2 of 3 bookies, fsynced; one atomic commit)")
            start = time.perf_counter()
            events = (spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", "events").load())
            count = events.count()
            print(f"read back {count:,} rows in {time.perf_counter() - start:.1f} s, "
                  f"{events.rdd.getNumPartitions()} partitions (ledger x fragment x bookie slices, packed per bookie)")
            assert count == rows, f"expected {rows} rows, read {count}"
            events.orderBy("segment", "entry_id").withColumn("payload", F.col("payload").cast("string")).show(5)
            events.groupBy("segment", "ledger_id").count().orderBy("segment").show()
            print("metadata tables:")
            options = {"metadataServiceUri": uri}
            (spark.read.format("bookkeeper").options(**options, table="ledgers").load()
             .select("ledger_id", "state", "ensemble_size", "write_quorum", "ack_quorum", "last_entry_id", "length",
                     "bookies").show(truncate=False))
            spark.read.format("bookkeeper").options(**options, table="bookies").load().show(truncate=False)
        finally:
            spark.stop()
        print("stopping the cluster ...")
    print("done")


if __name__ == "__main__":
    main()
