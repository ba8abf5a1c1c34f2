"""The audits' reports: one Markdown file a person reads at a glance (the verdict first, then the findings,
then the detail), with PNG plots next to it (plots.py).

Written on the driver's filesystem, to the run's staging directory (staging.py), and moved into place with the
run's tables: under ``OUTPUT/reports/<audit>/date=…/run=…/`` when the output is a local path, else in
``report_dir`` (required then: matplotlib and Markdown files are not written to HDFS or S3 here).
"""
from __future__ import annotations

import datetime as dt
import os

from bookie.util.human import human_bytes
from spark_bookkeeper.audit import plots
from spark_bookkeeper.audit.result import AuditResult
from spark_bookkeeper.audit.staging import REPORT_NAME
from spark_bookkeeper.audit.threads import side_by_side

DETAIL_ROWS = 20  # rows of each detail table in the report; the Parquet tables have them all


def human(n) -> str:
    """A byte count as the report's tables show it (bookie/util/human.py), "–" for none."""
    return "–" if n is None else human_bytes(int(n))


def table(rows: list, columns: list[tuple[str, object]], total: int | None = None) -> str:
    """A Markdown table of ``rows`` (Spark Rows): ``columns`` are (header, field name or function of a row)."""
    if not rows:
        return "_none_\n"
    out = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = [(get(row) if callable(get) else row[get]) for _, get in columns]
        out.append("| " + " | ".join("–" if c is None else str(c).replace("|", "\\|") for c in cells) + " |")
    if total is not None and total > len(rows):
        out.append(f"\n_{len(rows)} of {total} shown; all are in the Parquet table._")
    return "\n".join(out) + "\n"


def verdict(result: AuditResult) -> list[str]:
    head = (f"**DATA AT RISK** (exit code {result.exit_code})" if result.at_risk
            else f"Nothing at risk (exit code {result.exit_code})")
    lines = [f"# {result.audit.capitalize()} audit, {result.run.at:%Y-%m-%d %H:%M:%S} UTC", "", head, "",
             "| finding | count | at risk | what |", "|---|---|---|---|"]
    for f in result.findings:
        risk = "**yes**" if f.at_risk and f.count else ("if any" if f.at_risk else "no")
        lines.append(f"| {f.kind} | {f.count} | {risk} | {f.summary} |")
    lines += ["", "Tables (Parquet): " + ", ".join(f"`{t}`" for t in sorted(result.tables)), ""]
    return lines


def _history_rows(findings) -> list:
    """Every run's findings (kind, count, run_at), oldest first."""
    return findings.orderBy("run_at").collect()


def _history(rows: list, directory: str) -> list[str]:
    lines = _image(plots.save(plots.findings_history(rows), directory, "findings_history.png"), "findings per run")
    if len({r.run_at for r in rows}) < 2:
        lines += ["_First run: the runs after it add to this plot._", ""]
    return lines


def _image(name: str, alt: str) -> list[str]:
    return [f"![{alt}]({name})", ""]


def _utc(t) -> str:
    """A timestamp as Spark hands it back (naive, the session's local time) in UTC, "–" for none."""
    return "–" if t is None else f"{t.astimezone(dt.timezone.utc):%Y-%m-%d %H:%M:%S}"


def _storage_details(got: dict) -> list[str]:
    """The storage report's tables of orphans, copies of ledgers the metadata lacks and skipped logs."""
    lines = ["## Orphans: bookies named without the entries", ""]
    lines.append(table(got["orphans"], [
        ("bookie", "bookie_id"), ("scope", "scope_id"), ("ledger", "ledger_id"), ("entries", "entries"),
        ("expected", "expected_entries")], got["orphan_count"]))
    lines += ["## Ledgers the metadata lacks, still on disk (reclaimable)", "",
              "_Not data at risk: GC removes a deleted ledger at its next pass, compaction or the removal of its "
              "logs gives the bytes back. Times in UTC; the age counts from the first run that found the copy "
              "without metadata._", ""]
    lines.append(table(got["deleted"], [
        ("bookie", "bookie_id"), ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"),
        ("bytes", lambda r: human(r.bytes)), ("in the metadata at", lambda r: _utc(r.last_in_metadata)),
        ("without metadata since", lambda r: _utc(r.without_metadata_since)), ("age (s)", "age_seconds"),
        ("GC saw it deleted at pass", "deleted_at_pass"), ("GC passes since", "passes_since"), ("stale", "stale")],
        got["deleted_count"]))
    lines += ["## Entry logs GC skipped as corrupt", ""]
    lines.append(table(got["skipped"], [
        ("bookie", "bookie_id"), ("log", "entry_log_id"), ("size", lambda r: human(r.total_bytes)),
        ("reason", "reason")], got["skipped_count"]))
    return lines


def write_storage_report(result: AuditResult, directory: str, findings, space, owners, deleted, orphans, skipped,
                         entrylogs) -> str:
    """The storage report and its plots, written to ``directory``; the report's path."""
    got = side_by_side({
        "bookies": space.collect, "owners": owners.collect,
        "usage": entrylogs.where("status = 'ok' and not being_written")
        .select("usage", "minor_compaction_candidate", "major_compaction_candidate").collect,
        "orphans": orphans.limit(DETAIL_ROWS).collect, "orphan_count": orphans.count,
        "deleted": deleted.orderBy("stale", "age_seconds", "passes_since", ascending=False).limit(DETAIL_ROWS).collect,
        "deleted_count": deleted.count, "skipped": skipped.limit(DETAIL_ROWS).collect,
        "skipped_count": skipped.count, "history": lambda: _history_rows(findings)})
    bookies, owner_rows = got["bookies"], got["owners"]
    disk = plots.save(plots.disk_per_bookie(bookies), directory, "disk_per_bookie.png")
    by_owner = plots.save(plots.space_by_owner(owner_rows), directory, "space_by_owner.png")
    usage_plot = plots.save(plots.entry_log_usage(got["usage"]), directory, "entry_log_usage.png")

    lines = verdict(result)
    lines += ["## Disk per bookie", ""] + _image(disk, "live vs garbage per bookie")
    lines.append(table(bookies, [
        ("bookie", "bookie_id"), ("status", lambda r: r.status if r.status == "ok" else f"{r.status}: {r.error}"),
        ("logs", "entry_logs"), ("total", lambda r: human(r.total_bytes)), ("live", lambda r: human(r.live_bytes)),
        ("garbage", lambda r: human(r.garbage_bytes)),
        ("next minor reclaims", lambda r: human(r.minor_reclaimable_bytes)),
        ("next major reclaims", lambda r: human(r.major_reclaimable_bytes)),
        ("skipped logs", "skipped_logs")]))
    lines += _image(usage_plot, "entry log usage")
    lines += _storage_details(got)
    lines += ["## Space by owner", ""] + _image(by_owner, "space by owner")
    lines.append(table(owner_rows[:DETAIL_ROWS], [
        ("owner", "owner"), ("ledgers", "ledgers"), ("logical", lambda r: human(r.logical_bytes)),
        ("stored", lambda r: human(r.stored_bytes))], len(owner_rows)))
    lines += ["## History", ""] + _history(got["history"], directory)
    return _write(directory, lines)


def _replication_details(got: dict, baseline: str | None, open_count: int) -> list[str]:
    """The replication report's tables of fragments with no reachable copy, short and unverified fragments,
    single-bookie ledgers and silent writers."""
    fragment = [("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("fragment", "fragment"),
                ("entries", lambda r: f"{r.first_entry_id}..{r.last_entry_id}"), ("write quorum", "write_quorum"),
                ("lacking", lambda r: ", ".join(r.lacking)), ("unreachable", lambda r: ", ".join(r.unreachable)),
                ("lost", lambda r: ", ".join(r.lost)), ("min copies", "min_copies")]
    lines = ["## Fragments with no reachable copy of an entry", "",
             "_Every bookie of the entry's write set is lost (not registered) or answered without its share. At "
             "risk in a ledger AutoRecovery has not marked: nothing will repair it. A lost bookie that comes back "
             "with its disk brings its copies back._", ""]
    lines.append(table(got["no_reachable"], fragment + [("marked", "under_replicated")], got["no_reachable_count"]))
    lines += ["## Fragments with fewer copies than the write quorum", ""]
    lines.append(table(got["short"], fragment + [("no copy left", "no_copy_left"), ("marked", "under_replicated")],
                       got["short_count"]))
    lines += ["## Fragments not verified: a bookie did not answer or is not registered", "",
              "_Unknown, not missing: a member that did not answer (unreachable) may well hold its entries (see the "
              "bookies above); a lost one's ledgers are AutoRecovery's to mark. Not data at risk by themselves (an "
              "entry left with no reachable copy is in the first table); a run with every member answering "
              "tells._", ""]
    lines.append(table(got["unverified"], fragment + [("marked", "under_replicated")], got["unverified_count"]))
    lines += ["## Ledgers entirely on one bookie", ""]
    lines.append(table(got["single"], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("state", "state"), ("bookie", "bookie"),
        ("by", "basis")], got["single_count"]))
    lines += ["## Silent writers", ""]
    if baseline is None:
        lines += [f"_No earlier run old enough to compare with: this run recorded {open_count} open ledgers; a "
                  "run at least the silence threshold later can tell which writers went quiet._", ""]
    else:
        lines.append(table(got["silent"], [
            ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("entries stored", "stored_entries"),
            ("unchanged since", "unchanged_since"), ("silent for at least (s)", "silent_seconds")],
            got["silent_count"]))
    return lines


def write_replication_report(result: AuditResult, directory: str, findings, aged, short, unverified, no_reachable,
                             single, opened, silent, baseline: str | None, partial) -> str:
    """The replication report and its plots, written to ``directory``; the report's path."""
    got = side_by_side({
        "underreplicated": aged.collect, "open": opened.collect, "partial": partial.collect,
        "no_reachable": no_reachable.limit(DETAIL_ROWS).collect, "no_reachable_count": no_reachable.count,
        "short": short.limit(DETAIL_ROWS).collect, "short_count": short.count,
        "unverified": unverified.limit(DETAIL_ROWS).collect, "unverified_count": unverified.count,
        "single": single.limit(DETAIL_ROWS).collect, "single_count": single.count,
        "silent": silent.limit(DETAIL_ROWS).collect, "silent_count": silent.count,
        "history": lambda: _history_rows(findings)})
    ur_rows, open_rows = got["underreplicated"], got["open"]
    ur_plot = plots.save(plots.underreplicated(ur_rows), directory, "underreplicated.png")
    open_plot = plots.save(plots.open_ledger_ages(open_rows), directory, "open_ledgers.png")

    lines = verdict(result)
    # What this run could not see: a stock BookKeeper bookie lists its entries but has no GC state.
    lines += ["## Bookies that answered in part or not at all", ""]
    lines.append(table(got["partial"], [
        ("bookie", "bookie_id"), ("status", "status"), ("ledgers", "ledgers"), ("not available", "error")]))
    lines += ["## Under-replicated ledgers", ""] + _image(ur_plot, "under-replicated ledgers")
    lines.append(table(ur_rows[:DETAIL_ROWS], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("missing", lambda r: ", ".join(r.missing_replicas)),
        ("state", "state"), ("reason", "reason"), ("age (s)", "age_seconds"), ("over age", "over_age"),
        ("worker", "worker")], len(ur_rows)))
    lines += _replication_details(got, baseline, len(open_rows))
    lines += ["## Open ledgers", ""] + _image(open_plot, "open ledgers by age")
    lines.append(table(open_rows[:DETAIL_ROWS], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("age (s)", "age_seconds"),
        ("entries stored", "stored_entries"), ("fragments", "fragments")], len(open_rows)))
    lines += ["## History", ""] + _history(got["history"], directory)
    return _write(directory, lines)


def _write(directory: str, lines: list[str]) -> str:
    path = os.path.join(directory, REPORT_NAME)
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
