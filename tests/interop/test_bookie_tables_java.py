"""The per-bookie tables of format("bookkeeper") over real BookKeeper bookies (Java): their protocol has no
garbage-collection state, so ``entrylogs`` says so per bookie and ``bookie_ledgers`` gives what
GetListOfEntriesOfLedger tells (entries against the striping) with null bytes, status "partial"."""
from __future__ import annotations

import pytest

from bookie.client import BookKeeper
from bookie.testing.realbk import SKIP_REASON, find_realbk
from tests.helpers.java_tools import java_ledger, swap_first_members
from tests.helpers.spark_io import source

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)


def test_entrylogs_say_java_bookies_have_no_gc_state(spark, java_cluster):
    java_ledger(java_cluster, 10)
    rows = source(spark, java_cluster.metadata_service_uri, table="entrylogs").collect()
    assert sorted(r.bookie_id for r in rows) == sorted(b.bookie_id for b in java_cluster.bookies)
    for r in rows:
        assert (r.status, r.entry_log_id, r.total_bytes) == ("unsupported", None, None)
        assert "stock BookKeeper bookie" in r.error


def test_bookie_ledgers_count_entries_on_java_bookies_against_the_striping(spark, java_cluster):
    uri = java_cluster.metadata_service_uri
    whole, swapped = java_ledger(java_cluster, 30), java_ledger(java_cluster, 30)
    bk = BookKeeper(uri)
    try:
        a, b, c = swap_first_members(bk.store, swapped)  # a and b then each lack the other's stripe
    finally:
        bk.close()

    rows = {(r.bookie_id, r.ledger_id): r for r in source(spark, uri, table="bookie_ledgers").collect()}
    for bookie in (a, b, c):
        r = rows[(bookie, whole)]
        assert (r.in_metadata, r.expected_entries, r.entries, r.missing_entries, r.short_fragments) == \
            (True, 20, 20, 0, [])
        assert (r.bytes, r.deleted_bytes, r.deleted_at_pass, r.gc_passes) == (None, None, None, None)
        assert r.status == "partial" and "stock BookKeeper bookie" in r.error
    for bookie in (a, b):
        r = rows[(bookie, swapped)]
        assert (r.expected_entries, r.entries, r.missing_entries, r.short_fragments, r.status) == \
            (20, 20, 10, [0], "partial")
    assert (rows[(c, swapped)].missing_entries, rows[(c, swapped)].short_fragments) == (0, [])
