"""The storage audit (garbage collection and compaction): where the disk went, bookie by bookie.

Reads ``table=entrylogs``, ``table=bookie_ledgers`` and ``table=ledgers`` once, keeps them as this run's
snapshots, and derives:

- ``bookie_space``: per bookie, live vs garbage bytes, what the next minor and major compaction would reclaim at
  the bookie's own thresholds (garbage of the logs each would take), logs GC skipped as corrupt.
- ``skipped_logs``: entry logs GC left alone as unreadable, with GC's reason.
- ``deleted_not_reclaimed``: ledgers gone from the metadata whose bytes are still on a bookie (GC removed them:
  the bookie lists no entry of them any more, or an earlier run saw them in the metadata); ``stale`` when GC saw
  them deleted more than ``stale_gc_passes`` passes ago (compaction has not taken their logs since).
- ``orphans``: ``no_metadata`` (a bookie still lists entries of a ledger the metadata does not have, and no
  earlier run saw it in the metadata) and ``holds_nothing`` (a closed ledger's metadata names a bookie that
  answers but holds none of the entries the striping gives it).

A first run cannot tell a ledger deleted after the bookie's last GC pass from an orphan (both are entries
without metadata): from the second run on, ledgers the previous run saw in the metadata count as deleted.
- ``space_by_owner``: ledgers, logical bytes (metadata length) and stored bytes (on all bookies, replicas
  included), grouped by a custom-metadata key.

Data at risk: orphans of either kind (an entry without metadata is unreadable; metadata naming a bookie without
the entries is a replica short), and logs GC skipped as corrupt.
"""
from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from spark_bookkeeper.audit.common import ANSWERED, check_cluster, read_tables, record_findings, snapshots
from spark_bookkeeper.audit.history import Run, read_history, runs_before
from spark_bookkeeper.audit.phases import Progress
from spark_bookkeeper.audit.result import AuditResult, Finding
from spark_bookkeeper.audit.staging import AuditRun

DEFAULT_STALE_GC_PASSES = 3
# Our connector's log name first, then the key applications commonly set (Pulsar: "application", with the topic
# under "pulsar/managed-ledger"; pass --owner-key pulsar/managed-ledger for space per topic).
DEFAULT_OWNER_KEYS = ("spark.log", "application")
NO_OWNER, NOT_IN_METADATA = "(no owner key)", "(not in metadata)"
ORPHANS_SCHEMA = ("kind string, bookie_id string, scope_id long, ledger_id long, bytes long, entries long, "
                  "expected_entries long")


def bookie_space(entrylogs: DataFrame) -> DataFrame:
    """One row per bookie: totals over its entry logs (a bookie that did not answer, or a stock BookKeeper bookie,
    gets its status and error with null byte counts)."""
    ok = F.col("status") == "ok"
    garbage = F.when(ok, F.col("total_bytes") - F.col("remaining_bytes"))

    def sum_if(condition, value):
        return F.sum(F.when(condition, value).otherwise(F.lit(0)))

    answered = F.max(F.col("status").isin("ok", "skipped").cast("int")) == 1
    by_bookie = entrylogs.groupBy("bookie_id").agg(
        F.max(F.when(~F.col("status").isin("ok", "skipped"), F.col("status"))).alias("bad_status"),
        F.max(F.when(~F.col("status").isin("ok", "skipped"), F.col("error"))).alias("bad_error"),
        answered.alias("answered"),
        F.count(F.when(ok, F.col("entry_log_id"))).alias("entry_logs"),
        sum_if(ok, F.col("total_bytes")).alias("total_bytes"),
        sum_if(ok, F.col("remaining_bytes")).alias("live_bytes"),
        sum_if(ok, garbage).alias("garbage_bytes"),
        sum_if(ok & F.col("minor_compaction_candidate"), garbage).alias("minor_reclaimable_bytes"),
        sum_if(ok & F.col("major_compaction_candidate"), garbage).alias("major_reclaimable_bytes"),
        F.count(F.when(F.col("status") == "skipped", F.lit(1))).alias("skipped_logs"),
        sum_if(F.col("status") == "skipped", F.coalesce(F.col("total_bytes"), F.lit(0))).alias("skipped_bytes"))
    status = F.when(F.col("answered"), F.lit("ok")).otherwise(F.col("bad_status"))

    def unless_unanswered(name):
        return F.when(F.col("answered"), F.col(name)).alias(name)

    return by_bookie.select(
        "bookie_id", status.alias("status"), F.when(~F.col("answered"), F.col("bad_error")).alias("error"),
        *(unless_unanswered(c) for c in ("entry_logs", "total_bytes", "live_bytes", "garbage_bytes",
                                          "minor_reclaimable_bytes", "major_reclaimable_bytes", "skipped_logs",
                                          "skipped_bytes"))).orderBy("bookie_id")


def skipped_logs(entrylogs: DataFrame) -> DataFrame:
    return (entrylogs.where(F.col("status") == "skipped")
            .select("bookie_id", "entry_log_id", "total_bytes", F.col("error").alias("reason"))
            .orderBy("bookie_id", "entry_log_id"))


def _not_in_metadata(bookie_ledgers: DataFrame) -> DataFrame:
    return bookie_ledgers.where(F.col("status").isin(*ANSWERED) & ~F.col("in_metadata"))


def _on_disk() -> F.Column:
    return F.coalesce(F.col("bytes"), F.lit(0)) + F.coalesce(F.col("deleted_bytes"), F.lit(0))


def _gc_removed() -> F.Column:
    """GC has deleted the ledger here: it saw it deleted in a finished log (``deleted_at_pass``), or the bookie no
    longer lists any entry of it while its bytes are still in a log (the log being written reports no passes)."""
    return (F.coalesce(F.col("deleted_at_pass"), F.lit(0)) > 0) | (F.coalesce(F.col("entries"), F.lit(0)) == 0)


def deleted_not_reclaimed(bookie_ledgers: DataFrame, known: DataFrame | None, stale_gc_passes: int) -> DataFrame:
    """Ledgers gone from the metadata with bytes still on a bookie: GC removed them (``seen_by_gc``), or an
    earlier run saw them in the metadata (``known``: scope_id, ledger_id) and GC has not passed since.
    ``stale``: more than ``stale_gc_passes`` GC passes since GC saw the deletion, the bytes still there."""
    gone = _not_in_metadata(bookie_ledgers).where(_on_disk() > 0)
    rows = gone.where(_gc_removed()).withColumn("seen_by_gc", F.lit(True))
    if known is not None:
        unseen = gone.where(~_gc_removed()).join(known, ["scope_id", "ledger_id"], "left_semi")
        rows = rows.unionByName(unseen.withColumn("seen_by_gc", F.lit(False)))
    passes_since = F.when(F.col("deleted_at_pass") > 0, F.col("gc_passes") - F.col("deleted_at_pass"))
    return (rows.select("bookie_id", "scope_id", "ledger_id", _on_disk().alias("bytes"), "seen_by_gc",
                        "deleted_at_pass", "gc_passes", passes_since.alias("passes_since"))
            .withColumn("stale", F.coalesce(F.col("passes_since") > F.lit(stale_gc_passes), F.lit(False)))
            .orderBy("scope_id", "ledger_id", "bookie_id"))


def orphan_candidates(bookie_ledgers: DataFrame, known: DataFrame | None) -> DataFrame:
    """Both kinds of orphan, before the metadata is read again (see ``confirm_orphans``): a bookie still lists
    entries of a ledger the metadata lacks (and no earlier run saw it there); a closed ledger's metadata names an
    answering bookie that lists none of the entries the striping gives it."""
    no_metadata = _not_in_metadata(bookie_ledgers).where(~_gc_removed())
    if known is not None:
        no_metadata = no_metadata.join(known, ["scope_id", "ledger_id"], "left_anti")
    holds_nothing = bookie_ledgers.where(
        F.col("status").isin(*ANSWERED) & F.col("in_metadata") & (F.col("expected_entries") > 0)
        & (F.coalesce(F.col("entries"), F.lit(0)) == 0))
    cols = ["bookie_id", "scope_id", "ledger_id", "bytes", "entries", "expected_entries"]
    return (no_metadata.select(F.lit("no_metadata").alias("kind"), *cols)
            .unionByName(holds_nothing.select(F.lit("holds_nothing").alias("kind"), *cols))
            .orderBy("kind", "scope_id", "ledger_id", "bookie_id"))


def confirm_orphans(spark, candidates: DataFrame, uri: str) -> DataFrame:
    """Drop ``no_metadata`` candidates whose metadata exists after all: a ledger created after the driver listed
    the metadata reaches the bookies before this audit asks them (as BookKeeper's verifyMetadataOnGC reads each
    GC candidate again)."""
    from bookie.exceptions import BKNoSuchLedgerExistsOnMetadataServerException
    from bookie.ledger_id import LedgerId
    from spark_bookkeeper import connections
    bk = connections.driver_client(uri)
    rows = []
    for row in candidates.collect():
        if row.kind == "no_metadata":
            try:
                bk.ledger_metadata(LedgerId(row.scope_id, row.ledger_id))
                continue  # created meanwhile: not an orphan
            except BKNoSuchLedgerExistsOnMetadataServerException:
                pass
        rows.append(tuple(row))
    return spark.createDataFrame(rows, ORPHANS_SCHEMA)


def owner_column(owner_keys: tuple[str, ...]) -> F.Column:
    """The first of ``owner_keys`` a ledger's custom metadata has (as UTF-8 text), else NO_OWNER."""
    values = [F.expr(f"try_element_at(custom_metadata, '{key.replace(chr(39), '')}')").cast("string")
              for key in owner_keys]
    return F.coalesce(*values, F.lit(NO_OWNER))


def space_by_owner(ledgers: DataFrame, bookie_ledgers: DataFrame, owner_keys: tuple[str, ...]) -> DataFrame:
    """Per owner: ledgers, logical bytes (the metadata's length: closed ledgers only) and stored bytes (live bytes
    on every bookie that answered, replicas included). Bytes of ledgers the metadata lacks go to NOT_IN_METADATA."""
    owned = ledgers.select("scope_id", "ledger_id", owner_column(owner_keys).alias("owner"), "length")
    stored = bookie_ledgers.where(F.col("status").isin(*ANSWERED)).groupBy("scope_id", "ledger_id").agg(
        F.sum(F.coalesce(F.col("bytes"), F.lit(0))).alias("stored_bytes"))
    joined = owned.join(stored, ["scope_id", "ledger_id"], "full_outer")
    return (joined.groupBy(F.coalesce(F.col("owner"), F.lit(NOT_IN_METADATA)).alias("owner"))
            .agg(F.count(F.col("length")).alias("ledgers"),
                 F.sum(F.coalesce(F.col("length"), F.lit(0))).alias("logical_bytes"),
                 F.sum(F.coalesce(F.col("stored_bytes"), F.lit(0))).alias("stored_bytes"))
            .orderBy(F.desc("stored_bytes"), "owner"))


def known_ledgers(spark, output: str, run: Run) -> DataFrame | None:
    """Ledgers the previous storage run saw in the metadata (None on a first run)."""
    earlier = runs_before(spark, output, "ledgers", run)
    if not earlier:
        return None
    history = read_history(spark, output, "ledgers")
    return history.where(F.col("run").cast("string") == earlier[-1]).select("scope_id", "ledger_id").distinct()


READ = ("entrylogs", "bookie_ledgers", "ledgers")  # the tables of format("bookkeeper") the audit reads


def storage_findings(space: DataFrame, skipped: DataFrame, deleted: DataFrame, orphans: DataFrame,
                     stale_gc_passes: int) -> list[Finding]:
    totals = space.agg(F.sum((F.col("status") != "ok").cast("int")).alias("unanswered"),
                       F.sum("garbage_bytes").alias("g"), F.sum("major_reclaimable_bytes").alias("m")).first()
    on_disk = deleted.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("stale").cast("int")).alias("stale")).first()
    kinds = {r.kind: r["count"] for r in orphans.groupBy("kind").count().collect()}
    return [
        Finding("orphans", sum(kinds.values()), True,
                f"{kinds.get('no_metadata', 0)} ledger copies without metadata, {kinds.get('holds_nothing', 0)} "
                "bookies named by a ledger's metadata holding none of its entries"),
        Finding("skipped_logs", skipped.count(), True, "entry logs GC skipped as unreadable"),
        Finding("deleted_not_reclaimed", on_disk.stale or 0, False,
                f"deleted ledgers' copies still on disk more than {stale_gc_passes} GC passes after GC saw them "
                f"deleted ({on_disk.n} copies of deleted ledgers on disk in all)"),
        Finding("bookie_space", totals.unanswered or 0, False,
                f"bookies without GC state (not answering, or stock BookKeeper bookies); garbage on disk "
                f"{totals.g or 0} bytes, {totals.m or 0} of them reclaimable by the next major compaction"),
    ]


def run_storage_audit(spark, uri: str, output_dir: str, run: Run | None = None,
                      stale_gc_passes: int = DEFAULT_STALE_GC_PASSES,
                      owner_keys: tuple[str, ...] = DEFAULT_OWNER_KEYS, report_dir: str | None = None,
                      progress: Progress | None = None) -> AuditResult:
    """Run the storage audit of the cluster at ``uri``; tables under ``output_dir``, report next to them, both
    published when the run is done (staging.py); ``progress`` gets one line per phase. An interrupted or failed
    run raises RunAborted, having kept nothing."""
    from spark_bookkeeper.audit.report import write_storage_report
    if stale_gc_passes < 0:
        raise ValueError(f"stale GC passes {stale_gc_passes} must be 0 or more")
    if not owner_keys:
        raise ValueError("no owner key given: name at least one custom-metadata key (e.g. application)")
    check_cluster(uri)
    run = run or Run.now()
    with AuditRun(spark, "storage", output_dir, run, report_dir, READ, progress) as audit:
        audit.phases.start("history")
        known = known_ledgers(spark, output_dir, run)  # before this run's snapshot joins the history
        audit.phases.start("tables")
        entrylogs, bookie_ledgers, ledgers = snapshots(audit.tables, read_tables(spark, uri, READ))
        audit.phases.start("findings")
        space, skipped, deleted, orphans, owners = snapshots(audit.tables, {
            "bookie_space": bookie_space(entrylogs),
            "skipped_logs": skipped_logs(entrylogs),
            "deleted_not_reclaimed": deleted_not_reclaimed(bookie_ledgers, known, stale_gc_passes),
            "orphans": lambda: confirm_orphans(spark, orphan_candidates(bookie_ledgers, known), uri),
            "space_by_owner": space_by_owner(ledgers, bookie_ledgers, owner_keys)})
        audit.result.findings = storage_findings(space, skipped, deleted, orphans, stale_gc_passes)
        findings = record_findings(audit.tables, audit.result)
        audit.phases.start("report")
        write_storage_report(audit.result, audit.report.open(), findings, space, owners, deleted, orphans, skipped,
                             entrylogs)
        return audit.publish()
