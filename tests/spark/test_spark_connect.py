"""The connector from a Spark Connect session (sc://): one Spark Connect server for the run
(bookie.testing.spark_connect, conftest's ``spark_connect``), which finds format("bookkeeper") by itself.
Batch write and read of a log, the metadata and per-bookie tables, a streaming read and a streaming write
(a replayed micro-batch adds nothing), and foreach_batch_writer, whose function runs on the server there:
its default writer id is still the query's id, and a replayed batch adds nothing. The audits on Connect are
tested with the classic ones (test_audits.py, test_audit_interrupts.py, test_audit_tables.py)."""
from __future__ import annotations

import os
import uuid

import pytest
from pyspark.errors import StreamingQueryException
from pyspark.sql import functions as F

import spark_bookkeeper
from bookie.client import BookKeeper
from spark_bookkeeper.log import read_log
from tests.helpers.spark_io import payloads, source, write

QUERY_TIMEOUT = 240  # seconds for an availableNow query on two busy cores


def forget_last_commit(checkpoint) -> int:
    """As if the driver died after the sink committed batch N but before Spark recorded commits/N: the
    restarted query runs batch N again."""
    commits = checkpoint / "commits"
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(last)).unlink()
    crc = commits / f".{last}.crc"
    if crc.exists():
        crc.unlink()
    return last


def run_to_end(query) -> None:
    assert query.awaitTermination(QUERY_TIMEOUT), "the availableNow query did not finish in time"
    assert query.exception() is None, query.exception()


def payloads_of(spark, uri: str, log: str) -> list[bytes]:
    return sorted(bytes(r.payload) for r in source(spark, uri, log=log).select("payload").collect())


def events(start: int, count: int) -> list[bytes]:
    return sorted(b"event-%d" % i for i in range(start, start + count))


def test_batch_write_and_read_of_a_log(spark_connect, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"connect-{uuid.uuid4().hex[:6]}"
    write(payloads(spark_connect, 0, 600), uri, log)
    write(payloads(spark_connect, 600, 200, partitions=2), uri, log)
    assert payloads_of(spark_connect, uri, log) == events(0, 800)
    got = source(spark_connect, uri, log=log)
    assert got.columns[:3] == ["ledger_id", "entry_id", "payload"] and got.where(F.col("log") != log).count() == 0
    with BookKeeper(uri) as bk:
        stored = read_log(bk.store, log)
    assert sum(s.entries for s in stored.segments) == 800 and len(stored.segments) == 5  # one ledger per task


def test_metadata_and_per_bookie_tables(spark_connect, shared_cluster):
    uri, log = shared_cluster.metadata_service_uri, f"tables-{uuid.uuid4().hex[:6]}"
    write(payloads(spark_connect, 0, 90, partitions=3), uri, log)
    with BookKeeper(uri) as bk:
        ours = {s.ledger.ledger_id: s.entries for s in read_log(bk.store, log).segments}
        registered = set(bk.writable_bookies())
    assert len(ours) == 3

    def table(name: str):
        return source(spark_connect, uri, table=name)

    ledgers = table("ledgers").where(F.col("ledger_id").isin(*ours)).collect()
    assert {r.ledger_id: r.last_entry_id + 1 for r in ledgers} == ours
    assert all(r.state == "CLOSED" and r.custom_metadata_text["spark.log"] == log for r in ledgers), ledgers
    fragments = table("fragments").where(F.col("ledger_id").isin(*ours)).collect()
    assert sorted(r.ledger_id for r in fragments) == sorted(ours) and all(len(r.ensemble) == 3 for r in fragments)
    assert {r.bookie_id for r in table("bookies").collect()} == registered
    entrylogs = table("entrylogs").collect()
    assert {r.bookie_id for r in entrylogs} == registered and {r.status for r in entrylogs} == {"ok"}
    held = table("bookie_ledgers").where(F.col("ledger_id").isin(*ours)).collect()
    assert all(r.status == "ok" and r.in_metadata and r.missing_entries == 0 for r in held), held
    per_ledger = {ledger: sum(r.entries for r in held if r.ledger_id == ledger) for ledger in ours}
    assert per_ledger == {ledger: 2 * entries for ledger, entries in ours.items()}  # write quorum 2


def test_stream_from_a_log_into_a_log_exactly_once(spark_connect, shared_cluster, tmp_path):
    """readStream.format("bookkeeper") into writeStream.format("bookkeeper") with a checkpoint: the last
    micro-batch replayed after a simulated crash adds nothing to the log."""
    uri = shared_cluster.metadata_service_uri
    src, dst = f"csrc-{uuid.uuid4().hex[:6]}", f"cdst-{uuid.uuid4().hex[:6]}"
    checkpoint = tmp_path / "checkpoint"

    def run():
        query = (spark_connect.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", src)
                 .load().select("payload")
                 .writeStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", dst)
                 .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
        run_to_end(query)
        return [p for p in query.recentProgress if p.numInputRows > 0]

    for start in (0, 400):  # a micro-batch per commit (read limits need PySpark 4.2; this runs on 4.0 too)
        write(payloads(spark_connect, start, 400, partitions=2), uri, src)
        assert [p.numInputRows for p in run()] == [400]
    assert payloads_of(spark_connect, uri, dst) == events(0, 800)
    replayed = forget_last_commit(checkpoint)
    assert [p.batchId for p in run()] == [replayed]
    with BookKeeper(uri) as bk:
        log = read_log(bk.store, dst)
        tagged = [lid for lid in bk.list_ledgers() if bk.ledger_metadata(lid).custom().get("spark.log") == dst.encode()]
    assert list(log.commits.values()) == [replayed] and sum(s.entries for s in log.segments) == 800
    assert sorted(tagged) == sorted(s.ledger for s in log.segments), "the replay left duplicate ledgers"
    assert payloads_of(spark_connect, uri, dst) == events(0, 800)


def foreach_batch_query(spark, uri: str, src: str, dst: str, checkpoint, **writer):
    return (spark.readStream.format("bookkeeper").option("metadataServiceUri", uri).option("log", src)
            .load()
            .select(F.upper(F.col("payload").cast("string")).alias("payload"))
            .writeStream.foreachBatch(spark_bookkeeper.foreach_batch_writer(uri, dst, **writer))
            .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())


def test_foreach_batch_writer_takes_the_query_id_and_a_replay_adds_nothing(spark_connect, spark_connect_server,
                                                                           shared_cluster, tmp_path):
    """The function runs on the server, on a session cloned for the batch: it finds its query's id through the
    session that started the query (which runs this one query), the id a classic session gives; restarted
    with its last commit forgotten, the query replays that batch and the log keeps each row once."""
    uri = shared_cluster.metadata_service_uri
    src, dst = f"fbsrc-{uuid.uuid4().hex[:6]}", f"fbdst-{uuid.uuid4().hex[:6]}"
    checkpoint = tmp_path / "checkpoint"
    session = spark_connect_server.session()  # runs this query alone, whatever else the run's session runs
    try:
        for start in (0, 300):  # batches 0 and 1, a commit of the source each
            write(payloads(spark_connect, start, 300, partitions=2), uri, src)
            query = foreach_batch_query(session, uri, src, dst, checkpoint)
            run_to_end(query)
        replayed = forget_last_commit(checkpoint)
        again = foreach_batch_query(session, uri, src, dst, checkpoint)
        run_to_end(again)
        rerun = [p.batchId for p in again.recentProgress if p.numInputRows > 0]
    finally:
        session.stop()
    assert again.id == query.id  # the checkpoint keeps the query's id
    assert rerun == [replayed] == [1]
    with BookKeeper(uri) as bk:
        log = read_log(bk.store, dst)
    assert log.commits == {f"foreachBatch:{dst}:{query.id}": replayed}
    assert sum(s.entries for s in log.segments) == 600
    expected = sorted(p.upper() for p in events(0, 600))
    assert payloads_of(spark_connect, uri, dst) == expected


def test_foreach_batch_writer_asks_for_a_writer_id_when_its_session_runs_other_queries(
        spark_connect, spark_connect_server, shared_cluster, tmp_path):
    """Two queries on the starting session: which one runs the function cannot be told, so it fails the
    batch asking for writer_id= rather than guess; with writer_id it writes."""
    uri = shared_cluster.metadata_service_uri
    src, dst = f"fbsrc-{uuid.uuid4().hex[:6]}", f"fbdst-{uuid.uuid4().hex[:6]}"
    write(payloads(spark_connect, 0, 50, partitions=1), uri, src)
    session = spark_connect_server.session()
    other = session.readStream.format("rate").option("rowsPerSecond", "1").load().writeStream.format("noop").start()
    try:
        failing = foreach_batch_query(session, uri, src, dst, tmp_path / "checkpoint-a")
        with pytest.raises(StreamingQueryException, match="runs 2 streaming queries.*pass writer_id="):
            failing.awaitTermination(QUERY_TIMEOUT)
        named = foreach_batch_query(session, uri, src, dst, tmp_path / "checkpoint-b", writer_id="pipeline-x")
        run_to_end(named)
    finally:
        other.stop()
        session.stop()
    with BookKeeper(uri) as bk:
        assert read_log(bk.store, dst).commits == {"pipeline-x": 0}
    assert payloads_of(spark_connect, uri, dst) == sorted(p.upper() for p in events(0, 50))


def test_the_server_runs_this_checkout_s_python(spark_connect):
    """What the tests above rely on: the server's Python workers import the connector as installed here."""
    import spark_bookkeeper as here
    where = spark_connect.range(1).select(F.udf(lambda _: __import__("spark_bookkeeper").__file__)("id")).first()[0]
    assert os.path.realpath(where) == os.path.realpath(here.__file__)
