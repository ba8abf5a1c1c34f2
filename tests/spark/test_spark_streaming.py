"""Streaming: tail a log with availableNow and maxEntriesPerTrigger, write a stream into a log, and
replay a micro-batch after a simulated crash: the log gets it once."""
from __future__ import annotations

import os
import uuid

from chispa import assert_df_equality
from pyspark.sql import functions as F

import spark_bookkeeper
from bookie.client import BookKeeper
from spark_bookkeeper.log import read_log
from tests.helpers.spark_io import payloads, source, write


def _fill(spark, uri: str, log: str) -> None:
    for start in (0, 1000, 2000):
        write(payloads(spark, start, 1000, partitions=2), uri, log)


def _forget_last_commit(checkpoint: str) -> int:
    """As if Spark died after the sink committed batch N but before it recorded commits/N."""
    commits = os.path.join(checkpoint, "commits")
    last = max(int(n) for n in os.listdir(commits) if n.isdigit())
    os.remove(os.path.join(commits, str(last)))
    crc = os.path.join(commits, f".{last}.crc")
    if os.path.exists(crc):
        os.remove(crc)
    return last


def _tail(spark, uri: str, log: str, per_trigger: int = 1000):
    return (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", log)
            .option("maxEntriesPerTrigger", str(per_trigger)).load())


def test_stream_from_a_log_into_a_log_exactly_once(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    src, dst = f"src-{uuid.uuid4().hex[:6]}", f"dst-{uuid.uuid4().hex[:6]}"
    _fill(spark, uri, src)
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (_tail(spark, uri, src).select("payload").writeStream.format("bookkeeper")
                 .option("metadataServiceUri", uri).option("log", dst).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return query

    query = run()
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == 3 and all(p["numInputRows"] == 1000 for p in batches)
    expected = source(spark, uri, log=src).select("payload")
    assert_df_equality(source(spark, uri, log=dst).select("payload"), expected, ignore_row_order=True,
                       ignore_nullable=True)

    replayed = _forget_last_commit(checkpoint)
    again = run()  # Spark runs batch `replayed` again; the log has it already
    rerun = [p for p in again.recentProgress if p["numInputRows"] > 0]
    assert [p["batchId"] for p in rerun] == [replayed] and rerun[0]["numInputRows"] == 1000
    with BookKeeper(uri) as bk:
        log = read_log(bk.store, dst)
        assert list(log.commits.values()) == [replayed]
        assert sum(s.entries for s in log.segments) == 3000
        tagged = [lid for lid in bk.list_ledgers()
                  if bk.ledger_metadata(lid).custom().get("spark.log") == dst.encode()]
    assert sorted(tagged) == sorted(s.ledger for s in log.segments), "the replay left duplicate ledgers"
    assert source(spark, uri, log=dst).count() == 3000


def test_foreach_batch_writer_is_exactly_once_per_batch_id(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    src, dst = f"fsrc-{uuid.uuid4().hex[:6]}", f"fdst-{uuid.uuid4().hex[:6]}"
    _fill(spark, uri, src)
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (_tail(spark, uri, src, per_trigger=1500)
                 .select(F.upper(F.col("payload").cast("string")).alias("payload"))
                 .writeStream.foreachBatch(spark_bookkeeper.foreach_batch_writer(uri, dst))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()

    run()
    _forget_last_commit(checkpoint)
    run()
    got = source(spark, uri, log=dst)
    assert got.count() == 3000
    expected = source(spark, uri, log=src).select(F.upper(F.col("payload").cast("string")).cast("binary").alias("payload"))
    assert_df_equality(got.select("payload"), expected, ignore_row_order=True, ignore_nullable=True)


def test_stream_reader_needs_a_log_and_stream_writer_a_checkpoint(spark, shared_cluster):
    import pytest
    uri = shared_cluster.metadata_service_uri
    with pytest.raises(Exception, match="tails a log"):
        (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("ledgers", "1").load()
         .writeStream.format("noop").start().awaitTermination(5))
