"""Streaming: tail a log with availableNow and maxEntriesPerTrigger, write a stream into a log, and
replay a micro-batch after a simulated crash: the log gets it once. Tail bare ledgers, one of them open
and still written by this project's client: up to its LAC, never fencing the writer.

maxEntriesPerTrigger needs PySpark 4.2 (spark_bookkeeper/spark_versions.py); before, where it only makes
several micro-batches, a batch of Trigger.AvailableNow is a commit written before it ran."""
from __future__ import annotations

import os
import uuid

import pytest
from chispa import assert_df_equality
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

import spark_bookkeeper
from bookie.client import BookKeeper
from spark_bookkeeper.log import read_log
from spark_bookkeeper.spark_versions import ADMISSION_CONTROL, has
from tests.helpers.spark_io import payloads, source, write
from tests.helpers.stream_sink import Batches


def _fill_and_run(spark, uri: str, log: str, run) -> list[dict]:
    """Three commits of 1000 entries into ``log``, read by ``run`` (a Trigger.AvailableNow query, bounded by
    maxEntriesPerTrigger where PySpark has it; else run after each commit); the progress of the batches with rows."""
    progress = []
    for start in (0, 1000, 2000):
        write(payloads(spark, start, 1000, partitions=2), uri, log)
        if not has(ADMISSION_CONTROL):
            progress += run().recentProgress
    if has(ADMISSION_CONTROL):
        progress = run().recentProgress
    return [p for p in progress if p["numInputRows"] > 0]


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
    reader = spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", log)
    return (reader.option("maxEntriesPerTrigger", str(per_trigger)) if has(ADMISSION_CONTROL) else reader).load()


def test_stream_from_a_log_into_a_log_exactly_once(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    src, dst = f"src-{uuid.uuid4().hex[:6]}", f"dst-{uuid.uuid4().hex[:6]}"
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (_tail(spark, uri, src).select("payload").writeStream.format("bookkeeper")
                 .option("metadataServiceUri", uri).option("log", dst).option("checkpointLocation", checkpoint)
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        return query

    batches = _fill_and_run(spark, uri, src, run)
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
    checkpoint = str(tmp_path / "checkpoint")

    def run():
        query = (_tail(spark, uri, src, per_trigger=1500)
                 .select(F.upper(F.col("payload").cast("string")).alias("payload"))
                 .writeStream.foreachBatch(spark_bookkeeper.foreach_batch_writer(uri, dst))
                 .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
        query.awaitTermination()
        return query

    assert len(_fill_and_run(spark, uri, src, run)) == (2 if has(ADMISSION_CONTROL) else 3)
    _forget_last_commit(checkpoint)
    run()
    got = source(spark, uri, log=dst)
    assert got.count() == 3000
    expected = source(spark, uri, log=src).select(F.upper(F.col("payload").cast("string")).cast("binary").alias("payload"))
    assert_df_equality(got.select("payload"), expected, ignore_row_order=True, ignore_nullable=True)


def _tail_ledgers(spark, uri: str, ledgers: str, **options):
    reader = spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("ledgers", ledgers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _entry(i: int) -> bytes:
    return b"entry-%d" % i


def _append(lh, first: int, count: int) -> None:
    """Entries first.. in batches of 50: an entry carries the LAC as it was when its batch was sent, so
    the bookies' LAC trails by a batch. Raises if the ledger was fenced."""
    for lo in range(first, first + count, 50):
        lh.append_batch([_entry(i) for i in range(lo, min(lo + 50, first + count))]).result(timeout=60)


def _written(bk, count: int, close: bool = True):
    """A new ledger (E=3, WQ=2, AQ=2) holding entries 0..count-1, closed unless ``close`` is false."""
    lh = bk.create_ledger(3, 2, 2)
    _append(lh, 0, count)
    if close:
        lh.close()
    return lh


def test_stream_tails_an_open_ledger_as_it_grows_without_fencing_its_writer(spark, shared_cluster, tmp_path):
    """Rows 0..LAC of an open ledger, then each new one exactly once as the writer goes on; a batch
    replayed after a restart reads what it read before; closing the ledger brings its last entry."""
    uri = shared_cluster.metadata_service_uri
    checkpoint = str(tmp_path / "checkpoint")
    seen = Batches()
    with BookKeeper(uri) as bk:
        lh = _written(bk, 500, close=False)
        lid = lh.ledger.ledger_id

        def lac() -> int:  # the writer is idle and sends no explicit LAC: it stays put until the next append
            return bk.open_ledger(lid, recovery=False).last_add_confirmed

        def start():
            bounded = {"maxEntriesPerTrigger": "300"} if has(ADMISSION_CONTROL) else {}
            return seen.collect(_tail_ledgers(spark, uri, str(lid), **bounded), checkpoint)

        query = start()
        try:
            query.processAllAvailable()
            assert seen.entries(lid) == list(range(lac() + 1)) and lac() >= 449
            _append(lh, 500, 400)
            query.processAllAvailable()
            assert seen.entries(lid) == list(range(lac() + 1))
            query.stop()

            replayed = _forget_last_commit(checkpoint)
            _append(lh, 900, 100)  # while the query is down: the replayed batch must not take them in
            query = start()
            query.processAllAvailable()
            assert len(seen.runs[replayed]) == 2 and seen.runs[replayed][1] == seen.runs[replayed][0]
            assert seen.entries(lid) == list(range(lac() + 1))

            lh.close()  # never fenced: every append and the close succeeded
            md = bk.ledger_metadata(lid)
            assert md.is_closed and md.last_entry_id == 999
            query.processAllAvailable()
        finally:
            query.stop()
    assert [(e, p) for _, e, p in seen.rows()] == [(i, _entry(i)) for i in range(1000)]
    if has(ADMISSION_CONTROL):
        assert all(len(runs[0]) <= 300 for runs in seen.runs.values())


def test_available_now_reads_what_the_ledgers_held_at_the_start_in_shares(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    seen = Batches()
    with BookKeeper(uri) as bk:
        closed, open_ = _written(bk, 250), _written(bk, 400, close=False)
        a, b = closed.ledger.ledger_id, open_.ledger.ledger_id
        lac = bk.open_ledger(b, recovery=False).last_add_confirmed
        shared = {"maxEntriesPerTrigger": "200"} if has(ADMISSION_CONTROL) else {}  # else one batch of all
        query = seen.collect(_tail_ledgers(spark, uri, f"{a},{b}", **shared), str(tmp_path / "checkpoint"),
                             available_now=True)
        query.awaitTermination()
        open_.close()
    assert seen.entries(a) == list(range(250)) and seen.entries(b) == list(range(lac + 1))
    if has(ADMISSION_CONTROL):
        first = seen.runs[min(seen.runs)][0]
        assert sum(1 for lid, _, _ in first if lid == a) == sum(1 for lid, _, _ in first if lid == b) == 100
        assert all(len(runs[0]) <= 200 for runs in seen.runs.values())
    else:  # one batch of what the ledgers held at the start
        assert len(seen.runs) == 1


def test_a_ledger_deleted_while_tailed_stops_the_stream_naming_it(spark, shared_cluster, tmp_path):
    uri = shared_cluster.metadata_service_uri
    seen = Batches()
    with BookKeeper(uri) as bk:
        lid = _written(bk, 100).ledger.ledger_id
        query = seen.collect(_tail_ledgers(spark, uri, str(lid)), str(tmp_path / "checkpoint"))
        try:
            query.processAllAvailable()
            assert seen.entries(lid) == list(range(100))
            bk.delete_ledger(lid)
            with pytest.raises(StreamingQueryException,
                               match=f"ledger {lid} was deleted while this stream tailed it; entries from 100 on"):
                query.processAllAvailable()
        finally:
            query.stop()


def test_stream_option_errors(spark, shared_cluster):
    """recover=true would fence a live writer; an unknown ledger fails load() as a batch read does; a
    scope cannot be tailed."""
    uri = shared_cluster.metadata_service_uri
    with BookKeeper(uri) as bk:
        lh = _written(bk, 1, close=False)
        try:
            with pytest.raises(Exception, match="a stream must not fence a live writer"):
                (_tail_ledgers(spark, uri, str(lh.ledger.ledger_id), recover="true").writeStream.format("noop")
                 .start().awaitTermination(60))
            lh.append(b"y")  # not fenced
        finally:
            lh.close()
        missing = max(lid.ledger_id for lid in bk.list_ledgers()) + 1000
    with pytest.raises(Exception, match=f"ledger {missing} does not exist") as batch:
        source(spark, uri, ledgers=str(missing))
    with pytest.raises(Exception, match=f"ledger {missing} does not exist") as stream:
        _tail_ledgers(spark, uri, str(missing))
    assert type(stream.value) is type(batch.value)
    with pytest.raises(Exception, match="tails a log or ledgers"):
        (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("scope", "0").load()
         .writeStream.format("noop").start().awaitTermination(60))
