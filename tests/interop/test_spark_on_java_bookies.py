"""``spark.read.format("bookkeeper")`` over ledgers on real BookKeeper bookies (Java), which offer only
BookKeeper's native protocol: the driver hands each partition its bookies' registrations and the
executors read over the native protocol; a streaming read tails a ledger the Java client is still
writing (issue 11 test 3).
"""
from __future__ import annotations

import pytest

from bookie.client import BookKeeper
from bookie.testing.realbk import SKIP_REASON, find_realbk, payload
from tests.helpers.java_tools import java_ledger, java_writer_stopped_mid_write
from tests.helpers.spark_io import source
from tests.helpers.stream_sink import Batches

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)

# A Java writer of this many entries is stopped mid-write: 1000 acknowledged are awaited, then SIGSTOP.
# Rate-limited to WRITER_ADDS_PER_S (5000/s), it needs 8 s for them: 40x the time of the first 1000.
N_WRITTEN, SIZE = 40000, 100


def test_spark_reads_a_java_written_ledger_from_java_bookies(spark, java_cluster):
    ledger = java_ledger(java_cluster, 600)  # E3 WQ2, 100-byte entries
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
    """A batch read with recover=false (the default) of a ledger the Java client is writing, stopped
    mid-write: exactly entries 0..LAC; the ledger is not fenced, so the writer, resumed, goes on to its
    end and closes the ledger itself."""
    uri = java_cluster.metadata_service_uri
    with java_writer_stopped_mid_write(java_cluster, bk, N_WRITTEN, SIZE) as stopped:
        rows = sorted(source(spark, uri, ledgers=str(stopped.ledger), recover="false").collect(),
                      key=lambda r: r.entry_id)
        lac = stopped.check_read_up_to_lac(bk, [r.entry_id for r in rows])
        assert [bytes(r.payload) for r in rows] == [payload(i, SIZE) for i in range(lac + 1)] and lac >= 1000
    rows = source(spark, uri, ledgers=str(stopped.ledger)).select("entry_id").collect()
    assert sorted(r.entry_id for r in rows) == list(range(N_WRITTEN))


def test_stream_tails_a_ledger_the_java_client_is_still_writing(spark, java_cluster, bk, tmp_path):
    """Issue 11 test 3: readStream over the ledger of a Java writer stopped mid-write gives exactly
    entries 0..LAC (payloads checked at the end); resumed, the writer finishes unfenced and closes it, and the stream then gives the
    rest: all entries exactly once."""
    uri = java_cluster.metadata_service_uri
    seen = Batches()
    query = None
    try:
        with java_writer_stopped_mid_write(java_cluster, bk, N_WRITTEN, SIZE) as stopped:
            ledger = stopped.ledger
            query = seen.collect(spark.readStream.format("bookkeeper").option("metadataServiceUri", uri)
                                 .option("ledgers", str(ledger)).load(), str(tmp_path / "checkpoint"))
            query.processAllAvailable()
            assert stopped.check_read_up_to_lac(bk, seen.entries(ledger)) >= 1000
        query.processAllAvailable()
    finally:
        if query is not None:
            query.stop()
    assert [(e, p) for _, e, p in seen.rows()] == [(i, payload(i, SIZE)) for i in range(N_WRITTEN)]
