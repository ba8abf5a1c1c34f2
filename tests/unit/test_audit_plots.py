"""The audit reports' plots (spark_bookkeeper.audit.plots) drawn from rows shaped as the audits collect them:
with no data, one run's and several runs'. Each PNG is saved to $PLOTS_ARTIFACT_DIR when it is set (a directory
CI keeps, to look at), else to the test's tmp_path."""
from __future__ import annotations

import datetime as dt
import os
import pathlib
import re

import pytest
from matplotlib import dates as mdates
from matplotlib.colors import to_hex
from pyspark.sql import Row

from spark_bookkeeper.audit import plots

T0 = dt.datetime(2026, 11, 28, 6, 0)
COLOUR_WORDS = ("red", "orange", "blue", "green", "purple", "gray", "grey", "cyan", "black")


def bookie(name: str, live: int, garbage: int, minor: int, major: int, status: str = "ok") -> Row:
    answered = status == "ok"
    return Row(bookie_id=name, status=status, total_bytes=live + garbage if answered else None,
               live_bytes=live if answered else None, garbage_bytes=garbage if answered else None,
               minor_reclaimable_bytes=minor if answered else None, major_reclaimable_bytes=major if answered else None)


def log(usage: float, minor: bool, major: bool) -> Row:
    return Row(usage=usage, minor_compaction_candidate=minor, major_compaction_candidate=major)


def finding(kind: str, count: int, at: dt.datetime) -> Row:
    return Row(kind=kind, count=count, run_at=at)


def history(runs: int) -> list[Row]:
    """Storage findings of ``runs`` daily runs: orphans and skipped logs both 0 (equal counts), the rest growing."""
    return [finding(kind, n if kind == "deleted_not_reclaimed" else (0 if kind != "bookie_space" else 1),
                    T0 + dt.timedelta(days=n))
            for n in range(runs) for kind in ("orphans", "skipped_logs", "deleted_not_reclaimed", "bookie_space")]


ONE_RUN = {  # one run's rows of each plot, as small as a first run on a small cluster gives
    "disk_per_bookie": [bookie("127.0.0.1:3181", 3 << 20, 5 << 20, 1 << 20, 4 << 20),
                        bookie("127.0.0.1:3182", 6 << 20, 1 << 20, 0, 1 << 20),
                        bookie("127.0.0.1:3183", 0, 0, 0, 0, status="unavailable")],
    "space_by_owner": [Row(owner="orders", stored_bytes=5 << 20), Row(owner="(no owner key)", stored_bytes=0)],
    "entry_log_usage": [log(0.1, True, True), log(0.5, False, True), log(0.95, False, False)],
    "underreplicated": [Row(state="copying", age_seconds=95), Row(state="unrecoverable", age_seconds=40)],
    "open_ledger_ages": [Row(age_seconds=105)],
    "findings_history": history(1),
}


@pytest.fixture
def save(tmp_path, request):
    """Save a figure as a PNG named after the test, where CI keeps it ($PLOTS_ARTIFACT_DIR) or in tmp_path."""
    directory = pathlib.Path(os.environ.get("PLOTS_ARTIFACT_DIR") or tmp_path)
    directory.mkdir(parents=True, exist_ok=True)

    def saved(fig, name: str) -> pathlib.Path:
        test = re.sub(r"[^A-Za-z0-9_.-]+", "-", request.node.name).strip("-")
        path = directory / plots.save(fig, str(directory), f"{test}-{name}.png")
        assert path.stat().st_size > 0
        return path
    return saved


def texts(fig) -> list[str]:
    return [t.get_text() for ax in fig.axes for t in ax.texts]


def titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


def drawn(fig):
    fig.draw_without_rendering()  # lays the figure out: legends and axes get their places
    return fig


def legend_clear_of_axes(fig) -> None:
    for legend in fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]:
        box = legend.get_window_extent()
        for ax in fig.axes:
            assert not box.overlaps(ax.get_window_extent()), f"the legend covers {ax.get_title()!r}"


def bar_colours(ax) -> set[str]:
    return {to_hex(patch.get_facecolor()) for patch in ax.patches if patch.get_width() and patch.get_height()}


@pytest.mark.parametrize("name", sorted(ONE_RUN))
def test_each_plot_says_no_data_rather_than_drawing_empty_axes(name, save):
    fig = getattr(plots, name)([])
    save(fig, "empty")
    assert any(t.startswith(f"{plots.NO_DATA}: ") for t in texts(fig)), texts(fig)
    assert all(not ax.get_xticks().size and not ax.get_yticks().size for ax in fig.axes)


@pytest.mark.parametrize("name", sorted(ONE_RUN))
def test_each_plot_of_one_run_reads_at_a_glance(name, save):
    fig = drawn(getattr(plots, name)(ONE_RUN[name]))
    save(fig, "one-run")
    assert not any(plots.NO_DATA in t for t in texts(fig))
    legend_clear_of_axes(fig)
    for title in titles(fig):
        assert not any(re.search(rf"\b{word}\b", title.lower()) for word in COLOUR_WORDS), title
    for ax in fig.axes:
        low, high = ax.get_xlim() if name != "findings_history" else ax.get_ylim()
        assert low <= 0 < high and high - low >= 1, (ax.get_title(), low, high)  # no ±0.04 axis


def test_disk_per_bookie_stacks_garbage_by_the_compaction_that_reclaims_it(save):
    fig = drawn(plots.disk_per_bookie(ONE_RUN["disk_per_bookie"]))
    save(fig, "disk")
    (ax,) = fig.axes
    assert ax.get_xlabel() == "MiB" and ax.get_xlim()[1] >= 8  # 3 MiB live + 5 MiB garbage on the first
    widths = {to_hex(p.get_facecolor()): p.get_width() for p in ax.patches if p.get_y() < 0.5 and p.get_width()}
    assert widths == {to_hex(plots.COLOURS["live"]): 3, to_hex(plots.COLOURS["minor"]): 1,
                      to_hex(plots.COLOURS["major"]): 3, to_hex(plots.COLOURS["kept"]): 1}
    assert "  unavailable: no GC state" in texts(fig)
    java = plots.disk_per_bookie([bookie(f"b{i}", 0, 0, 0, 0, status="unsupported") for i in range(3)])
    assert texts(java) == [f"{plots.NO_DATA}: no bookie reported GC state (3 unsupported)"]


def test_a_compaction_has_one_colour_in_every_plot(save):
    disk = bar_colours(plots.disk_per_bookie(ONE_RUN["disk_per_bookie"]).axes[0])
    usage = bar_colours(plots.entry_log_usage(ONE_RUN["entry_log_usage"]).axes[0])
    minor, major, kept = (to_hex(plots.COLOURS[k]) for k in ("minor", "major", "kept"))
    assert {minor, major, kept} <= disk and {minor, major, kept} == usage
    fig = plots.entry_log_usage(ONE_RUN["entry_log_usage"])
    labels = {to_hex(h.get_facecolor()): t.get_text()
              for h, t in zip(fig.legends[0].legend_handles, fig.legends[0].get_texts())}
    assert "minor" in labels.get(minor, "") and "major" in labels.get(major, "")


@pytest.mark.parametrize("seconds, unit", [(105, "seconds"), (50 * 60, "minutes"), (5 * 3600, "hours"),
                                           (3 * 86400, "days")])
def test_ages_are_shown_in_the_unit_their_size_reads_in(seconds, unit, save):
    fig = plots.open_ledger_ages([Row(age_seconds=seconds), Row(age_seconds=seconds // 2)])
    save(fig, unit)
    (ax,) = fig.axes
    assert ax.get_xlabel() == f"{unit} since created"
    assert 1 <= ax.get_xlim()[1] <= 200  # 105 seconds, not 0.0292 hours


def test_a_single_age_is_a_bar_that_can_be_seen(save):
    fig = plots.open_ledger_ages([Row(age_seconds=105)])
    save(fig, "one-ledger")
    (ax,) = fig.axes
    (bar,) = [p for p in ax.patches if p.get_height()]
    low, high = ax.get_xlim()
    assert low == 0 and bar.get_x() + bar.get_width() <= high + 1e-9 and bar.get_width() >= (high - low) / 25


def test_unrecoverable_ledgers_are_the_red_bars(save):
    fig = plots.underreplicated(ONE_RUN["underreplicated"])
    save(fig, "states")
    by_state = fig.axes[0]
    colours = {tick.get_text(): to_hex(bar.get_facecolor())
               for tick, bar in zip(by_state.get_xticklabels(), by_state.patches)}
    assert colours == {"copying": to_hex(plots.COLOURS["underreplicated"]),
                       "unrecoverable": to_hex(plots.COLOURS["lost"])}
    assert fig.axes[1].get_xlabel() == "seconds since marked"


def xs_of(ax) -> dict[str, list[float]]:
    return {line.get_label(): list(line.get_xdata()) for line in ax.lines if not line.get_label().startswith("_")}


def test_a_history_of_one_run_is_drawn_at_that_run(save):
    fig = drawn(plots.findings_history(history(1)))
    save(fig, "history-one-run")
    (ax,) = fig.axes
    low, high = ax.get_xlim()
    run = mdates.date2num(T0)
    assert low < run < high and high - low <= 3  # days: not 2025 to 2029
    xs = xs_of(ax)
    assert len({x[0] for x in xs.values()}) == 4  # equal counts (orphans, skipped_logs: 0) side by side
    assert all(abs(x[0] - run) < 0.2 for x in xs.values())  # ... and all near the run
    assert len({line.get_marker() for line in ax.lines if line.get_label() in xs}) == 4
    assert [mdates.num2date(tick).replace(tzinfo=None) for tick in ax.get_xticks()] == [T0]  # the run, named
    assert ax.get_ylim()[0] < 0 < 1 <= ax.get_ylim()[1]  # markers at 0 whole, not cut by the axis


def test_a_history_of_several_runs_spans_them(save):
    rows = history(5)
    fig = drawn(plots.findings_history(rows))
    save(fig, "history-several-runs")
    (ax,) = fig.axes
    first, last = mdates.date2num(T0), mdates.date2num(T0 + dt.timedelta(days=4))
    low, high = ax.get_xlim()
    assert low < first and last < high and high - low < 6  # days: the runs, a margin and no more
    assert xs_of(ax)["orphans"] != xs_of(ax)["skipped_logs"]  # the same counts, told apart
    drawn_xs = [x for xs in xs_of(ax).values() for x in xs]
    assert low + 0.02 * (high - low) < min(drawn_xs) and max(drawn_xs) < high - 0.02 * (high - low)  # none cut
    legend_clear_of_axes(fig)
    hourly = [finding("orphans", 0, T0 + dt.timedelta(hours=h)) for h in range(48)] + \
        [finding("skipped_logs", 0, T0 + dt.timedelta(hours=h)) for h in range(48)]
    ax = plots.findings_history(hourly).axes[0]
    step = xs_of(ax)["skipped_logs"][0] - xs_of(ax)["orphans"][0]
    assert 0 < step < 1 / 24 / 2  # less than half the gap between two runs: a run's points stay together


def test_a_finding_has_its_own_colour_and_marker_and_no_colour_meaning_something_else():
    meanings = {to_hex(colour): meaning for meaning, colour in plots.COLOURS.items()}
    shared = {"underreplicated_aged": "underreplicated", "unrecoverable": "lost", "silent_writers": "open"}
    for kind, (colour, _) in plots.FINDING_STYLES.items():
        assert meanings.get(to_hex(colour)) == shared.get(kind), kind  # orange means under-replicated everywhere
    storage, replication = list(plots.FINDING_STYLES)[:4], list(plots.FINDING_STYLES)[4:]
    for kinds in (storage, replication):  # one plot each: told apart by colour and by marker
        colours = {to_hex(plots.FINDING_STYLES[k][0]) for k in kinds}
        assert len(colours) == len({plots.FINDING_STYLES[k][1] for k in kinds}) == len(kinds)
