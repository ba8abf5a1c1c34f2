"""The audits' reports: one Markdown file a person reads at a glance (the verdict first, then the findings,
then the detail), with matplotlib PNG plots next to it.

Written on the driver's filesystem: under ``OUTPUT/reports/<audit>/date=…/run=…/`` when the output is a local
path, else in ``report_dir`` (required then: matplotlib and Markdown files are not written to HDFS or S3 here).
Plots are matplotlib Figures drawn without pyplot: they render to PNG on a host without a display, and the
audit never changes the process's matplotlib backend (a notebook that runs it keeps drawing inline).
"""
from __future__ import annotations

import os

# Figures drawn without pyplot: they render to PNG on a host without a display, and the audit never changes
# the process's matplotlib backend (a notebook that runs it keeps drawing inline).
from matplotlib.figure import Figure

from spark_bookkeeper.audit.common import side_by_side
from spark_bookkeeper.audit.result import AuditResult

DETAIL_ROWS = 20  # rows of each detail table in the report; the Parquet tables have them all


def report_directory(result: AuditResult, output_dir: str, report_dir: str | None) -> str:
    if report_dir is None:
        if "://" in output_dir and not output_dir.startswith("file://"):
            raise ValueError(f"output {output_dir} is not a local path: give a local report directory "
                             "(--report-dir) for the Markdown report and its plots")
        base = output_dir[len("file://"):] if output_dir.startswith("file://") else output_dir
        report_dir = os.path.join(base, "reports", result.audit, f"date={result.run.date}", f"run={result.run.run_id}")
    os.makedirs(report_dir, exist_ok=True)
    return report_dir


def human(n) -> str:
    if n is None:
        return "–"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def scale(values: list[float]) -> tuple[float, str]:
    """The unit plots of these byte counts read best in: (divisor, name)."""
    top = max(values, default=0)
    for divisor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if top >= divisor:
            return divisor, unit
    return 1, "bytes"


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


def _subplots(*grid: int, figsize: tuple[float, float]):
    """(figure, axes) as pyplot.subplots gives them, without pyplot's global state."""
    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid)


def _save(fig, directory: str, name: str) -> str:
    fig.tight_layout()
    fig.savefig(os.path.join(directory, name), dpi=90)
    return name


def _history_rows(findings) -> list:
    """Every run's findings (the ``findings_<audit>`` table), oldest first."""
    return findings.select("kind", "count", "run_at").orderBy("run_at").collect() if findings is not None else []


def plot_findings_history(rows: list, directory: str) -> str | None:
    """Counts of each finding per run (``_history_rows``); None before a second run."""
    if len({r.run_at for r in rows}) < 2:
        return None
    fig, ax = _subplots(figsize=(8, 3.5))
    for kind in sorted({r.kind for r in rows}):
        points = [(r.run_at, r["count"]) for r in rows if r.kind == kind]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=kind)
    ax.set_title("Findings per run")
    ax.set_ylabel("count")
    ax.legend(fontsize="small")
    fig.autofmt_xdate()
    return _save(fig, directory, "findings_history.png")


def histogram(values: list[float], xlabel: str, ylabel: str, title: str, directory: str, name: str,
              value_range: tuple[float, float] | None = None) -> str:
    fig, ax = _subplots(figsize=(8, 3))
    ax.hist(values, bins=20, range=value_range)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return _save(fig, directory, name)


def _image(name: str | None, alt: str) -> list[str]:
    return [f"![{alt}]({name})", ""] if name else []


def write_storage_report(result: AuditResult, output_dir: str, report_dir: str | None, findings, space, owners,
                         deleted, orphans, skipped, entrylogs) -> str:
    directory = report_directory(result, output_dir, report_dir)
    got = side_by_side({
        "bookies": space.collect, "owners": owners.collect,
        "usage": entrylogs.where("status = 'ok' and not being_written").select("usage").collect,
        "orphans": orphans.limit(DETAIL_ROWS).collect, "orphan_count": orphans.count,
        "deleted": deleted.orderBy("stale", "passes_since", ascending=False).limit(DETAIL_ROWS).collect,
        "deleted_count": deleted.count, "skipped": skipped.limit(DETAIL_ROWS).collect,
        "skipped_count": skipped.count, "history": lambda: _history_rows(findings)})
    bookies, owner_rows = got["bookies"], got["owners"]

    answered = [b for b in bookies if b.status == "ok"]
    fig, ax = _subplots(figsize=(8, 0.5 * max(3, len(bookies)) + 1))
    names = [b.bookie_id for b in answered]
    divisor, unit = scale([(b.total_bytes or 0) for b in answered])
    live = [(b.live_bytes or 0) / divisor for b in answered]
    garbage = [(b.garbage_bytes or 0) / divisor for b in answered]
    ax.barh(names, live, label="live")
    ax.barh(names, garbage, left=live, label="garbage")
    ax.scatter([lv + (b.garbage_bytes - b.major_reclaimable_bytes) / divisor for lv, b in zip(live, answered)],
               names, marker="|", s=300, color="black", label="left after the next major compaction")
    ax.set_xlabel(unit)
    ax.set_title("Entry logs per bookie: live vs garbage")
    ax.legend(fontsize="small")
    disk = _save(fig, directory, "disk_per_bookie.png")

    top = owner_rows[:10]
    fig, ax = _subplots(figsize=(8, 0.45 * max(3, len(top)) + 1))
    divisor, unit = scale([(o.stored_bytes or 0) for o in top])
    ax.barh([o.owner for o in top][::-1], [(o.stored_bytes or 0) / divisor for o in top][::-1])
    ax.set_xlabel(f"{unit} stored (all replicas)")
    ax.set_title("Space by owner")
    by_owner = _save(fig, directory, "space_by_owner.png")

    usage = [r.usage for r in got["usage"]]
    usage_plot = histogram(usage, "usage (live / total) of finished entry logs", "logs",
                           "Entry log usage: compaction takes the logs left of its threshold", directory,
                           "entry_log_usage.png", (0, 1))

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
    lines += ["## Orphans", ""]
    lines.append(table(got["orphans"], [
        ("kind", "kind"), ("bookie", "bookie_id"), ("scope", "scope_id"), ("ledger", "ledger_id"),
        ("bytes", lambda r: human(r.bytes)), ("entries", "entries"), ("expected", "expected_entries")],
        got["orphan_count"]))
    lines += ["## Deleted ledgers still on disk", ""]
    lines.append(table(got["deleted"], [
        ("bookie", "bookie_id"), ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"),
        ("bytes", lambda r: human(r.bytes)),
        ("GC saw it deleted at pass", "deleted_at_pass"), ("passes since", "passes_since"), ("stale", "stale")],
        got["deleted_count"]))
    lines += ["## Entry logs GC skipped as corrupt", ""]
    lines.append(table(got["skipped"], [
        ("bookie", "bookie_id"), ("log", "entry_log_id"), ("size", lambda r: human(r.total_bytes)),
        ("reason", "reason")], got["skipped_count"]))
    lines += ["## Space by owner", ""] + _image(by_owner, "space by owner")
    lines.append(table(owner_rows[:DETAIL_ROWS], [
        ("owner", "owner"), ("ledgers", "ledgers"), ("logical", lambda r: human(r.logical_bytes)),
        ("stored", lambda r: human(r.stored_bytes))], len(owner_rows)))
    lines += ["## History", ""] + (_image(plot_findings_history(got["history"], directory), "findings per run")
                                   or ["_first run: nothing to compare with yet_", ""])
    return _write(directory, lines)


def write_replication_report(result: AuditResult, output_dir: str, report_dir: str | None, findings, aged, short,
                             single, opened, silent, baseline: str | None, partial) -> str:
    directory = report_directory(result, output_dir, report_dir)
    got = side_by_side({
        "underreplicated": aged.collect, "open": opened.collect, "partial": partial.collect,
        "short": short.limit(DETAIL_ROWS).collect, "short_count": short.count,
        "single": single.limit(DETAIL_ROWS).collect, "single_count": single.count,
        "silent": silent.limit(DETAIL_ROWS).collect, "silent_count": silent.count,
        "history": lambda: _history_rows(findings)})
    ur_rows = got["underreplicated"]

    fig, (left, right) = _subplots(1, 2, figsize=(9, 3.2))
    states: dict[str, int] = {}
    for r in ur_rows:
        states[r.state] = states.get(r.state, 0) + 1
    left.bar(list(states) or ["none"], list(states.values()) or [0])
    left.set_title("Under-replicated ledgers by state")
    right.hist([(r.age_seconds or 0) / 3600 for r in ur_rows], bins=20)
    right.set_xlabel("hours since marked")
    right.set_title("Their age")
    ur_plot = _save(fig, directory, "underreplicated.png")

    open_rows = got["open"]
    open_plot = histogram([(r.age_seconds or 0) / 3600 for r in open_rows], "hours since created", "open ledgers",
                          "Open ledgers by age", directory, "open_ledgers.png")

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
    lines += ["## Fragments with fewer copies than the write quorum", ""]
    lines.append(table(got["short"], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("fragment", "fragment"),
        ("entries", lambda r: f"{r.first_entry_id}..{r.last_entry_id}"), ("write quorum", "write_quorum"),
        ("lacking", lambda r: ", ".join(r.lacking)), ("unreachable", lambda r: ", ".join(r.unreachable)),
        ("min copies", "min_copies"), ("marked", "under_replicated")], got["short_count"]))
    lines += ["## Ledgers entirely on one bookie", ""]
    lines.append(table(got["single"], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("state", "state"), ("bookie", "bookie"),
        ("by", "basis")], got["single_count"]))
    lines += ["## Silent writers", ""]
    if baseline is None:
        lines += [f"_No earlier run old enough to compare with: this run recorded {len(open_rows)} open ledgers; a "
                  "run at least the silence threshold later can tell which writers went quiet._", ""]
    else:
        lines.append(table(got["silent"], [
            ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("entries stored", "stored_entries"),
            ("unchanged since", "unchanged_since"), ("silent for at least (s)", "silent_seconds")],
            got["silent_count"]))
    lines += ["## Open ledgers", ""] + _image(open_plot, "open ledgers by age")
    lines.append(table(open_rows[:DETAIL_ROWS], [
        ("ledger", lambda r: f"{r.scope_id}/{r.ledger_id}"), ("age (s)", "age_seconds"),
        ("entries stored", "stored_entries"), ("fragments", "fragments")], len(open_rows)))
    lines += ["## History", ""] + (_image(plot_findings_history(got["history"], directory), "findings per run")
                                   or ["_first run: nothing to compare with yet_", ""])
    return _write(directory, lines)


def _write(directory: str, lines: list[str]) -> str:
    path = os.path.join(directory, "report.md")
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    return path
