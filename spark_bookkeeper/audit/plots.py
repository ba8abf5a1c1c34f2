"""The audit reports' plots, as matplotlib Figures drawn without pyplot (they render to PNG on a host without a
display, and the audit never changes the process's matplotlib backend: a notebook that runs it keeps drawing
inline). Each is drawn from plain rows (Spark Rows, or anything with the same fields), so it is checked without
Spark (tests/unit/test_audit_plots.py).

Made to be read at a glance: one colour per meaning in every plot (``COLOURS``: the next minor compaction is
always the dark purple, the next major the light one); titles that name no colour; legends outside the bars;
"no data" and why, rather than empty axes; ages in the unit their size reads in (seconds to days); a history
of one run drawn at that run, each finding with its own marker and a small sideways offset, so that equal
counts do not hide one another.
"""
from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from collections.abc import Sequence

from matplotlib import dates as mdates
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

COLOURS = {
    "live": "tab:blue",  # live bytes: what the bookies keep
    "minor": "#6a3d9a",  # what the next minor compaction takes (the next major takes it too)
    "major": "#cab2d6",  # what only the next major compaction takes
    "kept": "tab:gray",  # what no compaction takes yet
    "underreplicated": "tab:orange",  # ledgers marked under-replicated, AutoRecovery working on them
    "lost": "tab:red",  # ledgers AutoRecovery gave up on (unrecoverable)
    "open": "tab:cyan",  # open ledgers
}
# Each finding of both audits: its colour (that of its meaning where the plots have one, else one no other
# plot uses) and marker, the same from report to report.
FINDING_STYLES = {
    "orphans": ("tab:brown", "o"), "skipped_logs": ("tab:pink", "s"), "deleted_not_reclaimed": ("tab:olive", "^"),
    "bookie_space": ("tab:green", "D"),
    "underreplicated_aged": (COLOURS["underreplicated"], "v"), "unrecoverable": (COLOURS["lost"], "X"),
    "short_fragments": ("tab:brown", "P"), "single_bookie_ledgers": ("tab:olive", "<"),
    "silent_writers": (COLOURS["open"], ">"), "unverified_fragments": ("goldenrod", "H"),
    "no_reachable_copy": ("darkred", "*"),
}
OTHER_MARKERS = ("h", "8", "p", "d")  # none a known finding uses
NO_DATA = "no data"
ONE_RUN_SPAN = dt.timedelta(days=1)  # the time shown either side of a history's only run
DODGE = 0.025  # the sideways offset between findings of one run, as a share of the time shown
TOP_OWNERS = 10
UNRECOVERABLE = "unrecoverable"


def figure(height: float, width: float = 8.0) -> Figure:
    """A Figure laid out by matplotlib's constrained layout (room for legends outside the axes)."""
    return Figure(figsize=(width, height), layout="constrained")


def save(fig: Figure, directory: str, name: str) -> str:
    fig.savefig(os.path.join(directory, name), dpi=90)
    return name


def no_data(ax, why: str) -> None:
    """Say there is nothing to draw, and why, where the plot would be."""
    ax.text(0.5, 0.5, f"{NO_DATA}: {why}", transform=ax.transAxes, ha="center", va="center", color="tab:gray")
    ax.set_xticks([])
    ax.set_yticks([])


def titled(title: str, height: float, empty: str | None = None, width: float = 8.0):
    """(figure, axes) of one plot titled ``title``; when ``empty`` gives why there is nothing to draw, it says so
    and the axes are None."""
    fig = figure(height, width)
    ax = fig.subplots()
    ax.set_title(title)
    if empty is None:
        return fig, ax
    no_data(ax, empty)
    return fig, None


def legend_below(fig: Figure, columns: int = 2) -> None:
    fig.legend(loc="outside lower center", ncols=columns, fontsize="small", frameon=False)


def byte_scale(values: Sequence[float]) -> tuple[float, str]:
    """The unit these byte counts read best in: (divisor, name)."""
    top = max(values, default=0)
    for divisor, unit in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if top >= divisor:
            return divisor, unit
    return 1, "bytes"


def time_scale(seconds: Sequence[float]) -> tuple[float, str]:
    """The unit these durations read best in (the largest at least two of it): (divisor, name)."""
    top = max(seconds, default=0)
    for divisor, unit in ((86400, "days"), (3600, "hours"), (60, "minutes")):
        if top >= 2 * divisor:
            return divisor, unit
    return 1, "seconds"


def _from_zero(ax, top: float, axis: str = "x") -> None:
    """Bars start at 0; all-zero data still gets a readable axis (0 to 1), not ±0.05."""
    (ax.set_xlim if axis == "x" else ax.set_ylim)(0, top * 1.12 if top > 0 else 1)


# -- storage ---------------------------------------------------------------------------------------------
def _disk_segments(bookie) -> dict[str, float]:
    """A bookie's entry-log bytes split by meaning: live, the garbage the next minor compaction takes, the
    garbage only the next major takes, the garbage no compaction takes yet."""
    garbage = bookie.garbage_bytes or 0
    minor = min(bookie.minor_reclaimable_bytes or 0, garbage)
    major = min(max(bookie.major_reclaimable_bytes or 0, minor), garbage)
    return {"live": bookie.live_bytes or 0, "minor": minor, "major": major - minor, "kept": garbage - major}


DISK_LABELS = {"live": "live", "minor": "garbage the next minor compaction reclaims",
               "major": "garbage only the next major compaction reclaims",
               "kept": "garbage no compaction reclaims yet"}


def _without_gc_state(bookies: Sequence) -> str | None:
    """Why there is no bookie to draw (None: there is one): none listed, or how many of each status."""
    statuses = Counter(b.status for b in bookies)
    if statuses["ok"]:
        return None
    if not bookies:
        return "no bookie listed"
    return "no bookie reported GC state (" + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())) + ")"


def disk_per_bookie(bookies: Sequence) -> Figure:
    """Per bookie (``bookie_space`` rows), its entry logs' bytes by meaning; bookies without GC state named."""
    fig, ax = titled("Entry-log bytes per bookie, by what compaction reclaims", 0.45 * max(3, len(bookies)) + 1.8,
                     _without_gc_state(bookies))
    if ax is None:
        return fig
    segments = [_disk_segments(b) if b.status == "ok" else dict.fromkeys(DISK_LABELS, 0) for b in bookies]
    divisor, unit = byte_scale([sum(s.values()) for s in segments])
    names, start = [b.bookie_id for b in bookies], [0.0] * len(bookies)
    for key, label in DISK_LABELS.items():
        values = [s[key] / divisor for s in segments]
        ax.barh(names, values, left=start, color=COLOURS[key], label=label)
        start = [a + b for a, b in zip(start, values)]
    for row, bookie in enumerate(bookies):
        if bookie.status != "ok":
            ax.text(0, row, f"  {bookie.status}: no GC state", va="center", color="tab:gray")
    ax.invert_yaxis()  # the first bookie on top, as in the table below the plot
    _from_zero(ax, max(start))
    ax.set_xlabel(unit)
    legend_below(fig)
    return fig


def space_by_owner(owners: Sequence) -> Figure:
    """Stored bytes (all replicas) of the owners with the most (``space_by_owner`` rows, largest first)."""
    top = list(owners[:TOP_OWNERS])
    fig, ax = titled("Space by owner" + (f" (the {TOP_OWNERS} largest of {len(owners)})"
                                         if len(owners) > len(top) else ""),
                     0.45 * max(3, len(top)) + 1.2, None if top else "no ledger")
    if ax is None:
        return fig
    divisor, unit = byte_scale([o.stored_bytes or 0 for o in top])
    values = [(o.stored_bytes or 0) / divisor for o in top]
    ax.bar_label(ax.barh([o.owner for o in top], values, color=COLOURS["live"]), fmt="%.1f" if divisor > 1 else "%d",
                 padding=3)
    ax.invert_yaxis()
    _from_zero(ax, max(values))
    ax.set_xlabel(f"{unit} stored (all replicas)")
    return fig


USAGE_GROUPS = {"minor": "the next minor compaction takes it", "major": "only the next major compaction takes it",
                "kept": "no compaction takes it yet"}


def _usage_group(log) -> str:
    if log.minor_compaction_candidate:
        return "minor"
    return "major" if log.major_compaction_candidate else "kept"


def entry_log_usage(logs: Sequence) -> Figure:
    """Finished entry logs (``entrylogs`` rows) by usage, stacked by the compaction that would take them."""
    fig, ax = titled("Finished entry logs by usage: compaction takes the least used", 3.4,
                     None if logs else "no finished entry log")
    if ax is None:
        return fig
    groups = {key: [log.usage for log in logs if _usage_group(log) == key] for key in USAGE_GROUPS}
    ax.hist(list(groups.values()), bins=20, range=(0, 1), stacked=True,
            color=[COLOURS[key] for key in groups], label=list(USAGE_GROUPS.values()))
    ax.set_xlim(0, 1)
    ax.set_xlabel("usage (live / total bytes)")
    ax.set_ylabel("entry logs")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    legend_below(fig, 3)
    return fig


# -- replication -----------------------------------------------------------------------------------------
def age_histogram(ax, seconds: Sequence[float], colour: str, what: str) -> None:
    """A histogram of ages in the unit they read best in, its bins from 0 to the oldest (a single age is a
    bar, not a sliver at the axis' edge)."""
    divisor, unit = time_scale(seconds)
    values = [s / divisor for s in seconds]
    top = max(values) * 1.05 or 1
    ax.hist(values, bins=20, range=(0, top), color=colour)
    ax.set_xlim(0, top)
    ax.set_xlabel(f"{unit} since {what}")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def underreplicated(rows: Sequence) -> Figure:
    """Under-replicated ledgers (``underreplicated_aged`` rows): how many in each state, and their ages."""
    if not rows:
        return titled("Under-replicated ledgers", 3.4, "no ledger is marked under-replicated", 9)[0]
    fig = figure(3.4, 9)
    by_state, ages = fig.subplots(1, 2)
    states = Counter(r.state for r in rows)
    bars = by_state.bar(list(states), list(states.values()),
                        color=[COLOURS["lost" if s == UNRECOVERABLE else "underreplicated"] for s in states])
    by_state.bar_label(bars)
    _from_zero(by_state, max(states.values()), "y")
    by_state.yaxis.set_major_locator(MaxNLocator(integer=True))
    by_state.set_title("Under-replicated ledgers by state")
    age_histogram(ages, [r.age_seconds or 0 for r in rows], COLOURS["underreplicated"], "marked")
    ages.set_title("Their age")
    return fig


def open_ledger_ages(rows: Sequence) -> Figure:
    """Open ledgers (``open_ledgers`` rows) by age."""
    fig, ax = titled("Open ledgers by age", 3, None if rows else "no open ledger")
    if ax is None:
        return fig
    age_histogram(ax, [r.age_seconds or 0 for r in rows], COLOURS["open"], "created")
    ax.set_ylabel("open ledgers")
    return fig


# -- history ---------------------------------------------------------------------------------------------
def _style(kind: str, fallback: int) -> dict:
    """A finding's colour and marker (``FINDING_STYLES``; a kind it does not know gets the ``fallback``-th of
    the rest)."""
    colour, marker = FINDING_STYLES.get(kind, ("black", OTHER_MARKERS[fallback % len(OTHER_MARKERS)]))
    return dict(color=colour, marker=marker)


def _dodge(times: list, kinds: int, width: float) -> float:
    """The sideways step between findings of one run (in days): a share of the time shown, less than the gap
    between two runs."""
    gaps = [mdates.date2num(b) - mdates.date2num(a) for a, b in zip(times, times[1:])]
    return min([DODGE * width] + [0.5 * gap / kinds for gap in gaps])


def _time_axis(ax, first: float, last: float, times: list) -> None:
    """Dates along x from ``first`` to ``last``; a single run is the one tick, named in full, with a line."""
    ax.set_xlim(first, last)
    if len(times) == 1:
        run = mdates.date2num(times[0])
        ax.axvline(run, color="lightgray", linestyle=":", zorder=0)
        ax.set_xticks([run])
        ax.xaxis.set_major_formatter(mdates.DateFormatter("%Y-%m-%d %H:%M"))
        return
    locator = mdates.AutoDateLocator()
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def findings_history(rows: Sequence) -> Figure:
    """Counts of each finding per run (rows of kind, count, run_at); one run is drawn at that run."""
    fig, ax = titled("Findings per run", 3.8, None if rows else "no run recorded")
    if ax is None:
        return fig
    times = sorted({r.run_at for r in rows})
    span = ONE_RUN_SPAN if len(times) == 1 else (times[-1] - times[0]) * 0.05
    first, last = mdates.date2num(times[0] - span), mdates.date2num(times[-1] + span)
    order = list(FINDING_STYLES)
    kinds = sorted({r.kind for r in rows}, key=lambda k: (order.index(k) if k in order else len(order), k))
    step = _dodge(times, len(kinds), last - first)
    reach = step * (len(kinds) - 1) / 2  # how far the outermost findings sit from their run
    for i, kind in enumerate(kinds):
        points = sorted((r.run_at, r["count"]) for r in rows if r.kind == kind)
        shift = (i - (len(kinds) - 1) / 2) * step  # side by side: equal counts stay visible
        ax.plot([mdates.date2num(t) + shift for t, _ in points], [c for _, c in points], label=kind,
                alpha=0.85, **_style(kind, i))
    _time_axis(ax, first - 2 * reach, last + 2 * reach, times)
    top = max(1, max(r["count"] for r in rows))
    ax.set_ylim(-0.08 * top, 1.12 * top)  # room for whole markers at 0 and at the top
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("count")
    legend_below(fig, 3)
    return fig
