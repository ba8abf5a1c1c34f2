"""The parts of an audit run's staging and phases that need no Spark (spark_bookkeeper/audit/staging.py,
phases.py): where the report is staged and published, what a run that ends early removes, the progress lines,
and the one line of a failure. The tables' staging through Spark: tests/spark/test_audit_interrupts.py."""
from __future__ import annotations

import os
import threading

import pytest

from spark_bookkeeper.audit.history import Run
from spark_bookkeeper.audit.phases import HOLD_FILE_ENV, Phases
from spark_bookkeeper.audit.staging import StagedReport, first_line
from tests.helpers.waiting import wait_for

RUN = Run.parse("2026-11-28T05:00:00Z")


def test_the_report_is_staged_beside_its_run_directory_or_inside_the_given_one(tmp_path):
    staged = StagedReport.for_run("storage", RUN, f"file://{tmp_path}", None)
    dated = tmp_path / "reports" / "storage" / "date=2026-11-28"
    assert (staged.directory, staged.staging) == (str(dated / "run=20261128T050000Z"),
                                                 str(dated / "_staging-20261128T050000Z"))
    given = StagedReport.for_run("replication", RUN, "hdfs://nn/bk-audit", str(tmp_path / "reports"))
    assert (given.directory, given.staging) == (str(tmp_path / "reports"),
                                                str(tmp_path / "reports" / "_staging-20261128T050000Z"))
    with pytest.raises(ValueError, match="not a local path: give a local report directory"):
        StagedReport.for_run("storage", RUN, "s3a://bucket/bk-audit", None)


def test_a_published_report_moves_in_whole_and_a_discarded_one_leaves_nothing(tmp_path):
    staged = StagedReport.for_run("storage", RUN, str(tmp_path), None)
    directory = staged.open()
    for name in ("report.md", "disk_per_bookie.png"):
        (tmp_path / directory / name).write_text(name)
    assert not os.path.exists(staged.directory)  # nothing of the run where readers look
    assert staged.publish() == os.path.join(staged.directory, "report.md")
    assert sorted(os.listdir(staged.directory)) == ["disk_per_bookie.png", "report.md"]
    assert not os.path.exists(staged.staging)
    assert staged.discard() == 1 and os.listdir(staged.directory) == []  # ended while publishing: taken back
    unpublished = StagedReport.for_run("storage", RUN, str(tmp_path / "other"), None)
    (tmp_path / unpublished.open() / "report.md").write_text("half")
    assert unpublished.discard() == 1 and not os.path.exists(unpublished.staging)
    assert unpublished.discard() == 0


def test_each_phase_is_one_progress_line_and_names_where_a_run_ended():
    lines: list[str] = []
    phases = Phases("storage", ("entrylogs", "ledgers"), RUN.run_id, lines.append)
    assert phases.where() == "starting"
    for key in ("history", "tables", "findings", "report", "publish"):
        phases.start(key)
    assert lines == ["storage audit: reading earlier runs (1/5)",
                     "storage audit: reading the entrylogs, ledgers tables (2/5)",
                     "storage audit: deriving the findings (3/5)", "storage audit: writing the report (4/5)",
                     "storage audit: publishing run 20261128T050000Z (5/5)"]
    assert phases.where() == "publishing run 20261128T050000Z (5/5)"


def test_the_hold_seam_waits_before_the_phase_its_file_names(tmp_path, monkeypatch):
    hold = tmp_path / "hold"
    hold.write_text("findings")
    monkeypatch.setenv(HOLD_FILE_ENV, str(hold))
    phases = Phases("replication", ("ledgers",), RUN.run_id)
    phases.start("tables")  # not named: no wait
    held = threading.Thread(target=phases.start, args=("findings",))
    held.start()
    wait_for(lambda: (tmp_path / "hold.at").exists(), "the run to hold before its findings")
    assert (tmp_path / "hold.at").read_text() == "findings" and held.is_alive()
    hold.write_text("go")
    held.join(timeout=60)
    assert not held.is_alive()


def test_a_failure_is_told_by_the_line_that_says_what_went_wrong():
    assert first_line(RuntimeError("the metadata store went away\nsecond line")) == "the metadata store went away"
    py4j = "An error occurred while calling o91.parquet.\n: org.apache.spark.SparkException: disk full\n\tat x"
    assert first_line(Exception(py4j)) == "org.apache.spark.SparkException: disk full"
    assert first_line(KeyError()) == ""
