"""``spark.read.format("bookkeeper")`` over ledgers on real BookKeeper bookies (Java), which offer only
BookKeeper's native protocol: the driver hands each partition its bookies' registrations and the
executors read over the native protocol (issue 11 test 3, batch part).
"""
from __future__ import annotations

import pytest

from bookie.testing.realbk import SKIP_REASON, RealBookKeeper, find_realbk, payload
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
