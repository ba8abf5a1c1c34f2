"""An audit run is published whole or not at all (spark_bookkeeper/audit/staging.py), and says what it is doing:
``bk audit storage`` as an operator runs it (its own process, its own Spark), held at a known phase by the test
seam BK_AUDIT_HOLD_FILE and interrupted there as Ctrl-C does; a healthy first run, quiet; a run failing in the
library, discarded while the run before it stays. The interrupted and the failing run also on Spark Connect
(``bk audit --remote``: the run's operations interrupted, its directories removed by the client)."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import time

import pytest

from bookie.util.processes import stop_process
from spark_bookkeeper.audit.phases import HOLD_FILE_ENV
from spark_bookkeeper.audit.result import INTERRUPTED
from tests.helpers.audit_processes import BK_AUDIT, audit_env, write_closed_ledger
from tests.helpers.waiting import wait_for

EXIT_DEADLINE = 15.0  # seconds from Ctrl-C to the process gone (it took ~23 s before runs were staged)
RUN_ID = r"\d{8}T\d{6}Z"
JAVA_NOISE = re.compile(r"^\s+at (org|java|scala|sun)\.|Exception", re.MULTILINE)


@pytest.fixture
def healthy_cluster(cluster):
    """Three bookies holding one closed ledger: nothing at risk."""
    c = cluster(3)
    write_closed_ledger(c.metadata_service_uri, b"interrupt-test")
    return c


def bk_audit_storage(uri: str, output, remote: str | None = None, **env: str) -> subprocess.Popen:
    """``bk audit storage`` in a process group of its own (as a shell runs it: Ctrl-C goes to the group), on a
    local[1] Spark of its own or on the Spark Connect server ``remote``."""
    spark = ["--remote", remote] if remote else ["--master", "local[1]"]
    return subprocess.Popen(BK_AUDIT + ["storage", "-u", uri, "--output", str(output), *spark],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env=audit_env(**env))


@pytest.fixture(params=["classic", "connect"])
def remote(request) -> str | None:
    """None: ``bk audit`` runs Spark itself; else the URL of the run's Spark Connect server."""
    return None if request.param == "classic" else request.getfixturevalue("spark_connect_server").url


@pytest.fixture(params=["classic", "connect"])
def audit_session(request):
    return request.getfixturevalue("spark" if request.param == "classic" else "spark_connect")


def staging(output) -> list[str]:
    """Every staging directory under ``output`` (tables and report)."""
    return sorted(str(p.relative_to(output)) for p in output.glob("**/_staging-*"))


def published(output, run_id: str = "*") -> list[str]:
    """The run's published partitions and report directory under ``output`` (not what is staged)."""
    return sorted(str(p.relative_to(output)) for pattern in (f"*/date=*/run={run_id}", f"reports/*/date=*/run={run_id}")
                  for p in output.glob(pattern))


def test_ctrl_c_mid_run_cancels_removes_the_staged_tables_and_says_so(healthy_cluster, tmp_path, remote):
    output, hold = tmp_path / "storage", tmp_path / "hold"
    hold.write_text("findings")  # the run waits before deriving its findings, its snapshots staged
    proc = bk_audit_storage(healthy_cluster.metadata_service_uri, output, remote, **{HOLD_FILE_ENV: str(hold)})
    try:
        wait_for(lambda: (tmp_path / "hold.at").exists() or proc.poll() is not None,
                 "the audit to reach its findings phase", timeout=300)
        assert proc.poll() is None, proc.communicate()
        staged = sorted(p.parts[-3] for p in output.glob("*/date=*/_staging-*"))
        assert staged == ["bookie_ledgers", "entrylogs", "ledgers"]  # hidden, and nothing published
        assert published(output) == []
        os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C at a terminal: the whole foreground group
        interrupted = time.monotonic()
        out, err = proc.communicate(timeout=120)
        took = time.monotonic() - interrupted
    finally:
        stop_process(proc)
    lines = err.strip().splitlines()
    assert proc.returncode == INTERRUPTED, err
    assert re.fullmatch(rf"storage audit interrupted while deriving the findings \(3/5\): Spark's jobs cancelled, "
                        rf"3 staging directories removed; nothing of run ({RUN_ID}) was kept", lines[-1]), lines[-1]
    run_id = re.search(RUN_ID, lines[-1]).group(0)
    assert published(output, run_id) == [] and staging(output) == []
    assert [line for line in lines if line.startswith("storage audit: ")] == [
        "storage audit: reading earlier runs (1/5)",
        "storage audit: reading the entrylogs, bookie_ledgers, ledgers tables (2/5)",
        "storage audit: deriving the findings (3/5)"]
    assert not JAVA_NOISE.search(err), err
    assert took < EXIT_DEADLINE, f"{took:.1f} s from Ctrl-C to exit"
    assert out == ""  # no summary: there is no run to sum up


def test_a_healthy_first_run_prints_its_phases_and_no_stack_trace(healthy_cluster, tmp_path):
    output = tmp_path / "storage"
    proc = bk_audit_storage(healthy_cluster.metadata_service_uri, output)
    try:
        out, err = proc.communicate(timeout=600)
    finally:
        stop_process(proc)
    assert proc.returncode == 0, out + err
    assert "storage audit" in out and "nothing at risk" in out
    assert not JAVA_NOISE.search(err), err  # no FileNotFoundException for a history not there yet
    assert "\r" not in err and "[Stage" not in err  # no console progress bar when stderr is not a terminal
    phases = [line for line in err.splitlines() if line.startswith("storage audit: ")]
    assert [p[p.rindex("("):] for p in phases] == [f"({i}/5)" for i in range(1, 6)], err
    tables = [p.parts[-3] for p in output.glob("*/date=*/run=*")]
    assert {"orphans", "findings_storage", "ledgers"} <= set(tables) and staging(output) == []
    (report,) = output.glob("reports/storage/date=*/run=*/report.md")
    assert {"findings_history.png", "disk_per_bookie.png"} <= {p.name for p in report.parent.iterdir()}


def test_a_failing_run_keeps_nothing_and_leaves_the_run_before_it(audit_session, healthy_cluster, tmp_path,
                                                                  monkeypatch):
    import datetime as dt

    from spark_bookkeeper.audit import EXIT_FAILED, RunAborted, Run, run_storage_audit, storage
    from spark_bookkeeper.audit.history import read_history
    spark, uri, output = audit_session, healthy_cluster.metadata_service_uri, tmp_path / "storage"
    first = Run.now()
    kept = run_storage_audit(spark, uri, str(output), run=first)
    second = Run(first.at + dt.timedelta(hours=1))
    progress: list[str] = []

    def broken(*args):
        raise RuntimeError("the metadata store went away\nsecond line")
    monkeypatch.setattr(storage, "confirm_orphans", broken)
    with pytest.raises(RunAborted) as aborted:
        run_storage_audit(spark, uri, str(output), run=second, progress=progress.append)
    assert aborted.value.exit_code == EXIT_FAILED and isinstance(aborted.value.__cause__, RuntimeError)
    assert re.fullmatch(r"storage audit failed while deriving the findings \(3/5\) \(RuntimeError: the metadata "
                        r"store went away\): Spark's jobs cancelled, \d+ staging directories removed; nothing of "
                        rf"run {second.run_id} was kept", str(aborted.value)), str(aborted.value)
    assert progress[-1] == "storage audit: deriving the findings (3/5)"
    assert published(output, second.run_id) == [] and staging(output) == []
    history = read_history(spark, str(output), "findings_storage")
    assert [r.run for r in history.select("run").distinct().collect()] == [first.run_id]
    assert os.path.exists(kept.report) and all(os.path.isdir(p) for p in kept.tables.values())
