"""The storage and replication audits (spark_bookkeeper.audit): their aggregations on small DataFrames shaped as
format("bookkeeper")'s tables, then whole runs against a cluster prepared with known facts, on a classic
session and on Spark Connect."""
from __future__ import annotations

import datetime as dt
import os

import pytest

from spark_bookkeeper.audit import replication, storage
from spark_bookkeeper.audit.history import Run
from tests.helpers import audit_frames as af

RUN = Run(af.T0 + dt.timedelta(hours=5))


def by(rows, *keys):
    return {tuple(r[k] for k in keys) if len(keys) > 1 else r[keys[0]]: r for r in rows}


# -- storage: pure aggregations --------------------------------------------------------------------------
def test_bookie_space_sums_live_garbage_and_what_each_compaction_reclaims(spark):
    logs = af.entrylogs(spark, [
        dict(bookie_id="b1", entry_log_id=1, total_bytes=1000, remaining_bytes=100, usage=0.1, status="ok",
             being_written=False, minor_compaction_candidate=True, major_compaction_candidate=True),
        dict(bookie_id="b1", entry_log_id=2, total_bytes=1000, remaining_bytes=600, usage=0.6, status="ok",
             being_written=False, minor_compaction_candidate=False, major_compaction_candidate=True),
        dict(bookie_id="b1", entry_log_id=3, total_bytes=500, remaining_bytes=500, usage=1.0, status="ok",
             being_written=True, minor_compaction_candidate=False, major_compaction_candidate=False),
        dict(bookie_id="b1", entry_log_id=4, total_bytes=300, status="skipped", error="bad header"),
        dict(bookie_id="b2", status="unavailable", error="UNAVAILABLE: connection refused"),
        dict(bookie_id="b3", status="unsupported", error="a stock BookKeeper bookie has no GC state"),
    ])
    rows = by(storage.bookie_space(logs).collect(), "bookie_id")
    b1 = rows["b1"]
    assert (b1.status, b1.error, b1.entry_logs, b1.total_bytes, b1.live_bytes, b1.garbage_bytes) == \
        ("ok", None, 3, 2500, 1200, 1300)
    assert (b1.minor_reclaimable_bytes, b1.major_reclaimable_bytes, b1.skipped_logs, b1.skipped_bytes) == \
        (900, 1300, 1, 300)
    assert (rows["b2"].status, rows["b2"].error, rows["b2"].live_bytes) == \
        ("unavailable", "UNAVAILABLE: connection refused", None)
    assert (rows["b3"].status, rows["b3"].total_bytes) == ("unsupported", None)
    assert [(r.bookie_id, r.entry_log_id, r.reason) for r in storage.skipped_logs(logs).collect()] == \
        [("b1", 4, "bad header")]


def test_copies_without_metadata_are_reclaimable_with_their_age_and_orphans_told_apart(spark):
    rows = af.bookie_ledgers(spark, [
        # ledger 1: deleted, GC saw it at pass 2 of 9 (stale past 3 passes); on b2 at pass 8 (not stale)
        dict(bookie_id="b1", ledger_id=1, in_metadata=False, bytes=0, deleted_bytes=700, deleted_at_pass=2,
             gc_passes=9, entries=0),
        dict(bookie_id="b2", ledger_id=1, in_metadata=False, bytes=0, deleted_bytes=700, deleted_at_pass=8,
             gc_passes=9, entries=0),
        # ledger 2: not in the metadata, GC has not judged it: an earlier run knew it (deleted)
        dict(bookie_id="b1", ledger_id=2, in_metadata=False, bytes=300, entries=3, gc_passes=9),
        # ledger 3: never known anywhere, GC has not judged it: deleted before any run saw it
        dict(bookie_id="b2", ledger_id=3, in_metadata=False, bytes=50, entries=1, gc_passes=9),
        # ledger 4: closed, its metadata names b3 which holds none of its 5 entries; b1 holds its share
        dict(bookie_id="b3", ledger_id=4, expected_entries=5, entries=0, missing_entries=5, short_fragments=[0],
             bytes=0, gc_passes=9),
        dict(bookie_id="b1", ledger_id=4, expected_entries=5, entries=5, missing_entries=0, short_fragments=[],
             bytes=500, gc_passes=9),
        # ledger 5: on an unavailable bookie: no verdict
        dict(bookie_id="b4", ledger_id=5, status="unavailable", error="down"),
        # ledger 6: GC removed it (no entry listed), its bytes are in the log being written (no pass recorded)
        dict(bookie_id="b3", ledger_id=6, in_metadata=False, bytes=400, deleted_bytes=0, entries=0, gc_passes=9),
        # ledger 7: created after the driver listed the metadata: the re-read finds it (confirm_orphans drops it)
        dict(bookie_id="b2", ledger_id=7, in_metadata=False, bytes=80, entries=2, gc_passes=9),
    ])
    then = RUN.at - dt.timedelta(hours=1)
    known = spark.createDataFrame([(0, 2, then)], "scope_id long, ledger_id long, last_in_metadata timestamp")
    candidates = storage.orphan_candidates(rows, known)
    assert [(r.kind, r.bookie_id, r.ledger_id) for r in candidates.collect()] == \
        [("holds_nothing", "b3", 4), ("no_metadata", "b2", 3), ("no_metadata", "b2", 7)]
    confirmed = candidates.where("ledger_id != 7")
    # Earlier runs found some copies without metadata already: when, and the bookie's GC passes then (b1 has
    # restarted since it first reported ledger 2: fewer passes now, the count since then is lost).
    sightings = spark.createDataFrame(
        [("b1", 0, 1, RUN.at - dt.timedelta(days=1), 1), ("b3", 0, 6, RUN.at - dt.timedelta(hours=2), 7),
         ("b1", 0, 2, then, 20)],
        "bookie_id string, scope_id long, ledger_id long, first_seen timestamp, first_gc_passes long")
    table = storage.deleted_not_reclaimed(rows, known, confirmed, sightings, RUN, 3)
    deleted = by(table.collect(), "bookie_id", "ledger_id")
    assert {k: (r.bytes, r.seen_by_gc, r.passes_since, r.stale, r.age_seconds) for k, r in deleted.items()} == {
        ("b1", 1): (700, True, 7, True, 86400), ("b2", 1): (700, True, 1, False, 0),
        ("b1", 2): (300, False, None, False, 3600), ("b3", 6): (400, True, 2, False, 7200),
        ("b2", 3): (50, False, 0, False, 0)}
    assert {k: r.last_in_metadata and r.last_in_metadata.astimezone(dt.timezone.utc)
            for k, r in deleted.items()} == {("b1", 1): None, ("b2", 1): None, ("b1", 2): then, ("b3", 6): None,
                                             ("b2", 3): None}
    assert deleted["b2", 3].without_metadata_since.astimezone(dt.timezone.utc) == RUN.at  # first seen this run
    summary = storage.reclaimable_summary(table, RUN, 3)
    assert summary.startswith("copies of ledgers the metadata lacks still on the bookies: 2.1 KiB reclaimable, not "
                              "data at risk"), summary
    assert "2 not yet collected by GC; the oldest without metadata since 2025-12-31 05:00:00 UTC (24.0 hours " \
           "before this run), up to 7 GC passes since; 1 stale" in summary, summary
    # A first run: no history, so every copy GC has not judged is read again in the metadata, none is an orphan.
    first = storage.deleted_not_reclaimed(rows, None, storage.orphan_candidates(rows, None), None, RUN, 3).collect()
    assert {r.ledger_id for r in first} == {1, 2, 3, 6, 7}
    assert {(r.ledger_id, r.passes_since, r.age_seconds) for r in first if not r.seen_by_gc} == \
        {(2, 0, 0), (3, 0, 0), (7, 0, 0)}


def test_space_by_owner_takes_the_first_owner_key_present(spark):
    meta = af.ledgers(spark, [
        dict(ledger_id=1, length=100, custom_metadata={"spark.log": b"events", "application": b"spark"}),
        dict(ledger_id=2, length=50, custom_metadata={"application": b"pulsar"}),
        dict(ledger_id=3, length=10, custom_metadata={"spark.log": b"events"}),
        dict(ledger_id=4, length=5),
    ])
    held = af.bookie_ledgers(spark, [
        dict(bookie_id=b, ledger_id=i, bytes=n) for i, n in ((1, 110), (2, 60), (3, 20), (4, 8)) for b in ("b1", "b2")
    ] + [dict(bookie_id="b1", ledger_id=9, in_metadata=False, bytes=33),
         dict(bookie_id="b3", ledger_id=1, status="unavailable")])
    rows = by(storage.space_by_owner(meta, held, ("spark.log", "application")).collect(), "owner")
    assert {o: (r.ledgers, r.logical_bytes, r.stored_bytes) for o, r in rows.items()} == {
        "events": (2, 110, 260), "pulsar": (1, 50, 120), storage.NO_OWNER: (1, 5, 16),
        storage.NOT_IN_METADATA: (0, 0, 33)}
    only_app = by(storage.space_by_owner(meta, held, ("application",)).collect(), "owner")
    assert {o: r.ledgers for o, r in only_app.items()} == {"spark": 1, "pulsar": 1, storage.NO_OWNER: 2,
                                                           storage.NOT_IN_METADATA: 0}


# -- replication: pure aggregations ----------------------------------------------------------------------
def test_fewest_copies_follows_the_striping():
    ensemble = ["a", "b", "c"]
    assert replication.fewest_copies(ensemble, 2, []) == 2
    assert replication.fewest_copies(ensemble, 2, ["b"]) == 1
    assert replication.fewest_copies(ensemble, 2, ["a", "c"]) == 0  # entry 2 is on c and a
    assert replication.fewest_copies(["a", "b", "c", "d", "e"], 2, ["a", "c"]) == 1  # a and c share no entry
    assert replication.fewest_copies(["a", "b"], 2, ["a", "b"]) == 0


def test_short_fragments_name_lacking_and_unreachable_bookies(spark):
    meta = af.ledgers(spark, [dict(ledger_id=1, fragments=2, last_entry_id=9, bookies=["a", "b", "c", "d"]),
                              dict(ledger_id=2, last_entry_id=4, bookies=["a", "b", "c"]),
                              dict(ledger_id=3, state="OPEN", last_entry_id=-1, bookies=["a", "b", "d"])])
    frags = af.fragments(spark, [
        dict(ledger_id=1, fragment=0, first_entry_id=0, last_entry_id=4, ensemble=["a", "b", "c"]),
        dict(ledger_id=1, fragment=1, first_entry_id=5, last_entry_id=9, ensemble=["a", "b", "d"]),
        dict(ledger_id=2, fragment=0, first_entry_id=0, last_entry_id=4, ensemble=["a", "b", "c"]),
        dict(ledger_id=3, fragment=0, first_entry_id=0, last_entry_id=-1, ensemble=["a", "b", "d"], state="OPEN")])
    held = af.bookie_ledgers(spark, [
        dict(bookie_id="a", ledger_id=1, short_fragments=[], entries=7),
        dict(bookie_id="b", ledger_id=1, short_fragments=[1], entries=2),
        dict(bookie_id="c", ledger_id=1, short_fragments=[], entries=3),
        dict(bookie_id="d", ledger_id=1, status="unavailable"),
        dict(bookie_id="a", ledger_id=2, short_fragments=[], entries=3),
        dict(bookie_id="b", ledger_id=2, short_fragments=[], entries=4),
        dict(bookie_id="c", ledger_id=2, short_fragments=[], entries=3),
        dict(bookie_id="d", ledger_id=3, status="unavailable")])
    marked = af.underreplicated(spark, [dict(ledger_id=1, missing_replicas=["d"], marked_at=af.T0)])
    checked = replication.checked_fragments(frags, meta, held, marked)
    # b and d are neighbours: an entry of fragment 1 may have no copy left, but d did not answer: not proven.
    expected = [(1, 1, ["b"], ["d"], 0, False, True)]
    for found in (replication.short_fragments(checked), replication.unverified_fragments(checked)):
        assert [(r.ledger_id, r.fragment, r.lacking, r.unreachable, r.min_copies, r.no_copy_left, r.under_replicated)
                for r in found.collect()] == expected
    aged = replication.underreplicated_aged(marked, RUN, 3600).collect()
    assert [(r.ledger_id, r.age_seconds, r.over_age) for r in aged] == [(1, 5 * 3600, True)]
    assert replication.underreplicated_aged(marked, RUN, 6 * 3600).first().over_age is False


def test_no_copy_left_only_as_bookies_that_answered_prove_it(spark):
    """Exit 3 for a fragment needs bookies that answered: every bookie of an entry's write set answered without
    its share. Bookies that did not answer, or that lack only some entries, make no such proof."""
    from spark_bookkeeper.audit.result import EXIT_AT_RISK, AuditResult
    two, three = ["a", "b"], ["a", "b", "c"]
    meta = af.ledgers(spark, [dict(ledger_id=i, ensemble_size=len(e), last_entry_id=4, bookies=e)
                              for i, e in ((5, two), (6, two), (7, two), (8, three))])
    frags = af.fragments(spark, [dict(ledger_id=i, first_entry_id=0, last_entry_id=4, ensemble=e)
                                 for i, e in ((5, two), (6, two), (7, two), (8, three))])
    held = af.bookie_ledgers(spark, [
        # 5: both bookies answered holding none of their 5 entries: no copy left
        dict(bookie_id="a", ledger_id=5, expected_entries=5, entries=0, missing_entries=5, short_fragments=[0]),
        dict(bookie_id="b", ledger_id=5, expected_entries=5, entries=0, missing_entries=5, short_fragments=[0]),
        # 6: each lacks 2 of its 5: which ones is not known, so no entry is proven without a copy
        dict(bookie_id="a", ledger_id=6, expected_entries=5, entries=3, missing_entries=2, short_fragments=[0]),
        dict(bookie_id="b", ledger_id=6, expected_entries=5, entries=3, missing_entries=2, short_fragments=[0]),
        # 7: neither answered (the 7.2 s list of entries of issue 35): unverified, not short
        dict(bookie_id="a", ledger_id=7, status="unavailable", error="DEADLINE_EXCEEDED"),
        dict(bookie_id="b", ledger_id=7, status="unavailable", error="DEADLINE_EXCEEDED"),
        # 8: c holds none of its 3 entries of 0..4, a did not answer: entries on c and a unknown, not lost
        dict(bookie_id="a", ledger_id=8, status="unavailable", error="DEADLINE_EXCEEDED"),
        dict(bookie_id="b", ledger_id=8, expected_entries=3, entries=3, missing_entries=0, short_fragments=[]),
        dict(bookie_id="c", ledger_id=8, expected_entries=3, entries=0, missing_entries=3, short_fragments=[0])])
    marked = af.underreplicated(spark, [dict(ledger_id=i, missing_replicas=["a"], marked_at=RUN.at)
                                        for i in (5, 6, 8)])

    def audit(bookie_ledgers) -> tuple[AuditResult, dict, dict]:
        """The findings of the fragments ``bookie_ledgers`` shows, and the short and unverified ones by ledger."""
        checked = replication.checked_fragments(frags, meta, bookie_ledgers, marked)
        short, unverified = replication.short_fragments(checked), replication.unverified_fragments(checked)
        return (replication_result(spark, meta, marked, checked),
                {r.ledger_id: (r.lacking, r.unreachable, r.min_copies, r.no_copy_left) for r in short.collect()},
                {r.ledger_id: (r.unreachable, r.min_copies) for r in unverified.collect()})

    everything, short, unverified = audit(held)
    assert short == {5: (two, [], 0, True), 6: (two, [], 0, False), 8: (["c"], ["a"], 0, False)}
    assert unverified == {7: (two, 0), 8: (["a"], 0)}
    assert everything.exit_code == EXIT_AT_RISK and everything.finding("short_fragments").at_risk
    assert "1 with an entry every bookie of its write set answered without" in \
        everything.finding("short_fragments").summary
    without_5, _, _ = audit(held.where("ledger_id != 5"))  # what is left proves no loss: a warning, exit 0
    assert (without_5.exit_code, without_5.finding("unverified_fragments").count) == (0, 2)
    assert not any(f.at_risk and f.count for f in without_5.findings), without_5.findings
    assert without_5.finding("unverified_fragments").summary.startswith(
        "fragments whose copies could not all be checked, in 2 ledgers (not answering: a, b): 2 with an entry no "
        "bookie that answered is known to hold")


def replication_result(spark, meta, marked, checked):
    """The replication findings of ``checked`` fragments (no open ledger, at most 10 marked ledgers allowed)."""
    from spark_bookkeeper.audit.result import AuditResult
    nothing = af.bookie_ledgers(spark, [])
    opened = replication.open_ledgers(meta, nothing, RUN)
    findings = replication.replication_findings(
        replication.underreplicated_aged(marked, RUN, 3600), replication.short_fragments(checked),
        replication.unverified_fragments(checked), replication.no_reachable_copy(checked),
        replication.single_bookie_ledgers(meta, nothing), opened, replication.silent_writers(opened, None, RUN),
        None, dict(max_underreplicated=10, max_underreplicated_age=3600, silent_after=3600))
    return AuditResult("replication", RUN, findings=findings)


def test_no_reachable_copy_when_lost_bookies_leave_an_entry_without_one(spark):
    """A bookie not registered (lost) is evidence: an entry whose write set is all lost, or lost and answered
    without its share, has no reachable copy, at risk when AutoRecovery has not marked the ledger. A registered
    bookie that does not answer (a timeout) makes no such proof."""
    from spark_bookkeeper.audit.result import EXIT_AT_RISK
    from spark_bookkeeper.bookie_tables import NOT_REGISTERED
    two, three = ["a", "b"], ["a", "b", "c"]
    ensembles = {11: two, 12: two, 13: two, 14: two, 15: three, 16: two}
    meta = af.ledgers(spark, [dict(ledger_id=i, ensemble_size=len(e), last_entry_id=4, bookies=e)
                              for i, e in ensembles.items()])
    frags = af.fragments(spark, [dict(ledger_id=i, first_entry_id=0, last_entry_id=4, ensemble=e)
                                 for i, e in ensembles.items()])
    lost = dict(status="unavailable", error=NOT_REGISTERED)
    slow = dict(status="unavailable", error="BKTimeoutException: list of entries timed out")
    holds_all = dict(expected_entries=5, entries=5, missing_entries=0, short_fragments=[])
    holds_none = dict(expected_entries=5, entries=0, missing_entries=5, short_fragments=[0])
    held = af.bookie_ledgers(spark, [dict(bookie_id=b, ledger_id=i, **row) for b, i, row in [
        ("a", 11, lost), ("b", 11, lost),  # 11: both lost, not marked: no reachable copy, at risk
        ("a", 12, lost), ("b", 12, holds_none),  # 12: one lost, the other answered without its share
        ("a", 13, lost), ("b", 13, slow),  # 13: b may hold its copies: unverified only
        ("a", 14, lost), ("b", 14, holds_all),  # 14: a copy of each entry left on b
        ("a", 15, lost), ("b", 15, lost), ("c", 15, dict(holds_all, expected_entries=3, entries=3)),  # c: 2, 0
        ("a", 16, lost), ("b", 16, lost)]])  # 16: as 11, but AutoRecovery has it marked
    marked = af.underreplicated(spark, [dict(ledger_id=16, missing_replicas=two, marked_at=RUN.at)])
    checked = replication.checked_fragments(frags, meta, held, marked)
    columns = ("lacking", "unreachable", "lost", "min_copies", "no_copy_left", "no_reachable_copy", "under_replicated")
    rows = {r.ledger_id: tuple(r[c] for c in columns) for r in checked.collect()}
    assert rows == {11: ([], [], two, 0, False, True, False), 12: (["b"], [], ["a"], 0, False, True, False),
                    13: ([], ["b"], ["a"], 0, False, False, False), 14: ([], [], ["a"], 1, False, False, False),
                    15: ([], [], two, 0, False, True, False), 16: ([], [], two, 0, False, True, True)}
    assert {r.ledger_id for r in replication.no_reachable_copy(checked).collect()} == {11, 12, 15, 16}
    assert {r.ledger_id for r in replication.unverified_fragments(checked).collect()} == set(rows)  # all lost a
    result = replication_result(spark, meta, marked, checked)
    assert result.exit_code == EXIT_AT_RISK
    finding = result.finding("no_reachable_copy")
    assert (finding.count, finding.at_risk) == (4, True)
    assert finding.summary == (
        "fragments with an entry no reachable bookie holds (every bookie of its write set not registered or "
        "answered without its share), in 4 ledgers (lost: a, b): 3 of them in ledgers AutoRecovery has not marked "
        "(nothing will repair them); marked ones are left to the under-replicated limits")
    assert not result.finding("unverified_fragments").at_risk
    assert "(not answering: b; not registered, lost: a, b)" in result.finding("unverified_fragments").summary
    # Left to the under-replicated limits once marked, and never for a bookie that is only slow.
    for kept in ("ledger_id in (13, 14, 16)", "ledger_id in (13, 14)"):
        rest = replication_result(spark, meta, marked, checked.where(kept))
        assert rest.exit_code == 0 and not rest.finding("no_reachable_copy").at_risk, rest.findings


def test_single_bookie_ledgers_by_metadata_and_by_holdings(spark):
    meta = af.ledgers(spark, [dict(ledger_id=1, ensemble_size=1, write_quorum=1, last_entry_id=3, bookies=["a"]),
                              dict(ledger_id=2, ensemble_size=2, last_entry_id=3, bookies=["a", "b"]),
                              dict(ledger_id=3, ensemble_size=2, last_entry_id=3, bookies=["a", "c"]),
                              dict(ledger_id=4, ensemble_size=2, last_entry_id=3, bookies=["a", "b"])])
    held = af.bookie_ledgers(spark, [
        dict(bookie_id="a", ledger_id=1, entries=4),
        dict(bookie_id="a", ledger_id=2, entries=4), dict(bookie_id="b", ledger_id=2, entries=0),
        dict(bookie_id="z", ledger_id=2, entries=4),  # a copy left where the metadata no longer points
        dict(bookie_id="a", ledger_id=3, entries=4), dict(bookie_id="c", ledger_id=3, status="unavailable"),
        dict(bookie_id="a", ledger_id=4, entries=4), dict(bookie_id="b", ledger_id=4, entries=4)])
    rows = replication.single_bookie_ledgers(meta, held).collect()
    assert [(r.ledger_id, r.bookie, r.basis) for r in rows] == [(1, "a", "metadata"), (2, "a", "holdings")]


def test_silent_writers_compare_progress_with_an_earlier_run(spark):
    meta = af.ledgers(spark, [dict(ledger_id=i, state="OPEN", last_entry_id=-1, bookies=["a", "b"]) for i in (1, 2, 3)])

    def progress(entries: dict[int, int], run: Run, down: set = frozenset()):
        held = af.bookie_ledgers(spark, [
            dict(bookie_id=b, ledger_id=i, entries=n // 2, status="unavailable" if b in down else "ok")
            for i, n in entries.items() for b in ("a", "b")])
        return replication.open_ledgers(meta, held, run)

    earlier = Run(af.T0 + dt.timedelta(hours=2))
    then = progress({1: 10, 2: 10, 3: 10}, earlier)
    now = progress({1: 10, 2: 12, 3: 10}, RUN)
    rows = replication.silent_writers(now, then, RUN).collect()
    assert [(r.ledger_id, r.stored_entries, r.silent_seconds) for r in rows] == [(1, 10, 3 * 3600), (3, 10, 3 * 3600)]
    assert replication.silent_writers(now, None, RUN).count() == 0  # a first run judges no writer
    # A bookie that stopped answering changes what is counted: no verdict rather than a wrong one.
    partial = progress({1: 10, 2: 10, 3: 10}, RUN, down={"b"})
    assert replication.silent_writers(partial, then, RUN).count() == 0
    assert {r.ledger_id: r.age_seconds for r in now.collect()} == {1: 5 * 3600, 2: 5 * 3600, 3: 5 * 3600}


# -- whole runs against a cluster with known facts -----------------------------------------------------------
def partitions(output, table: str) -> list[str]:
    return sorted(p.name for p in (output / table).iterdir() if p.name.startswith("date="))


@pytest.fixture(params=["classic", "connect"])
def audit_session(request):
    """The audits on a classic session and on Spark Connect (the same code: tables read through the data source,
    the run staged and published by the client's own file calls on Connect)."""
    return request.getfixturevalue("spark" if request.param == "classic" else "spark_connect")


def test_audits_name_exactly_the_planted_facts(audit_session, bk_cluster, tmp_path):
    from bookie.meta.zk_metadata_store import ZKMetadataStore
    from spark_bookkeeper.audit import EXIT_AT_RISK, run_replication_audit, run_storage_audit
    from spark_bookkeeper.audit.history import read_history
    from tests.helpers.audit_cluster import ORPHAN, SETTINGS, prepare

    spark = audit_session
    c, bk = bk_cluster(4, **SETTINGS)
    uri = c.metadata_service_uri
    stored, replicated = tmp_path / "storage", tmp_path / "replication"  # each audit its own output directory
    with ZKMetadataStore(uri) as store:
        facts = prepare(c, bk, store)
    first = Run.now()
    second = Run(first.at + dt.timedelta(days=1))

    # Storage: the bookie named without its entries (at risk); the deleted ledgers' bytes, stale (GC saw them
    # deleted at the first of three forced passes: 2 passes ago, more than the 1 allowed), and the entries planted
    # without metadata: reclaimable, first seen this run.
    result = run_storage_audit(spark, uri, str(stored), run=first, stale_gc_passes=1)
    orphans = spark.read.parquet(result.tables["orphans"]).collect()
    assert {(r.kind, r.bookie_id, r.ledger_id) for r in orphans} == {("holds_nothing", facts.stranger, facts.moved)}
    deleted = spark.read.parquet(result.tables["deleted_not_reclaimed"]).collect()
    assert {r.ledger_id for r in deleted} == set(facts.deleted) | {ORPHAN.ledger_id}
    assert all(r.bytes > 0 and r.age_seconds == 0 for r in deleted)
    assert {r.ledger_id for r in deleted if r.seen_by_gc} == {r.ledger_id for r in deleted if r.stale} == \
        set(facts.deleted)
    (planted,) = [r for r in deleted if r.ledger_id == ORPHAN.ledger_id]
    assert (planted.bookie_id, planted.passes_since, planted.last_in_metadata) == (facts.orphan_bookie, 0, None)
    space = by(spark.read.parquet(result.tables["bookie_space"]).collect(), "bookie_id")
    assert space[facts.killed].status == "unavailable" and space[facts.killed].live_bytes is None
    assert all(r.status == "ok" and r.live_bytes > 0 for b, r in space.items() if b != facts.killed)
    assert sum(r.garbage_bytes for b, r in space.items() if b != facts.killed) > 0
    owners = by(spark.read.parquet(result.tables["space_by_owner"]).collect(), "owner")
    assert owners["audit-test"].ledgers == len(facts.healthy) + 1 and owners["audit-test"].stored_bytes > 0
    assert (result.at_risk, result.exit_code, result.finding("orphans").count) == (True, EXIT_AT_RISK, 1)
    assert result.finding("deleted_not_reclaimed").count == len(deleted)
    assert not result.finding("deleted_not_reclaimed").at_risk
    assert result.finding("skipped_logs").count == 0
    report = open(result.report).read()
    assert "DATA AT RISK" in report and str(facts.moved) in report and str(ORPHAN.ledger_id) in report
    assert {"disk_per_bookie.png", "space_by_owner.png"} <= set(os.listdir(os.path.dirname(result.report)))

    # Replication: the killed bookie's marked ledgers (their fragments unverified: it is lost, not registered, and
    # a copy of each entry is left on the others), the moved ledger's short fragment (unmarked: at risk).
    result = run_replication_audit(spark, uri, str(replicated), run=first)
    aged = spark.read.parquet(result.tables["underreplicated_aged"]).collect()
    assert {r.ledger_id: r.missing_replicas for r in aged} == facts.marked
    short = spark.read.parquet(result.tables["short_fragments"]).collect()
    assert [(r.ledger_id, r.fragment, r.lacking, r.unreachable, r.min_copies, r.no_copy_left, r.under_replicated)
            for r in short] == [(facts.moved, 0, [facts.stranger], [], 1, False, False)]
    unverified = spark.read.parquet(result.tables["unverified_fragments"]).collect()
    assert {(r.ledger_id, r.fragment, tuple(r.lacking), tuple(r.unreachable), tuple(r.lost), r.min_copies,
             r.no_reachable_copy, r.under_replicated) for r in unverified} == \
        {(ledger, 0, (), (), (facts.killed,), 1, False, True) for ledger in facts.marked}
    assert not result.finding("unverified_fragments").at_risk and result.finding("short_fragments").at_risk
    assert result.finding("no_reachable_copy").count == 0
    single = spark.read.parquet(result.tables["single_bookie_ledgers"]).collect()
    kept = bk.ledger_metadata(facts.moved).ensembles[0][1][0]  # the member that still holds its entries
    assert {(r.ledger_id, r.bookie, r.basis) for r in single} == {
        (facts.single, facts.single_bookie, "metadata"), (facts.moved, kept, "holdings")}
    opened = spark.read.parquet(result.tables["open_ledgers"]).collect()
    assert {r.ledger_id: r.stored_entries for r in opened} == {facts.silent: 10, facts.busy.ledger_id: 10}
    assert result.finding("silent_writers").count == 0 and "not judged" in result.finding("silent_writers").summary
    assert (result.at_risk, result.exit_code, result.finding("unrecoverable").count) == (True, EXIT_AT_RISK, 0)

    # A day later: the busy writer wrote, the silent one did not; each run adds a date partition.
    for i in range(3):
        facts.busy.append(b"later-%d" % i)
    result = run_replication_audit(spark, uri, str(replicated), run=second)
    silent = spark.read.parquet(result.tables["silent_writers"]).collect()
    assert [(r.ledger_id, r.stored_entries, r.unchanged_since.astimezone(dt.timezone.utc)) for r in silent] == \
        [(facts.silent, 10, first.at)]
    assert silent[0].silent_seconds == 86400
    assert all(r.over_age for r in spark.read.parquet(result.tables["underreplicated_aged"]).collect())
    later = run_storage_audit(spark, uri, str(stored), run=second, stale_gc_passes=1)
    assert later.finding("orphans").count == 1
    planted = [r for r in spark.read.parquet(later.tables["deleted_not_reclaimed"]).collect()
               if r.ledger_id == ORPHAN.ledger_id]
    assert [(r.without_metadata_since.astimezone(dt.timezone.utc), r.age_seconds) for r in planted] == \
        [(first.at, 86400)]
    for out, table in ((replicated, "open_ledgers"), (replicated, "short_fragments"), (stored, "orphans"),
                       (stored, "bookie_ledgers"), (replicated, "findings_replication")):
        assert partitions(out, table) == [f"date={first.date}", f"date={second.date}"], table
    history = read_history(spark, str(replicated), "findings_replication").where("kind = 'silent_writers'")
    assert sorted((r.run, r["count"]) for r in history.collect()) == [(first.run_id, 0), (second.run_id, 1)]
    assert "findings_history.png" in os.listdir(os.path.dirname(result.report))
    facts.silent_handle.close()
    facts.busy.close()


def test_bk_audit_and_the_spark_submit_job_exit_0_on_a_healthy_cluster(cluster, tmp_path):
    """The two ways an operator runs the audits, each a process of its own (its own Spark): ``bk audit
    replication`` and ``spark-submit jobs/storage_audit.py``; a bad argument exits 2 before Spark starts."""
    import pathlib
    import subprocess
    import sys

    from tests.helpers.audit_processes import BK_AUDIT as bk_cli
    from tests.helpers.audit_processes import audit_env, write_closed_ledger
    c = cluster(3)
    write_closed_ledger(c.metadata_service_uri, b"cli-test")
    out = tmp_path / "audit"  # replication/ and storage/: each audit its own output directory
    env = audit_env()

    bad = subprocess.run(bk_cli + ["replication", "-u", c.metadata_service_uri, "--output", str(out / "replication"),
                                   "--max-underreplicated-age", "-5"], capture_output=True, text=True, timeout=120)
    assert (bad.returncode, bad.stderr.strip()) == (2, "bk: --max-underreplicated-age -5 must be 0 or more")

    done = subprocess.run(bk_cli + ["replication", "-u", c.metadata_service_uri, "--output", str(out / "replication"),
                                    "--master", "local[1]"], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replication audit" in done.stdout and "nothing at risk" in done.stdout
    assert partitions(out / "replication", "short_fragments") and partitions(out / "replication", "open_ledgers")

    spark_submit = pathlib.Path(sys.executable).parent / "spark-submit"
    job = pathlib.Path(__file__).resolve().parents[2] / "jobs" / "storage_audit.py"
    done = subprocess.run([str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false",
                           "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
                           str(job), "--metadata-service-uri", c.metadata_service_uri,
                           "--output", str(out / "storage")],
                          capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "storage audit" in done.stdout and "nothing at risk" in done.stdout
    reports = list((out / "storage" / "reports" / "storage").glob("date=*/run=*/report.md"))
    assert len(reports) == 1 and "Nothing at risk (exit code 0)" in reports[0].read_text()
    assert "cli-test" in reports[0].read_text()  # space by owner
