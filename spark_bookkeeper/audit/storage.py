"""The storage audit (garbage collection and compaction): where the disk went, bookie by bookie.

Reads ``table=entrylogs``, ``table=bookie_ledgers`` and ``table=ledgers`` once, keeps them as this run's
snapshots, and derives:

- ``bookie_space``: per bookie, live vs garbage bytes, what the next minor and major compaction would reclaim at
  the bookie's own thresholds (garbage of the logs each would take), logs GC skipped as corrupt.
- ``skipped_logs``: entry logs GC left alone as unreadable, with GC's reason.
- ``deleted_not_reclaimed``: every copy a bookie still holds of a ledger the metadata lacks: reclaimable space
  (a deleted ledger's index goes at the bookie's next GC pass, its bytes with compaction or its logs' removal),
  never data at risk: GC removes such a ledger whatever the audit says. Each copy says how far GC has got
  (``seen_by_gc``: the bookie lists no entry of it any more, or GC recorded the pass that saw it deleted) and how
  old it is, as far as the data tells: ``last_in_metadata`` (the previous run's time, if that run saw the ledger
  in the metadata), ``without_metadata_since`` (the first run that found this copy without metadata: this run for
  a new one), ``age_seconds`` since then, and ``passes_since``, the bookie's GC passes since GC saw the deletion
  (or, before GC has, since that first run; unknown after the bookie restarted). ``stale``: more than
  ``stale_gc_passes`` passes and the bytes still there. A copy no run saw in the metadata and GC has not judged
  is read again in the metadata first (created meanwhile: not reported).
- ``orphans``: ``holds_nothing``: a closed ledger's metadata names a bookie that answers but holds none of the
  entries the striping gives it (a replica short).
- ``space_by_owner``: ledgers, logical bytes (metadata length) and stored bytes (on all bookies, replicas
  included), grouped by a custom-metadata key.

Data at risk (exit 3): orphans (metadata naming a bookie without the entries) and logs GC skipped as corrupt.
Bytes without metadata are a warning, whatever their age.
"""
from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bookie.util.human import human_bytes
from spark_bookkeeper.audit.common import (ANSWERED, check_bookie_timeout, check_cluster, read_tables,
                                           record_findings, snapshots)
from spark_bookkeeper.audit.history import Run, read_history, run_time, runs_before
from spark_bookkeeper.audit.phases import Progress
from spark_bookkeeper.audit.plots import time_scale
from spark_bookkeeper.audit.result import AuditResult, Finding
from spark_bookkeeper.audit.staging import AuditRun
from spark_bookkeeper.options import BOOKIE_TIMEOUT

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


def _held_without_metadata(bookie_ledgers: DataFrame) -> DataFrame:
    """Copies of ledgers the metadata lacks that are still on the bookie: bytes in its logs, or entries it lists."""
    return _not_in_metadata(bookie_ledgers).where((_on_disk() > 0) | ~_gc_removed())


def deleted_not_reclaimed(bookie_ledgers: DataFrame, known: DataFrame | None, confirmed: DataFrame,
                          sightings: DataFrame | None, run: Run, stale_gc_passes: int) -> DataFrame:
    """Every copy a bookie holds of a ledger the metadata lacks (module docstring): those GC removed, those
    ``known`` (the previous run's ledgers: scope_id, ledger_id, last_in_metadata) saw in the metadata, and the
    ``no_metadata`` rows of ``confirmed`` (``confirm_orphans``: read again in the metadata, still missing).
    ``sightings`` (``first_sightings``): each copy's first run without metadata and the bookie's GC passes then."""
    keys = ["scope_id", "ledger_id"]
    gone = _held_without_metadata(bookie_ledgers)
    unjudged = gone.where(~_gc_removed())
    rows = gone.where(_gc_removed()).unionByName(unjudged.join(
        confirmed.where(F.col("kind") == "no_metadata").select("bookie_id", *keys), ["bookie_id", *keys],
        "left_semi"))
    if known is not None:
        rows = (rows.unionByName(unjudged.join(known.select(*keys), keys, "left_semi"))
                .join(known.select(*keys, "last_in_metadata"), keys, "left"))
    else:
        rows = rows.withColumn("last_in_metadata", F.lit(None).cast("timestamp"))
    if sightings is not None:
        rows = rows.join(sightings, ["bookie_id", *keys], "left")
    else:
        rows = rows.withColumn("first_seen", F.lit(None).cast("timestamp")) \
            .withColumn("first_gc_passes", F.lit(None).cast("long"))
    since = F.coalesce(F.col("first_seen"), F.lit(run.at).cast("timestamp"))
    passes_then = F.coalesce(F.col("first_gc_passes"), F.col("gc_passes"))
    # GC's own record when it has one; else the passes since the first run that found the copy without metadata
    # (a bookie counts its passes from its start: fewer now than then means it restarted, and the count is lost).
    passes_since = F.when(F.col("deleted_at_pass") > 0, F.col("gc_passes") - F.col("deleted_at_pass")) \
        .when(F.col("gc_passes") >= passes_then, F.col("gc_passes") - passes_then)
    return (rows.select("bookie_id", *keys, _on_disk().alias("bytes"), _gc_removed().alias("seen_by_gc"),
                        "deleted_at_pass", "gc_passes", passes_since.alias("passes_since"), "last_in_metadata",
                        since.alias("without_metadata_since"),
                        (F.lit(run.at).cast("long") - since.cast("long")).alias("age_seconds"))
            .withColumn("stale", F.coalesce(F.col("passes_since") > F.lit(stale_gc_passes), F.lit(False)))
            .orderBy(*keys, "bookie_id"))


def orphan_candidates(bookie_ledgers: DataFrame, known: DataFrame | None) -> DataFrame:
    """What ``confirm_orphans`` reads again, then: ``no_metadata``, a bookie still lists entries of a ledger the
    metadata lacks, GC has not judged it and no earlier run saw it in the metadata (deleted since, or created
    after the driver listed the metadata); ``holds_nothing``, a closed ledger's metadata names an answering
    bookie that lists none of the entries the striping gives it."""
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
    GC candidate again). The rest, collected: ``orphans`` are its ``holds_nothing`` rows, and its
    ``no_metadata`` rows are copies without metadata (``deleted_not_reclaimed``)."""
    from bookie.exceptions import BKNoSuchLedgerExistsOnMetadataServerException
    from bookie.ledger_id import LedgerId
    from spark_bookkeeper import connections
    bk = connections.driver_client(uri)
    rows = []
    for row in candidates.collect():
        if row.kind == "no_metadata":
            try:
                bk.ledger_metadata(LedgerId(row.scope_id, row.ledger_id))
                continue  # created meanwhile: not without metadata
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
    """Ledgers the previous storage run saw in the metadata, with that run's time (``last_in_metadata``); None
    on a first run."""
    earlier = runs_before(spark, output, "ledgers", run)
    if not earlier:
        return None
    history = read_history(spark, output, "ledgers")
    return (history.where(F.col("run").cast("string") == earlier[-1]).select("scope_id", "ledger_id").distinct()
            .withColumn("last_in_metadata", F.lit(run_time(earlier[-1])).cast("timestamp")))


def first_sightings(spark, output: str, run: Run) -> DataFrame | None:
    """Per copy an earlier run listed in ``deleted_not_reclaimed`` (bookie_id, scope_id, ledger_id): the first
    such run's time (``first_seen``) and the bookie's GC passes then (``first_gc_passes``); None before any.
    Run times from the run ids (the columns every version of the table has)."""
    earlier = runs_before(spark, output, "deleted_not_reclaimed", run)
    if not earlier:
        return None
    times = spark.createDataFrame([(r, run_time(r)) for r in earlier], "run string, first_seen timestamp")
    history = read_history(spark, output, "deleted_not_reclaimed").withColumn("run", F.col("run").cast("string"))
    return (history.join(times, "run").groupBy("bookie_id", "scope_id", "ledger_id")
            .agg(F.min("first_seen").alias("first_seen"),
                 F.min_by("gc_passes", "first_seen").alias("first_gc_passes")))


READ = ("entrylogs", "bookie_ledgers", "ledgers")  # the tables of format("bookkeeper") the audit reads


def reclaimable_summary(deleted: DataFrame, run: Run, stale_gc_passes: int) -> str:
    """The ``deleted_not_reclaimed`` finding in one line: how much, how far GC has got, how old the oldest copy
    is as far as the audit's runs tell, and the GC passes since."""
    got = deleted.agg(F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("bytes"),
                      F.sum((~F.col("seen_by_gc")).cast("int")).alias("unjudged"),
                      F.sum(F.col("stale").cast("int")).alias("stale"), F.max("age_seconds").alias("age"),
                      F.max("passes_since").alias("passes")).first()
    if not got.n:
        return "no bytes of ledgers the metadata lacks on the bookies"
    passes = "" if got.passes is None else f", up to {got.passes} GC passes since"
    if got.age:
        divisor, unit = time_scale([got.age])
        since = run.at - dt.timedelta(seconds=got.age)
        age = f"the oldest without metadata since {since:%Y-%m-%d %H:%M:%S} UTC ({got.age / divisor:.1f} {unit} " \
              f"before this run){passes}"
    else:
        age = f"all first seen without metadata this run{passes}"
    return (f"copies of ledgers the metadata lacks still on the bookies: {human_bytes(got.bytes)} reclaimable, not "
            f"data at risk (GC removes them); {got.unjudged} not yet collected by GC; {age}; {got.stale or 0} stale "
            f"(more than {stale_gc_passes} GC passes on)")


def storage_findings(space: DataFrame, skipped: DataFrame, deleted: DataFrame, orphans: DataFrame, run: Run,
                     stale_gc_passes: int) -> list[Finding]:
    totals = space.agg(F.sum((F.col("status") != "ok").cast("int")).alias("unanswered"),
                       F.sum("garbage_bytes").alias("g"), F.sum("major_reclaimable_bytes").alias("m")).first()
    return [
        Finding("orphans", orphans.count(), True,
                "bookies named by a closed ledger's metadata holding none of its entries (a replica short)"),
        Finding("skipped_logs", skipped.count(), True, "entry logs GC skipped as unreadable"),
        Finding("deleted_not_reclaimed", deleted.count(), False, reclaimable_summary(deleted, run, stale_gc_passes)),
        Finding("bookie_space", totals.unanswered or 0, False,
                f"bookies without GC state (not answering, or stock BookKeeper bookies); garbage on disk "
                f"{totals.g or 0} bytes, {totals.m or 0} of them reclaimable by the next major compaction"),
    ]


def run_storage_audit(spark, uri: str, output_dir: str, run: Run | None = None,
                      stale_gc_passes: int = DEFAULT_STALE_GC_PASSES,
                      owner_keys: tuple[str, ...] = DEFAULT_OWNER_KEYS, report_dir: str | None = None,
                      progress: Progress | None = None, bookie_timeout: float = BOOKIE_TIMEOUT) -> AuditResult:
    """Run the storage audit of the cluster at ``uri``; tables under ``output_dir``, report next to them, both
    published when the run is done (staging.py); ``progress`` gets one line per phase. An interrupted or failed
    run raises RunAborted, having kept nothing."""
    from spark_bookkeeper.audit.report import write_storage_report
    if stale_gc_passes < 0:
        raise ValueError(f"stale GC passes {stale_gc_passes} must be 0 or more")
    if not owner_keys:
        raise ValueError("no owner key given: name at least one custom-metadata key (e.g. application)")
    check_bookie_timeout(bookie_timeout)
    check_cluster(uri)
    run = run or Run.now()
    with AuditRun(spark, "storage", output_dir, run, report_dir, READ, progress) as audit:
        audit.phases.start("history")
        known = known_ledgers(spark, output_dir, run)  # before this run's snapshot joins the history
        sightings = first_sightings(spark, output_dir, run)
        audit.phases.start("tables")
        entrylogs, bookie_ledgers, ledgers = snapshots(audit.tables, read_tables(spark, uri, READ, bookie_timeout))
        audit.phases.start("findings")
        confirmed = confirm_orphans(spark, orphan_candidates(bookie_ledgers, known), uri)
        space, skipped, deleted, orphans, owners = snapshots(audit.tables, {
            "bookie_space": bookie_space(entrylogs),
            "skipped_logs": skipped_logs(entrylogs),
            "deleted_not_reclaimed": deleted_not_reclaimed(bookie_ledgers, known, confirmed, sightings, run,
                                                           stale_gc_passes),
            "orphans": confirmed.where(F.col("kind") == "holds_nothing"),
            "space_by_owner": space_by_owner(ledgers, bookie_ledgers, owner_keys)})
        audit.result.findings = storage_findings(space, skipped, deleted, orphans, run, stale_gc_passes)
        findings = record_findings(audit.tables, audit.result)
        audit.phases.start("report")
        write_storage_report(audit.result, audit.report.open(), findings, space, owners, deleted, orphans, skipped,
                             entrylogs)
        return audit.publish()
