"""Many small ledgers read through Spark in few partitions: slices packed by bytes per bookie (issue 31)."""
from __future__ import annotations

import signal

from bookie.client import BookKeeper
from tests.helpers.spark_io import source

PW = b"pw"


def _small_ledgers(uri: str, count: int, entries: int = 3) -> dict[int, list[bytes]]:
    """``count`` closed ledgers (E=3, WQ=2) of ``entries`` 1 KiB entries each."""
    written = {}
    with BookKeeper(uri) as bk:
        for n in range(count):
            lh = bk.create_ledger(3, 2, 2, password=PW)
            payloads = [b"%04d-%d-" % (n, i) + b"x" * 1014 for i in range(entries)]
            lh.append_batch(payloads).result(30)
            lh.close()
            written[lh.ledger_id] = payloads
    return written


def _read_back(df) -> dict[int, list[bytes]]:
    got: dict[int, dict[int, bytes]] = {}
    for r in df.collect():
        entries = got.setdefault(r.ledger_id, {})
        assert r.entry_id not in entries, f"entry {r.ledger_id}:{r.entry_id} read twice"
        entries[r.entry_id] = bytes(r.payload)
    return {lid: [entries.get(e) for e in range(max(entries) + 1)] for lid, entries in got.items()}


def test_200_small_ledgers_are_read_exactly_once_in_few_partitions(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    written = _small_ledgers(uri, 200)
    ledgers = ",".join(str(lid) for lid in written)
    df = source(spark, uri, ledgers=ledgers, password="pw")
    # 600 slices (200 ledgers x 3 members, one entry each) on 4 bookies: one partition per bookie.
    assert df.rdd.getNumPartitions() <= 4
    assert _read_back(df) == written
    # Without packing (every slice costs more than a partition holds): a partition per slice, as before.
    assert source(spark, uri, ledgers=ledgers, password="pw", maxBytesPerPartition="1").rdd.getNumPartitions() == 600


def test_packed_slices_of_a_dead_bookie_are_read_from_replicas(spark, cluster):
    c = cluster(3)
    written = _small_ledgers(c.metadata_service_uri, 60)
    c.kill_bookie(1, signal.SIGKILL)
    df = source(spark, c.metadata_service_uri, ledgers=",".join(str(lid) for lid in written), password="pw")
    assert df.rdd.getNumPartitions() == 3  # 180 slices, one partition per bookie
    assert _read_back(df) == written
