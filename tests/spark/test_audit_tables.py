"""The tables of format("bookkeeper") that the audit jobs and notebooks read (issue 14)."""
from __future__ import annotations

import datetime as dt

from bookie.ledger_id import LedgerId
from bookie.meta.ledger_underreplication_manager import COPYING, LedgerUnderreplicationManager, ReplicationState
from bookie.meta.zk_metadata_store import ZKMetadataStore
from tests.helpers.spark_io import source


def test_underreplicated_table_shows_what_autorecovery_records(spark, shared_cluster):
    uri = shared_cluster.metadata_service_uri
    plain, scoped = LedgerId(0, 9_000_001), LedgerId(0xA0D17, 5)
    with ZKMetadataStore(uri) as store:
        manager = LedgerUnderreplicationManager(store, "worker-x")
        manager.mark_ledger_underreplicated(plain, ["127.0.0.1:1", "127.0.0.1:2"])
        manager.mark_ledger_underreplicated(scoped, ["127.0.0.1:3"])
        assert manager.get_ledger_to_rereplicate(timeout=30, skip=lambda ledger: ledger != plain) == plain
        manager.set_state(plain, ReplicationState(COPYING, "copying fragment 0..9", {"progress": 0.5}, "worker-x"))
        try:
            rows = {(r.scope_id, r.ledger_id): r for r in source(spark, uri, table="underreplicated").collect()}
        finally:
            manager.mark_ledger_replicated(plain)
            manager.mark_ledger_replicated(scoped)
    assert set(rows) == {tuple(plain), tuple(scoped)}
    copying, waiting = rows[tuple(plain)], rows[tuple(scoped)]
    assert (copying.missing_replicas, copying.state, copying.reason, copying.worker) == \
        (["127.0.0.1:1", "127.0.0.1:2"], "copying", "copying fragment 0..9", "worker-x")
    assert (waiting.missing_replicas, waiting.state, waiting.reason, waiting.worker, waiting.state_since) == \
        (["127.0.0.1:3"], "marked", "", None, None)
    now = dt.datetime.now(dt.timezone.utc)
    for row in rows.values():
        assert now - dt.timedelta(minutes=10) < row.marked_at.astimezone(dt.timezone.utc) <= now
    assert copying.state_since.astimezone(dt.timezone.utc) >= copying.marked_at.astimezone(dt.timezone.utc)


def test_the_audits_read_every_table_through_the_data_source_on_classic_and_connect(spark, spark_connect,
                                                                                   shared_cluster):
    """read_tables (what both audits read) gives each table's rows as format("bookkeeper") gives them read
    alone on a classic session, and the same rows on Spark Connect: no RDD, nothing but DataFrame reads (the
    per-bookie tables planned by the data source, one pass over the metadata each)."""
    from bookie.client import BookKeeper
    from bookie.testing.spark_connect import connect_mode
    from spark_bookkeeper.audit.common import read_tables
    uri = shared_cluster.metadata_service_uri
    with BookKeeper(uri) as bk:
        ids = set()
        for i in range(6):
            handle = bk.create_ledger(3, 2, 2, password=b"p", custom_metadata={"application": b"app-%d" % (i % 2)})
            handle.append_batch([b"x" * 100] * (3 + i)).result(60)
            if i % 3:  # some closed, some open
                handle.close()
            ids.add(handle.ledger_id)
    names = ("ledgers", "fragments", "bookie_ledgers", "entrylogs", "underreplicated")
    with connect_mode(False):  # the classic session's reads
        alone = {name: source(spark, uri, table=name).collect() for name in names}
        classic = {name: df.collect() for name, df in read_tables(spark, uri, names).items()}
    connect = {name: df.collect() for name, df in read_tables(spark_connect, uri, names).items()}

    def ours(rows, *columns):
        # Only this test's ledgers: others on the shared cluster may be deleted and collected meanwhile.
        return sorted(tuple(r[c] for c in columns) for r in rows if r.ledger_id in ids)

    columns = alone["ledgers"][0].asDict()
    stored = ("bookie_id", "ledger_id", "in_metadata", "expected_entries", "entries", "missing_entries",
              "short_fragments", "status")
    for session, together in (("classic", classic), ("connect", connect)):
        assert ours(together["ledgers"], *columns) == ours(alone["ledgers"], *columns), session
        assert len(ours(together["ledgers"], "ledger_id")) == 6, session
        assert ours(together["fragments"], "ledger_id", "fragment", "first_entry_id", "last_entry_id", "ensemble",
                    "state") == ours(alone["fragments"], "ledger_id", "fragment", "first_entry_id", "last_entry_id",
                                     "ensemble", "state"), session
        assert ours(together["bookie_ledgers"], *stored) == ours(alone["bookie_ledgers"], *stored), session
        assert len(ours(together["bookie_ledgers"], "bookie_id")) == 6 * 3, session  # E=3: on three bookies
        assert sorted({(r.bookie_id, r.status) for r in together["entrylogs"]}) == \
            sorted({(r.bookie_id, r.status) for r in alone["entrylogs"]}), session
        assert together["underreplicated"] == alone["underreplicated"], session


def test_bookie_ledgers_rows_are_the_same_listed_a_chunk_at_a_time(shared_cluster, monkeypatch):
    """An executor lists a bookie's ledgers LIST_CHUNK at a time (a bookie named in 100,000 ledgers is not
    held as 100,000 objects): chunks of two give the rows one chunk gives, the ledgers the metadata names
    first, then those whose bytes are here without it (a deleted ledger's)."""
    from bookie.client import BookKeeper
    from spark_bookkeeper import bookie_tables
    from spark_bookkeeper.options import ReadOptions
    uri = shared_cluster.metadata_service_uri
    with BookKeeper(uri) as bk:
        ids = []
        for i in range(7):
            handle = bk.create_ledger(3, 2, 2, password=b"p")
            handle.append_batch([b"y" * 100] * (2 + i)).result(60)
            handle.close()
            ids.append(handle.ledger_id)
        bk.delete_ledger(ids[-1])  # its bytes stay until the bookies' GC: an unnamed ledger

    def rows() -> list[tuple]:
        opts = ReadOptions.parse({"metadataServiceUri": uri, "table": "bookie_ledgers"})
        out = [row for partition in bookie_tables.plan(opts)
               for row in bookie_tables.read_partition("bookie_ledgers", partition) if row[2] in ids]
        return [row[:8] + row[12:] for row in out]  # GC's byte counts and passes move on their own

    whole = rows()
    monkeypatch.setattr(bookie_tables, "LIST_CHUNK", 2)
    assert rows() == whole
    assert {row[2] for row in whole if row[3]} == set(ids[:-1])  # in the metadata: every live one
