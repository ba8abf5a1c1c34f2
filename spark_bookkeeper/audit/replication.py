"""The replication audit: what is under-replicated and why, and what AutoRecovery has not noticed.

Reads ``table=underreplicated``, ``table=ledgers``, ``table=fragments`` and ``table=bookie_ledgers`` once,
keeps them as this run's snapshots, and derives:

- ``underreplicated_aged``: each ledger AutoRecovery has marked, with its missing replicas, state, reason and
  age (at the run time); ``over_age`` past ``max_underreplicated_age``.
- ``short_fragments``: fragments of closed ledgers with fewer copies than the write quorum, as the bookies that
  answered show from their lists of entries against the striping (BookKeeper's replicas check): the bookies
  ``lacking`` entries they should hold, the ``unreachable`` and ``lost`` ones (below), ``min_copies`` (the fewest
  copies an entry of the fragment can have, a bookie lacking some of its entries, not answering or lost counted
  as holding none), ``no_copy_left`` (proven: every bookie of some entry's write set answered and holds none of
  its share of the fragment), ``no_reachable_copy`` (below), and whether AutoRecovery has the ledger marked.
- ``unverified_fragments``: fragments of closed ledgers a member bookie could not be asked about, the same
  columns. Two kinds of member, told apart: ``unreachable``, registered but not answering in time (a timeout, an
  error): its copies there are unknown, not missing; ``lost``, not registered (gone from ZooKeeper's writable and
  read-only lists: the bookie_ledgers rows ``unavailable`` with bookie_tables.NOT_REGISTERED), whose copies are
  out of reach until it comes back. Both are listed here, each in its column, as "not checked" is true of both:
  a fragment with one lost member and copies left elsewhere is AutoRecovery's to mark (its auditor marks a lost
  bookie's ledgers), a warning.
- ``no_reachable_copy``: fragments with an entry no reachable bookie holds: every bookie of its write set is
  ``lost`` or answered holding none of its share (``no_copy_left`` is the case with none lost). A registered
  bookie that does not answer never makes one: it may hold its copies.
- ``single_bookie_ledgers``: ledgers whose every entry is on one bookie (the metadata names one bookie, or of the
  bookies it names, all answered and one holds every entry).
- ``open_ledgers``: each open ledger's progress (entries stored on the bookies that answered, fragments) at this
  run: the history the silent-writer check compares with.
- ``silent_writers``: open ledgers whose progress has not changed since a run at least ``silent_after`` seconds
  earlier. Entries of an open ledger only grow, so the same count then and now means no entry was added in
  between (a bookie that stopped answering changes the count: it is compared only when the same bookies
  answered). A first run, or one with no earlier run old enough, cannot tell a silent writer: it records the
  progress and reports open ledgers by age only.

Data at risk (exit 3): more under-replicated ledgers than ``max_underreplicated``, or one marked longer than
``max_underreplicated_age``; a ledger AutoRecovery gave up on (state ``unrecoverable``); a short fragment of a
ledger AutoRecovery has not marked (nothing will repair it), or one with no copy left of some entry, both as
bookies that answered show; a fragment with no reachable copy of some entry in a ledger AutoRecovery has not
marked (nothing will repair it; a marked one is left to the under-replicated limits). Unverified fragments are a
warning: a registered bookie that does not answer is never taken for a lost copy, a lost one only where no
reachable copy is left.
"""
from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import IntegerType, LongType

from bookie.client.distribution_schedule import stored_count, stores
from bookie.meta.ledger_underreplication_manager import UNRECOVERABLE
from spark_bookkeeper.audit.common import (ANSWERED, UNAVAILABLE, check_bookie_timeout, check_cluster, read_tables,
                                           record_findings, snapshot, snapshots)
from spark_bookkeeper.audit.history import Run, read_history, run_time, runs_before
from spark_bookkeeper.audit.phases import Progress
from spark_bookkeeper.audit.result import AuditResult, Finding
from spark_bookkeeper.audit.staging import AuditRun
from spark_bookkeeper.bookie_tables import NOT_REGISTERED
from spark_bookkeeper.options import BOOKIE_TIMEOUT

DEFAULT_MAX_UNDERREPLICATED = 0  # any marked ledger is at risk: raise it to ride out a recovery in progress
DEFAULT_MAX_UNDERREPLICATED_AGE = 3600  # seconds: marked longer than this is at risk whatever the count
DEFAULT_SILENT_AFTER = 3600  # seconds without a new entry before an open ledger's writer counts as silent
CLOSED = "CLOSED"
BOOKIES_NAMED = 5  # bookies a finding's line names; the report's tables have them all


def underreplicated_aged(underreplicated: DataFrame, run: Run, max_age_s: int) -> DataFrame:
    age = F.lit(run.at).cast("long") - F.col("marked_at").cast("long")
    return (underreplicated.withColumn("age_seconds", age)
            .withColumn("over_age", F.coalesce(F.col("age_seconds") > F.lit(max_age_s), F.lit(False)))
            .orderBy(F.desc("age_seconds"), "scope_id", "ledger_id"))


def fewest_copies(ensemble: list[str], write_quorum: int, short: list[str]) -> int:
    """The fewest copies any entry of a fragment has when the bookies ``short`` lack all their entries of it: the
    striping repeats every len(ensemble) entries, so those positions are all there is to look at."""
    size = len(ensemble)
    missing = [i for i, bookie in enumerate(ensemble) if bookie in set(short)]
    return min(write_quorum - sum(1 for i in missing if stores(i, e, size, write_quorum)) for e in range(size))


def _fewest_copies(*columns) -> F.Column:
    """``fewest_copies`` as a UDF of ``columns``, made when called: pyspark makes a classic or a Spark Connect
    UDF by the session in use then (one made at import, before a remote session existed, is classic's). A
    lambda: the type hints of fewest_copies are not ones Spark infers a UDF kind from."""
    return F.udf(lambda ensemble, wq, short: fewest_copies(ensemble, wq, short), IntegerType())(*columns)


def _stored_count(*columns) -> F.Column:
    """``stored_count`` (how many of a fragment's entries a member stores) as a UDF of ``columns``, made when
    called (as ``_fewest_copies``)."""
    return F.udf(lambda member, first, last, size, wq: stored_count(member, first, last, size, wq),
                 LongType())(*columns)


def _closed_fragments(fragments: DataFrame, ledgers: DataFrame) -> DataFrame:
    """The fragments of closed ledgers that hold entries, with the ledger's write quorum."""
    closed = ledgers.where(F.col("state") == CLOSED).select("scope_id", "ledger_id", "write_quorum")
    return fragments.where(F.col("last_entry_id") >= F.col("first_entry_id")) \
        .join(closed, ["scope_id", "ledger_id"]) \
        .select("scope_id", "ledger_id", "fragment", "first_entry_id", "last_entry_id", "ensemble", "write_quorum")


def _lacking(bookie_ledgers: DataFrame) -> DataFrame:
    """One row per fragment an answering bookie lacks entries of (scope_id, ledger_id, bookie_id, fragment)."""
    return bookie_ledgers.where(F.col("status").isin(*ANSWERED) & (F.size("short_fragments") > 0)) \
        .select("scope_id", "ledger_id", "bookie_id", "missing_entries", F.explode("short_fragments").alias("fragment"))


def holding_none(bookie_ledgers: DataFrame, frags: DataFrame) -> DataFrame:
    """(scope_id, ledger_id, bookie_id) of the answering bookies that hold none of the entries the striping gives
    them in each fragment they lack entries of: what they miss is all of those fragments' share. Of a bookie
    that misses only some, which ones is not known here (``bookie_ledgers`` counts them)."""
    member = (F.array_position("ensemble", F.col("bookie_id")) - 1).cast("int")
    share = _stored_count(member, "first_entry_id", "last_entry_id", F.size("ensemble"), "write_quorum")
    return (_lacking(bookie_ledgers).join(frags, ["scope_id", "ledger_id", "fragment"])
            .groupBy("scope_id", "ledger_id", "bookie_id")
            .agg(F.sum(share).alias("share"), F.first("missing_entries").alias("missing"))
            .where(F.col("missing") == F.col("share")).select("scope_id", "ledger_id", "bookie_id"))


def checked_fragments(fragments: DataFrame, ledgers: DataFrame, bookie_ledgers: DataFrame,
                      underreplicated: DataFrame) -> DataFrame:
    """Each fragment of a closed ledger with a member that answered lacking entries, or that could not be asked
    (``unavailable``): those bookies (``lacking``; ``unreachable``, registered but not answering; ``lost``, not
    registered); ``min_copies``, the fewest copies an entry can have, each of them counted as holding none of
    the fragment; ``no_copy_left``, proven by bookies that answered: an entry every bookie of whose write set
    answered and holds none of its share; ``no_reachable_copy``, an entry every bookie of whose write set is
    lost or answered holding none of its share; and whether AutoRecovery has the ledger marked."""
    frags = _closed_fragments(fragments, ledgers)
    lacking = _lacking(bookie_ledgers).select("scope_id", "ledger_id", "bookie_id", "fragment",
                                              F.lit("lacking").alias("why"))
    # Not registered is evidence (the bookie is gone, as BookKeeper's Auditor takes it); any other failure to
    # answer (a timeout, an error) is not: the bookie may well hold its copies.
    down = bookie_ledgers.where(F.col("status") == UNAVAILABLE).select(
        "scope_id", "ledger_id", "bookie_id",
        F.when(F.col("error") == NOT_REGISTERED, F.lit("lost")).otherwise(F.lit("unreachable")).alias("why"))
    absent = down.join(frags.select("scope_id", "ledger_id", "fragment", "ensemble"), ["scope_id", "ledger_id"]) \
        .where(F.array_contains("ensemble", F.col("bookie_id"))) \
        .select("scope_id", "ledger_id", "bookie_id", "fragment", "why")
    empty = holding_none(bookie_ledgers, frags).withColumn("holds_none", F.lit(True))
    members = lacking.unionByName(absent).join(empty, ["scope_id", "ledger_id", "bookie_id"], "left")

    def bookies(condition: F.Column) -> F.Column:
        return F.array_sort(F.collect_set(F.when(condition, F.col("bookie_id"))))

    is_lacking = F.col("why") == "lacking"
    checks = members.groupBy("scope_id", "ledger_id", "fragment").agg(
        bookies(is_lacking).alias("lacking"), bookies(F.col("why") == "unreachable").alias("unreachable"),
        bookies(F.col("why") == "lost").alias("lost"),
        bookies(is_lacking & F.coalesce(F.col("holds_none"), F.lit(False))).alias("holding_none"))
    marked = underreplicated.select("scope_id", "ledger_id", F.lit(True).alias("marked"))
    out = checks.join(frags, ["scope_id", "ledger_id", "fragment"]).join(marked, ["scope_id", "ledger_id"], "left")

    def none_left(gone: F.Column) -> F.Column:
        """Some entry of the fragment has every bookie of its write set in ``gone``."""
        return _fewest_copies("ensemble", "write_quorum", gone) <= 0

    return (out.select("scope_id", "ledger_id", "fragment", "first_entry_id", "last_entry_id", "ensemble",
                       "write_quorum", "lacking", "unreachable", "lost",
                       _fewest_copies("ensemble", "write_quorum",
                                      F.concat("lacking", "unreachable", "lost")).alias("min_copies"),
                       none_left(F.col("holding_none")).alias("no_copy_left"),
                       none_left(F.concat("holding_none", "lost")).alias("no_reachable_copy"),
                       F.coalesce(F.col("marked"), F.lit(False)).alias("under_replicated"))
            .orderBy("scope_id", "ledger_id", "fragment"))


def short_fragments(checked: DataFrame) -> DataFrame:
    """Fragments with fewer copies than the write quorum, as bookies that answered prove it: a member lacks
    entries (``checked_fragments``' rows with a bookie lacking)."""
    return checked.where(F.size("lacking") > 0)


def unverified_fragments(checked: DataFrame) -> DataFrame:
    """Fragments whose copies could not all be checked: a member did not answer, or is not registered
    (``checked_fragments``' rows with a bookie unreachable or lost). Unknown is not missing: a slow or
    restarting bookie has not lost its copies; a lost one's ledgers are AutoRecovery's to mark."""
    return checked.where((F.size("unreachable") > 0) | (F.size("lost") > 0))


def no_reachable_copy(checked: DataFrame) -> DataFrame:
    """Fragments with an entry no reachable bookie holds: each bookie of its write set lost (not registered) or
    answered holding none of its share (``checked_fragments``' rows with ``no_reachable_copy``)."""
    return checked.where(F.col("no_reachable_copy"))


def _named(ledgers: DataFrame, bookie_ledgers: DataFrame) -> DataFrame:
    """bookie_ledgers rows of the bookies a ledger's metadata names (not copies left on others), with the
    ledger's state, last entry and bookies."""
    meta = ledgers.select("scope_id", "ledger_id", "state", "last_entry_id", "bookies")
    return bookie_ledgers.join(meta, ["scope_id", "ledger_id"]).where(F.array_contains("bookies", F.col("bookie_id")))


def single_bookie_ledgers(ledgers: DataFrame, bookie_ledgers: DataFrame) -> DataFrame:
    """Ledgers with every entry on one bookie: by the metadata (one bookie named), or by what the bookies hold (all
    the named bookies answered and one of them holds every entry)."""
    named = _named(ledgers, bookie_ledgers).groupBy("scope_id", "ledger_id").agg(
        F.sum(F.col("status").isin(*ANSWERED).cast("int")).alias("answered"),
        F.collect_list(F.when(F.coalesce(F.col("entries"), F.lit(0)) > 0, F.col("bookie_id"))).alias("holders"))
    led = ledgers.select("scope_id", "ledger_id", "state", "last_entry_id", "bookies")
    joined = led.join(named, ["scope_id", "ledger_id"], "left")
    by_metadata = F.size("bookies") == 1
    by_holdings = (F.col("last_entry_id") >= 0) & (F.col("answered") == F.size("bookies")) & (F.size("holders") == 1)
    return (joined.where(by_metadata | F.coalesce(by_holdings, F.lit(False)))
            .select("scope_id", "ledger_id", "state",
                    F.when(by_metadata, F.col("bookies")[0]).otherwise(F.col("holders")[0]).alias("bookie"),
                    F.when(by_metadata, F.lit("metadata")).otherwise(F.lit("holdings")).alias("basis"),
                    F.size("bookies").alias("named_bookies"))
            .orderBy("scope_id", "ledger_id"))


def open_ledgers(ledgers: DataFrame, bookie_ledgers: DataFrame, run: Run) -> DataFrame:
    """Each open ledger's progress at this run: entries stored on the named bookies that answered, which
    answered, its fragments, and its age."""
    progress = _named(ledgers, bookie_ledgers).groupBy("scope_id", "ledger_id").agg(
        F.sum(F.when(F.col("status").isin(*ANSWERED), F.coalesce(F.col("entries"), F.lit(0)))).alias("stored_entries"),
        F.array_sort(F.collect_list(F.when(F.col("status").isin(*ANSWERED), F.col("bookie_id")))).alias("answering"))
    opened = ledgers.where(F.col("state") != CLOSED).select("scope_id", "ledger_id", "state", "ctime", "fragments")
    return (opened.join(progress, ["scope_id", "ledger_id"], "left")
            .select("scope_id", "ledger_id", "state", "ctime", "fragments",
                    F.coalesce(F.col("stored_entries"), F.lit(0)).alias("stored_entries"),
                    F.coalesce(F.col("answering"), F.array().cast("array<string>")).alias("answering"),
                    (F.lit(run.at).cast("long") - F.col("ctime").cast("long")).alias("age_seconds"),
                    F.lit(run.at).alias("observed_at"))
            .orderBy(F.desc("age_seconds")))


def silent_writers(current: DataFrame, baseline: DataFrame | None, run: Run) -> DataFrame:
    """Open ledgers with the same progress now as in ``baseline`` (an earlier run's ``open_ledgers``)."""
    cols = "scope_id long, ledger_id long, stored_entries long, fragments int, unchanged_since timestamp, " \
           "silent_seconds long"
    if baseline is None:
        return current.sparkSession.createDataFrame([], cols)
    then = baseline.select("scope_id", "ledger_id", F.col("stored_entries").alias("then_entries"),
                           F.col("fragments").alias("then_fragments"), F.col("answering").alias("then_answering"),
                           F.col("observed_at").alias("unchanged_since"))
    same = (F.col("stored_entries") == F.col("then_entries")) & (F.col("fragments") == F.col("then_fragments")) \
        & (F.col("answering") == F.col("then_answering"))
    return (current.join(then, ["scope_id", "ledger_id"]).where(same)
            .select("scope_id", "ledger_id", "stored_entries", "fragments", "unchanged_since",
                    (F.lit(run.at).cast("long") - F.col("unchanged_since").cast("long")).alias("silent_seconds"))
            .orderBy(F.desc("silent_seconds"), "scope_id", "ledger_id"))


def bookies_in_part(bookie_ledgers: DataFrame) -> DataFrame:
    """The bookies whose ``bookie_ledgers`` rows are not all "ok": a stock BookKeeper bookie ("partial": its
    entries are counted, its garbage-collection state is not available) or one that did not answer
    ("unavailable"); per bookie and status, the ledgers it was asked about and what was missing."""
    return (bookie_ledgers.where(F.col("status") != "ok").groupBy("bookie_id", "status")
            .agg(F.count(F.lit(1)).alias("ledgers"), F.max("error").alias("error")).orderBy("bookie_id", "status"))


def baseline_run(spark, output: str, run: Run, silent_after_s: int) -> str | None:
    """The latest earlier run of ``open_ledgers`` at least ``silent_after_s`` before ``run`` (None: none yet)."""
    cutoff = run.at - dt.timedelta(seconds=silent_after_s)
    old_enough = [r for r in runs_before(spark, output, "open_ledgers", run) if run_time(r) <= cutoff]
    return old_enough[-1] if old_enough else None


READ = ("underreplicated", "ledgers", "fragments", "bookie_ledgers")  # the tables of format("bookkeeper") read


def named_bookies(bookies: list[str]) -> str:
    """``bookies`` for a finding's line: the first ``BOOKIES_NAMED`` of them, and how many more."""
    more = len(bookies) - BOOKIES_NAMED
    return ", ".join(bookies[:BOOKIES_NAMED]) + (f" and {more} more" if more > 0 else "")


def _all(column: str) -> F.Column:
    """The bookies of the array ``column`` over every row, sorted, each once."""
    return F.array_sort(F.array_distinct(F.flatten(F.collect_list(column))))


def unverified_summary(unverified: DataFrame) -> str:
    """The ``unverified_fragments`` finding in one line: which bookies did not answer, which are not registered,
    and how many fragments have an entry no bookie that answered is known to hold."""
    got = unverified.agg(F.countDistinct("scope_id", "ledger_id").alias("ledgers"),
                         F.sum((F.col("min_copies") <= 0).cast("int")).alias("unchecked"),
                         _all("unreachable").alias("unreachable"), _all("lost").alias("lost")).first()
    who = "; ".join(f"{what}: {named_bookies(bookies)}" for what, bookies in (
        ("not answering", got.unreachable or []), ("not registered, lost", got.lost or [])) if bookies)
    return (f"fragments whose copies could not all be checked, in {got.ledgers} ledgers"
            + (f" ({who})" if who else "")
            + f": {got.unchecked or 0} with an entry no bookie that answered is known to hold; unknown, not "
            "missing: a bookie that does not answer has not lost its copies, a lost one's ledgers are "
            "AutoRecovery's to mark (an entry a lost bookie leaves with no reachable copy: no_reachable_copy)")


def no_reachable_copy_finding(no_reachable: DataFrame) -> Finding:
    """The ``no_reachable_copy`` finding: at risk when a fragment with no reachable copy of an entry is in a
    ledger AutoRecovery has not marked (nothing will repair it); the line names the lost bookies."""
    got = no_reachable.agg(F.count(F.lit(1)).alias("n"), F.countDistinct("scope_id", "ledger_id").alias("ledgers"),
                           F.sum((~F.col("under_replicated")).cast("int")).alias("unmarked"),
                           _all("lost").alias("lost")).first()
    unmarked, lost = got.unmarked or 0, got.lost or []
    return Finding("no_reachable_copy", got.n, unmarked > 0,
                   f"fragments with an entry no reachable bookie holds (every bookie of its write set not registered "
                   f"or answered without its share), in {got.ledgers} ledgers"
                   + (f" (lost: {named_bookies(lost)})" if lost else "")
                   + f": {unmarked} of them in ledgers AutoRecovery has not marked (nothing will repair them); "
                   "marked ones are left to the under-replicated limits")


def replication_findings(aged: DataFrame, short: DataFrame, unverified: DataFrame, no_reachable: DataFrame,
                         single: DataFrame, opened: DataFrame, silent: DataFrame, base: str | None,
                         thresholds: dict[str, int]) -> list[Finding]:
    """The findings (``no_reachable``: the ``no_reachable_copy`` fragments); ``thresholds``:
    max_underreplicated, max_underreplicated_age, silent_after."""
    max_count, max_age = thresholds["max_underreplicated"], thresholds["max_underreplicated_age"]
    silent_after = thresholds["silent_after"]
    counts = aged.agg(F.count(F.lit(1)).alias("n"), F.sum(F.col("over_age").cast("int")).alias("old"),
                      F.sum((F.col("state") == UNRECOVERABLE).cast("int")).alias("lost")).first()
    n_ur, n_old, n_lost = counts.n, counts.old or 0, counts.lost or 0
    shorts = short.agg(F.count(F.lit(1)).alias("n"), F.sum((~F.col("under_replicated")).cast("int")).alias("unmarked"),
                       F.sum(F.col("no_copy_left").cast("int")).alias("none_left"),
                       F.countDistinct("scope_id", "ledger_id").alias("ledgers")).first()
    return [
        Finding("underreplicated_aged", n_ur, n_ur > max_count or n_old > 0,
                f"under-replicated ledgers ({n_old} marked longer than {max_age} s; at risk above "
                f"{max_count} or past that age)"),
        Finding("unrecoverable", n_lost, True, "ledgers AutoRecovery gave up on (state unrecoverable)"),
        Finding("short_fragments", shorts.n, (shorts.unmarked or 0) > 0 or (shorts.none_left or 0) > 0,
                f"fragments with fewer copies than the write quorum, as bookies that answered show, in "
                f"{shorts.ledgers} ledgers: {shorts.unmarked or 0} of them in ledgers AutoRecovery has not marked, "
                f"{shorts.none_left or 0} with an entry every bookie of its write set answered without"),
        no_reachable_copy_finding(no_reachable),
        Finding("unverified_fragments", unverified.count(), False, unverified_summary(unverified)),
        Finding("single_bookie_ledgers", single.count(), False, "ledgers with every entry on one bookie"),
        Finding("silent_writers", silent.count(), False,
                f"open ledgers without a new entry for at least {silent_after} s"
                + (f" (compared with run {base})" if base else
                   f" (no earlier run {silent_after} s old or more: not judged this run; {opened.count()} open "
                   "ledgers recorded)")),
    ]


def run_replication_audit(spark, uri: str, output_dir: str, run: Run | None = None,
                          max_underreplicated: int = DEFAULT_MAX_UNDERREPLICATED,
                          max_underreplicated_age: int = DEFAULT_MAX_UNDERREPLICATED_AGE,
                          silent_after: int = DEFAULT_SILENT_AFTER, report_dir: str | None = None,
                          progress: Progress | None = None,
                          bookie_timeout: float = BOOKIE_TIMEOUT) -> AuditResult:
    """Run the replication audit of the cluster at ``uri``; tables under ``output_dir``, report next to them,
    both published when the run is done (staging.py); ``progress`` gets one line per phase. An interrupted or
    failed run raises RunAborted, having kept nothing."""
    from spark_bookkeeper.audit.report import write_replication_report
    thresholds = dict(max_underreplicated=max_underreplicated, max_underreplicated_age=max_underreplicated_age,
                      silent_after=silent_after)
    for name, value in thresholds.items():
        if value < 0:
            raise ValueError(f"{name.replace('_', ' ').replace('underreplicated', 'under-replicated')} {value} "
                             "must be 0 or more")
    check_bookie_timeout(bookie_timeout)
    check_cluster(uri)
    run = run or Run.now()
    with AuditRun(spark, "replication", output_dir, run, report_dir, READ, progress) as audit:
        audit.phases.start("history")
        base = baseline_run(spark, output_dir, run, silent_after)
        baseline = None
        if base is not None:
            baseline = read_history(spark, output_dir, "open_ledgers").where(F.col("run").cast("string") == base)
        audit.phases.start("tables")
        ur, ledgers, fragments, bookie_ledgers = snapshots(audit.tables, read_tables(spark, uri, READ, bookie_timeout))
        audit.phases.start("findings")
        checked = checked_fragments(fragments, ledgers, bookie_ledgers, ur)
        aged, short, unverified, no_reachable, single, opened = snapshots(audit.tables, {
            "underreplicated_aged": underreplicated_aged(ur, run, max_underreplicated_age),
            "short_fragments": short_fragments(checked),
            "unverified_fragments": unverified_fragments(checked),
            "no_reachable_copy": no_reachable_copy(checked),
            "single_bookie_ledgers": single_bookie_ledgers(ledgers, bookie_ledgers),
            "open_ledgers": open_ledgers(ledgers, bookie_ledgers, run)})
        silent = snapshot(audit.tables, silent_writers(opened, baseline, run), "silent_writers")
        audit.result.findings = replication_findings(aged, short, unverified, no_reachable, single, opened, silent,
                                                     base, thresholds)
        findings = record_findings(audit.tables, audit.result)
        audit.phases.start("report")
        write_replication_report(audit.result, audit.report.open(), findings, aged, short, unverified,
                                 no_reachable, single, opened, silent, base, bookies_in_part(bookie_ledgers))
        return audit.publish()
