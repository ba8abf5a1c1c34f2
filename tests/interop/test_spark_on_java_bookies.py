"""``spark.read.format("bookkeeper")`` over ledgers on real BookKeeper bookies (Java), which offer only
BookKeeper's native protocol: the driver hands each partition its bookies' registrations and the
executors read over the native protocol (issue 11 test 3, batch part).
"""
from __future__ import annotations

import signal

import pytest

from bookie.client import BookKeeper
from bookie.meta.ledger_metadata import LedgerState
from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
from bookie.util.processes import stop_process
from tests.helpers.java_tools import ledger_being_written
from tests.helpers.spark_io import source

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)


@pytest.fixture(scope="module")
def java_cluster(zookeeper, tmp_path_factory):
    cluster = RealBookKeeper(zookeeper.connect_string, str(tmp_path_factory.mktemp("realbk-spark")), num_bookies=3)
    with cluster:
        yield cluster


def test_spark_reads_a_java_written_ledger_from_java_bookies(spark, java_cluster):
    ledger = int(java_cluster.client("write", "600", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
                                     "--entry-size", "100").stdout.split()[-1])
    df = source(spark, java_cluster.metadata_service_uri, ledgers=str(ledger))
    assert df.rdd.getNumPartitions() == 3  # one fragment x three ensemble members
    rows = sorted(df.collect(), key=lambda r: r.entry_id)
    assert [r.entry_id for r in rows] == list(range(600)) and {r.ledger_id for r in rows} == {ledger}
    assert [bytes(r.payload) for r in rows] == [payload(i, 100) for i in range(600)]


def test_metadata_tables_list_java_ledgers_fragments_and_bookies(spark, java_cluster):
    ledger = int(java_cluster.client("write", "200", "--ensemble", "3", "--write-quorum", "2", "--ack-quorum", "2",
                                     "--entry-size", "100").stdout.split()[-1])
    java_bookies = sorted(b.bookie_id for b in java_cluster.bookies)
    uri = java_cluster.metadata_service_uri

    ledgers = {r.ledger_id: r for r in source(spark, uri, table="ledgers").collect()}
    row = ledgers[ledger]
    assert (row.state, row.ensemble_size, row.write_quorum, row.ack_quorum) == ("CLOSED", 3, 2, 2)
    assert (row.last_entry_id, row.length, row.digest, row.fragments) == (199, 200 * 100, "crc32c", 1)
    assert row.bookies == java_bookies

    fragments = [r for r in source(spark, uri, table="fragments").collect() if r.ledger_id == ledger]
    assert [(r.fragment, r.first_entry_id, r.last_entry_id, r.state) for r in fragments] == [(0, 0, 199, "CLOSED")]
    assert sorted(fragments[0].ensemble) == java_bookies

    # GetBookieInfo over BookKeeper's native protocol: each Java bookie answers with its disk figures.
    bookies = source(spark, uri, table="bookies").collect()
    assert sorted(r.bookie_id for r in bookies) == java_bookies
    assert all(r.state == "rw" and r.total_disk > 0 and 0 <= r.free_disk <= r.total_disk for r in bookies), bookies


@pytest.fixture
def bk(java_cluster):
    client = BookKeeper(java_cluster.metadata_service_uri, {"readTimeout": 5.0})
    yield client
    client.close()


def test_open_java_ledger_reads_up_to_its_lac_without_fencing_the_writer(spark, java_cluster, bk):
    """The streaming source tails logs (this project's znodes listing closed ledgers), not bare ledgers;
    what Spark can do with a ledger the Java client is still writing is a batch read up to its LAC, with
    recover=false (the default): the ledger is not fenced, so the Java writer goes on to its end."""
    n, size = 60000, 100
    known = set(bk.list_ledgers())
    writer = java_cluster.spawn("client", "write", java_cluster.metadata_service_uri, str(n), "--entry-size", str(size))
    try:
        ledger = ledger_being_written(bk, known, 1000)
        rows = sorted(source(spark, java_cluster.metadata_service_uri, ledgers=str(ledger), recover="false").collect(),
                      key=lambda r: r.entry_id)
        seen = len(rows)
        assert seen >= 1001 and [r.entry_id for r in rows] == list(range(seen))
        assert [bytes(r.payload) for r in rows] == [payload(i, size) for i in range(seen)]

        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, err.decode()[-3000:]  # every add acknowledged: never fenced
        assert int(out) == ledger
    finally:
        stop_process(writer, sig=signal.SIGKILL)
    assert bk.ledger_metadata(ledger).state == LedgerState.CLOSED  # closed by its writer, not by a recovery
    rows = source(spark, java_cluster.metadata_service_uri, ledgers=str(ledger)).select("entry_id").collect()
    assert sorted(r.entry_id for r in rows) == list(range(n))
