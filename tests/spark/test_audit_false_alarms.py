"""The audits alarm only on real risk (issue 35): the two false alarms operators met, on real bookies.

- A storage audit right after an ordinary deletion, before the bookies' GC pass: the deleted ledger's bytes
  are reclaimable space (``deleted_not_reclaimed``, a warning with their age and the GC passes since), not an
  orphan (exit 3).
- A replication audit while a ledger's bookies do not answer (held by SIGSTOP while the audit reads the
  tables): its fragments are ``unverified_fragments`` (a warning), not "no copy left" (exit 3).

And the alarm kept for real risk: a closed ledger whose every bookie was killed and is no longer registered
(lost, not slow), with AutoRecovery not running, has no reachable copy (exit 3).
"""
from __future__ import annotations

import datetime as dt

import signal

from spark_bookkeeper.audit import EXIT_AT_RISK, EXIT_OK, Run, run_replication_audit, run_storage_audit
from spark_bookkeeper.audit.phases import KEYS
from tests.helpers.audit_cluster import SETTINGS
from tests.helpers.gc import forced_pass
from tests.helpers.held_process import hold
from tests.helpers.replication import unregistered
from tests.helpers.waiting import wait_for


def write_in_turns(handles, entries: int) -> None:
    """Entries of ``handles`` interleaved, so their bytes share entry logs (SETTINGS' small logs): a deleted
    ledger's bytes stay in logs that also hold live ones."""
    for i in range(entries):
        for h in handles:
            h.append(f"{h.ledger_id}-{i}-".encode() * 40)
    for h in handles:
        h.close()


def rows(spark, result, table: str) -> list:
    return spark.read.parquet(result.tables[table]).collect()


def utc(t: dt.datetime | None) -> dt.datetime | None:
    """A timestamp as Spark hands it back (naive, the session's local time) in UTC."""
    return None if t is None else t.astimezone(dt.timezone.utc)


def test_a_ledger_deleted_before_gc_ran_is_reclaimable_space_not_data_at_risk(spark, bk_cluster, tmp_path):
    from bookie.proto import bookkeeper_pb2 as pb
    c, bk = bk_cluster(3, **SETTINGS)
    uri, output = c.metadata_service_uri, str(tmp_path / "storage")
    kept = [bk.create_ledger(3, 2, 2, password=b"pw") for _ in range(2)]
    seen = bk.create_ledger(3, 2, 2, password=b"pw")
    write_in_turns([kept[0], seen], 20)
    first = Run.now()
    assert run_storage_audit(spark, uri, output, run=first).exit_code == EXIT_OK

    # Written and deleted between two runs (no run saw it in the metadata), and one the first run saw: both
    # deleted before any GC pass, their entries still listed by the bookies.
    unseen = bk.create_ledger(3, 2, 2, password=b"pw")
    write_in_turns([kept[1], unseen], 20)
    deleted = {seen.ledger_id, unseen.ledger_id}
    for ledger in deleted:
        bk.delete_ledger(ledger)
    second = Run(first.at + dt.timedelta(hours=1))
    result = run_storage_audit(spark, uri, output, run=second)
    assert (result.exit_code, result.at_risk) == (EXIT_OK, False), result.findings
    assert rows(spark, result, "orphans") == [] and result.finding("orphans").count == 0
    copies = rows(spark, result, "deleted_not_reclaimed")
    assert {r.ledger_id for r in copies} == deleted and len(copies) == 6  # 3 bookies each hold some of each
    assert all(r.bytes > 0 and not r.seen_by_gc and not r.stale for r in copies)
    assert {(r.ledger_id, utc(r.last_in_metadata)) for r in copies} == {
        (seen.ledger_id, first.at), (unseen.ledger_id, None)}
    assert {(utc(r.without_metadata_since), r.age_seconds, r.passes_since) for r in copies} == {(second.at, 0, 0)}
    finding = result.finding("deleted_not_reclaimed")
    assert (finding.count, finding.at_risk) == (6, False)
    assert "reclaimable" in finding.summary and "first seen without metadata this run" in finding.summary
    passes_then = {r.bookie_id: r.gc_passes for r in copies}

    # Two GC passes later (compaction suspended, so the bytes stay): GC has seen the deletions; the age counts
    # from the run that first saw the copies without metadata.
    for b in c.bookies:
        bk.bookie_client(b.bookie_id).garbage_collection(pb.GarbageCollectionRequest.SUSPEND, major=True, minor=True)
        for _ in range(2):
            forced_pass(bk, b.bookie_id)
    third = Run(first.at + dt.timedelta(hours=2))
    result = run_storage_audit(spark, uri, output, run=third)
    assert (result.exit_code, result.at_risk) == (EXIT_OK, False), result.findings
    copies = rows(spark, result, "deleted_not_reclaimed")
    assert {r.ledger_id for r in copies} == deleted and all(r.seen_by_gc for r in copies)
    assert {(utc(r.without_metadata_since), r.age_seconds) for r in copies} == {(second.at, 3600)}
    for r in copies:  # since GC saw the deletion where it recorded the pass, else since the audit first saw it
        assert r.gc_passes == passes_then[r.bookie_id] + 2
        assert r.passes_since == (r.gc_passes - r.deleted_at_pass if r.deleted_at_pass else 2), r
    summary = result.finding("deleted_not_reclaimed").summary
    assert "without metadata since 2" in summary and "GC passes since" in summary, summary


def phase_line_ends(key: str) -> str:
    """How the progress line of phase ``key`` ends: ``(2/5)`` for the tables (phases.py)."""
    return f"({KEYS.index(key) + 1}/{len(KEYS)})"


def closed_ledger(bk, ensemble_size: int, quorum: int) -> int:
    """A closed ledger of six entries, each on ``quorum`` bookies; its id."""
    lh = bk.create_ledger(ensemble_size, quorum, quorum, password=b"pw")
    for i in range(6):
        lh.append(b"entry-%d" % i)
    lh.close()
    return lh.ledger_id


def test_bookies_that_do_not_answer_leave_fragments_unverified_not_lost(spark, bk_cluster, tmp_path):
    from spark_bookkeeper.audit.common import UNAVAILABLE
    # zkTimeout: the held bookies keep their registrations (the audit plans with them registered).
    c, bk = bk_cluster(3, zkTimeout=10000)
    ledger = closed_ledger(bk, 2, 2)
    (_, ensemble), = bk.ledger_metadata(ledger).ensembles
    held = [b for b in c.bookies if b.bookie_id in ensemble]
    resumes = []

    def progress(line: str) -> None:
        """Both bookies of the ledger held (SIGSTOP) while the audit reads the tables, resumed once it has."""
        if line.endswith(phase_line_ends("tables")):
            resumes.extend(hold(b.proc.pid) for b in held)
        elif line.endswith(phase_line_ends("findings")):
            for resume in resumes:
                resume()

    try:
        result = run_replication_audit(spark, c.metadata_service_uri, str(tmp_path / "replication"),
                                       progress=progress)
    finally:
        for resume in resumes:
            resume()
    assert len(resumes) == 2
    asked = rows(spark, result, "bookie_ledgers")
    assert {(r.bookie_id, r.status) for r in asked if r.ledger_id == ledger} == \
        {(b, UNAVAILABLE) for b in ensemble}
    assert (result.exit_code, result.at_risk) == (EXIT_OK, False), result.findings
    assert rows(spark, result, "short_fragments") == [] and result.finding("short_fragments").count == 0
    unverified = rows(spark, result, "unverified_fragments")
    assert [(r.ledger_id, r.fragment, sorted(r.unreachable), r.lacking, r.min_copies) for r in unverified] == \
        [(ledger, 0, sorted(ensemble), [], 0)]
    finding = result.finding("unverified_fragments")
    assert (finding.count, finding.at_risk) == (1, False)
    report = open(result.report).read()
    assert "Nothing at risk (exit code 0)" in report and "no copy left" not in report
    assert result.finding("no_reachable_copy").count == 0


def test_a_ledger_whose_bookies_are_all_lost_has_no_reachable_copy_and_is_at_risk(spark, bk_cluster, tmp_path):
    """Both bookies of a closed ledger SIGKILLed and gone from ZooKeeper (not registered: lost, not slow), no
    AutoRecovery to mark the ledger: nothing will copy it back. A ledger with a copy of each entry on the
    surviving bookie too is only unverified."""
    from spark_bookkeeper.audit.common import UNAVAILABLE
    from spark_bookkeeper.bookie_tables import NOT_REGISTERED
    c, bk = bk_cluster(3)
    lost = closed_ledger(bk, 2, 2)
    everywhere = closed_ledger(bk, 3, 3)
    (_, ensemble), = bk.ledger_metadata(lost).ensembles
    killed = sorted(ensemble)
    for b in c.bookies:
        if b.bookie_id in killed:
            c.kill_bookie(b.index, signal.SIGKILL)
    for b in killed:
        wait_for(unregistered(bk, b), f"{b}'s registration to expire")

    result = run_replication_audit(spark, c.metadata_service_uri, str(tmp_path / "replication"))
    asked = rows(spark, result, "bookie_ledgers")
    assert {(r.bookie_id, r.status, r.error) for r in asked if r.ledger_id == lost} == \
        {(b, UNAVAILABLE, NOT_REGISTERED) for b in killed}
    assert (result.exit_code, result.at_risk) == (EXIT_AT_RISK, True), result.findings
    unreached = rows(spark, result, "no_reachable_copy")
    assert [(r.ledger_id, r.fragment, r.lost, r.unreachable, r.lacking, r.min_copies, r.no_copy_left,
             r.under_replicated) for r in unreached] == [(lost, 0, killed, [], [], 0, False, False)]
    finding = result.finding("no_reachable_copy")
    assert (finding.count, finding.at_risk) == (1, True)
    assert f"in 1 ledgers (lost: {', '.join(killed)}): 1 of them in ledgers AutoRecovery has not marked" in \
        finding.summary, finding.summary
    unverified = rows(spark, result, "unverified_fragments")
    assert {(r.ledger_id, tuple(r.lost), tuple(r.unreachable), r.min_copies, r.no_reachable_copy)
            for r in unverified} == {(lost, tuple(killed), (), 0, True), (everywhere, tuple(killed), (), 1, False)}
    assert not result.finding("unverified_fragments").at_risk
    assert result.finding("short_fragments").count == result.finding("underreplicated_aged").count == 0
    report = open(result.report).read()
    assert "**DATA AT RISK** (exit code 3)" in report and f"| 0/{lost} | 0 |" in report


OLD_FIXED_TIMEOUT = 5.0  # seconds: what the per-bookie tables waited before (ClientConfiguration.readTimeout)


def test_a_bookie_slower_than_the_old_fixed_timeout_is_waited_for(spark, bk_cluster, tmp_path):
    """A bookie that holds every list of entries (tests/helpers/held_bookie.py) until a list asked after the audit's,
    waiting the old fixed timeout, has timed out: the audit's list waits longer than that, and its answer counts."""
    import threading

    from bookie.client.bookie_client import BookieClient
    from bookie.exceptions import BKTimeoutException
    from bookie.ledger_id import LedgerId
    from tests.helpers.held_bookie import restart_held
    c, bk = bk_cluster(3)
    ledger = closed_ledger(bk, 2, 2)
    (_, ensemble), = bk.ledger_metadata(ledger).ensembles
    slow = next(b for b in c.bookies if b.bookie_id == ensemble[0])
    held = restart_held(c, slow.index, tmp_path / "hold", "list-entries")
    held.arm()
    probe: dict[str, BaseException] = {}

    def release_after_the_old_timeout() -> None:
        """Once the audit's list is held, a list asked after it that waits the old fixed timeout times out; then
        the bookie serves them."""
        try:
            held.wait_holding("the audit's list of entries to be held")
            client = BookieClient(slow.bookie_id, OLD_FIXED_TIMEOUT, address=slow.grpc_address)
            try:
                client.list_entries(LedgerId(0, ledger))
            except BKTimeoutException as exc:
                probe["timed out"] = exc
            finally:
                client.close()
        finally:
            held.release()

    releaser = threading.Thread(target=release_after_the_old_timeout, daemon=True)
    releaser.start()
    result = run_replication_audit(spark, c.metadata_service_uri, str(tmp_path / "replication"))
    releaser.join(timeout=60)
    assert "timed out" in probe  # the bookie was slower than the old fixed timeout
    asked = rows(spark, result, "bookie_ledgers")
    assert {(r.bookie_id, r.status, r.entries) for r in asked if r.ledger_id == ledger} == \
        {(b, "ok", 6) for b in ensemble}
    assert (result.exit_code, result.finding("unverified_fragments").count) == (EXIT_OK, 0), result.findings
