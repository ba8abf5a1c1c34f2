"""The storage and replication audits on a cluster of BookKeeper's own (Java) bookies: what their protocol
offers (each bookie's list of entries of a ledger) finds short fragments and single-bookie ledgers; what only
this project's bookies offer (garbage-collection state, bytes per ledger) is reported per bookie as not
available from a stock BookKeeper bookie, never as a failure. The ledgers notebook runs against the same cluster."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from bookie.client import BookKeeper
from bookie.testing.realbk import SKIP_REASON, find_realbk
from spark_bookkeeper.audit import EXIT_AT_RISK, EXIT_OK, run_replication_audit, run_storage_audit
from tests.helpers.java_tools import java_ledger, swap_first_members
from tests.helpers.notebooks import execute, images, text

pytestmark = pytest.mark.skipif(find_realbk() is None, reason=SKIP_REASON)

NO_GC_STATE = "a stock BookKeeper bookie: its protocol has no garbage-collection state"


@dataclass
class Planted:
    uri: str
    bookies: list[str]
    whole: int  # Java client, E3 WQ2, fully replicated
    swapped: int  # Java client, E3 WQ2, its first two members swapped in the metadata
    lacking: list[str]  # the two swapped members: each lacks the other's stripe
    single: int  # Java client, ensemble of one
    single_bookie: str
    ours: int  # this project's client, closed, E3 WQ3 AQ3 (every copy acknowledged)
    open_ledger: int  # this project's client, left open by a live writer


def bookie_line(report: str, bookie: str) -> str:
    """The report's table row of ``bookie`` (empty when it has none)."""
    return next((line for line in report.splitlines() if line.startswith(f"| {bookie} |")), "")


@pytest.fixture(scope="module")
def planted(java_cluster):
    uri = java_cluster.metadata_service_uri
    whole, swapped = java_ledger(java_cluster, 30), java_ledger(java_cluster, 30)
    single = java_ledger(java_cluster, 10, ensemble=1, write_quorum=1, ack_quorum=1)
    bk = BookKeeper(uri)
    try:
        a, b, _ = swap_first_members(bk.store, swapped)
        ours = bk.create_ledger(3, 3, 3, password=b"pw", custom_metadata={"application": b"audit-java"})
        for i in range(20):
            ours.append(b"ours-%d" % i)
        ours.close()
        writer = bk.create_ledger(3, 2, 2, password=b"pw")
        for i in range(5):
            writer.append(b"open-%d" % i)
        (_, (single_bookie,)), = bk.ledger_metadata(single).ensembles
        yield Planted(uri, sorted(b.bookie_id for b in java_cluster.bookies), whole, swapped, sorted([a, b]), single,
                      single_bookie, ours.ledger_id, writer.ledger_id)
    finally:
        bk.close()  # the open ledger stays open in the metadata, as a crashed writer's


def test_replication_audit_finds_the_short_fragment_and_the_single_bookie_ledger(spark, planted, tmp_path):
    result = run_replication_audit(spark, planted.uri, str(tmp_path / "replication"))
    assert (result.at_risk, result.exit_code) == (True, EXIT_AT_RISK)

    short = spark.read.parquet(result.tables["short_fragments"]).collect()
    assert [(r.ledger_id, r.fragment, r.lacking, r.unreachable, r.min_copies, r.under_replicated) for r in short] == \
        [(planted.swapped, 0, planted.lacking, [], 0, False)]  # entries 0, 3, ... had both copies on a and b
    single = spark.read.parquet(result.tables["single_bookie_ledgers"]).collect()
    assert [(r.ledger_id, r.bookie, r.basis) for r in single] == [(planted.single, planted.single_bookie, "metadata")]
    opened = spark.read.parquet(result.tables["open_ledgers"]).collect()
    assert [(r.ledger_id, r.stored_entries) for r in opened] == [(planted.open_ledger, 10)]  # 5 entries x WQ2
    assert result.finding("underreplicated_aged").count == 0  # nothing marked: no auditor runs here

    report = open(result.report).read()
    assert "**DATA AT RISK** (exit code 3)" in report and str(planted.swapped) in report
    assert "## Bookies that answered in part or not at all" in report
    for bookie in planted.bookies:
        assert f"| {bookie} | partial |" in report and NO_GC_STATE in bookie_line(report, bookie)


def test_storage_audit_reports_no_gc_state_per_java_bookie_and_nothing_at_risk(spark, planted, tmp_path):
    result = run_storage_audit(spark, planted.uri, str(tmp_path / "storage"))
    # Bookies without GC state are a warning in the report, not data at risk: exit 0 (docs/operations/audits.md, exit codes).
    assert (result.at_risk, result.exit_code) == (False, EXIT_OK)
    assert (result.finding("bookie_space").count, result.finding("bookie_space").at_risk) == (3, False)
    assert result.finding("orphans").count == 0 and result.finding("skipped_logs").count == 0

    space = spark.read.parquet(result.tables["bookie_space"]).collect()
    assert [r.bookie_id for r in space] == planted.bookies
    for r in space:
        assert (r.status, r.total_bytes, r.live_bytes, r.garbage_bytes) == ("unsupported", None, None, None)
        assert NO_GC_STATE in r.error

    report = open(result.report).read()
    assert "Nothing at risk (exit code 0)" in report
    for bookie in planted.bookies:
        assert f"unsupported: {NO_GC_STATE}" in bookie_line(report, bookie)


def test_ledgers_notebook_runs_against_the_java_cluster(planted, tmp_path):
    """notebooks/ledgers.ipynb pointed at the Java cluster: no cell fails (nbclient raises), every plot drawn."""
    notebook = execute("ledgers.ipynb", planted.uri, tmp_path)
    out = text(notebook)
    assert f"{planted.uri}: 5 ledgers, 5 fragments, 3 registered bookies" in out
    drawn = min(planted.whole, planted.swapped)  # the most fragments (1 each), then the longest, then the lowest id
    assert f"ledger {drawn}: CLOSED, E=3 WQ=2 AQ=2, last entry 29, 3,000 bytes, 1 fragment(s)" in out
    table = out.replace(" ", "")
    for bookie in planted.bookies:  # ledgers per bookie: all but the single ledger are on every bookie
        assert f"|{bookie}|{5 if bookie == planted.single_bookie else 4}|" in table and "|rw|" in table
    assert f"|{planted.open_ledger}|OPEN|" in table
    assert images(notebook) == 4  # sizes/ages, per bookie, the ledger's fragments, open ledgers
