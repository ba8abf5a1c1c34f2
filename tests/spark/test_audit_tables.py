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
