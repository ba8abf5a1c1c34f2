"""The notebooks in notebooks/ executed as a person would run them (nbclient + ipykernel, the kernel with its
own SparkSession) against a local cluster holding the sample data: no cell may fail, every plot must be drawn,
and the committed files stay without outputs."""
from __future__ import annotations

import pathlib
import re
import signal
import uuid

import nbformat
import pytest

from bookie.client import BookKeeper
from bookie.testing.local_bookkeeper import LocalBookKeeper
from spark_bookkeeper.notebook import AUDIT_VARIABLE, SAMPLE_BOOKIE_SETTINGS, SAMPLE_BOOKIES, add_sample_data
from tests.helpers.notebooks import NOTEBOOKS, execute, images, kernel_tmp, text
from tests.helpers.waiting import wait_for


@pytest.fixture(scope="module")
def sample_cluster(zookeeper, tmp_path_factory):
    """Four bookies with the notebooks' sample data (one of them killed by it): (uri, SampleData)."""
    cluster = LocalBookKeeper(SAMPLE_BOOKIES, base_dir=str(tmp_path_factory.mktemp("notebook-cluster")),
                              zookeeper=zookeeper, root=f"/ledgers-{uuid.uuid4().hex[:8]}",
                              bookie_settings={**SAMPLE_BOOKIE_SETTINGS, "zkTimeout": 2000}).start()
    bk = BookKeeper(cluster.metadata_service_uri)
    try:
        sample = add_sample_data(bk, kill=lambda bookie: cluster.kill_bookie(
            next(b.index for b in cluster.bookies if b.bookie_id == bookie), signal.SIGKILL))
        yield cluster.metadata_service_uri, sample
    finally:
        bk.close()
        cluster.stop()


def test_audit_output_reads_scheduled_runs_from_audit_output(spark, tmp_path, monkeypatch):
    """AUDIT_OUTPUT: the directory above the audits' own --output directories, or one of them; never a run.
    (First in this module: its SparkSession, if it is the first, starts before any gRPC client here.)"""
    from spark_bookkeeper.audit.history import Run, write_table
    from spark_bookkeeper.notebook import audit_output, latest_run
    findings = "audit string, kind string, count long, at_risk boolean, summary string, run_at timestamp"
    for at in ("2026-11-20T06:00:00Z", "2026-11-21T06:00:00Z"):
        run = Run.parse(at)
        write_table(spark.createDataFrame([("replication", "unrecoverable", 1, True, "", run.at)], findings),
                    str(tmp_path / "replication"), "findings_replication", run)
    monkeypatch.setenv(AUDIT_VARIABLE, str(tmp_path))
    output = audit_output(spark, "zk://127.0.0.1:1/unused", "replication")  # no cluster is asked
    assert output == str(tmp_path / "replication")
    assert [r.run for r in latest_run(spark, output, "findings_replication").collect()] == ["20261121T060000Z"]
    monkeypatch.setenv(AUDIT_VARIABLE, output)
    assert audit_output(spark, "zk://127.0.0.1:1/unused", "replication") == output
    with pytest.raises(FileNotFoundError, match=r"holds no run of the storage audit .*bk audit storage"):
        audit_output(spark, "zk://127.0.0.1:1/unused", "storage")
    with pytest.raises(ValueError, match="unknown audit 'gc'; the audits are storage, replication"):
        audit_output(spark, "zk://127.0.0.1:1/unused", "gc")


def test_ledgers_notebook(sample_cluster, tmp_path):
    uri, sample = sample_cluster
    notebook = execute("ledgers.ipynb", uri, tmp_path)
    out = text(notebook)
    ledgers = len(sample.closed) + 2  # the two-fragment ledger and the open one
    assert f"{uri}: {ledgers} ledgers" in out  # the cluster given, not a local one of its own
    assert f"ledger {sample.two_fragments}: CLOSED" in out and "2 fragment(s)" in out  # the one drawn
    assert sample.lost_bookie in out and "not registered" in out
    assert re.search(r"\|\d+\.\d (KiB|MiB|GiB|TiB|PiB)\s*\|", out)  # free_disk_human, not only raw bytes
    assert "{application -> clickstream}" in out  # the open ledger's custom metadata as text, not hex
    assert images(notebook) == 4  # sizes/ages, per bookie, fragments, open ledgers
    no_arrow_warning(notebook)


def test_storage_notebook(sample_cluster, tmp_path):
    uri, sample = sample_cluster
    notebook = execute("storage.ipynb", uri, tmp_path)
    out = text(notebook)
    assert f"{uri}: storage audit run" in out
    assert "unavailable" in out and sample.lost_bookie in out  # the killed bookie: no GC state
    for owner in ("orders", "payments", "clickstream", "audit-log"):
        assert f"|{owner}" in out
    assert images(notebook) == 3  # disk per bookie, compaction candidates, space by owner
    no_arrow_warning(notebook)
    audit_output_removed(out, tmp_path, "storage")


def test_replication_notebook(sample_cluster, tmp_path):
    uri, sample = sample_cluster
    notebook = execute("replication.ipynb", uri, tmp_path)
    out = text(notebook)
    assert f"{uri}: replication audit run" in out
    assert f"|{sample.lost_bookie}|marked|{len(sample.underreplicated)}" in out.replace(" ", "")
    assert images(notebook) == 3  # under-replicated, fragments short or not checked, history
    no_arrow_warning(notebook)
    audit_output_removed(out, tmp_path, "replication")


def no_arrow_warning(notebook: nbformat.NotebookNode) -> None:
    """Spark used Arrow (pandas is installed with the test and notebooks extras): no fallback warning."""
    warned = text(notebook, "stderr")
    assert "arrow" not in warned.lower(), warned


def audit_output_removed(out: str, cwd, audit: str) -> None:
    """The temporary directory the notebook's audit ran into (it prints it) goes once its kernel has ended
    (a kernel shut down runs no atexit handler)."""
    output = pathlib.Path(re.search(rf": {audit} audit run \S+ from (\S+)", out).group(1))
    assert output.parent == kernel_tmp(cwd) and output.name.startswith(f"bk-{audit}-audit-")
    wait_for(lambda: not output.exists(), f"the {audit} audit's output {output} removed after its kernel ended")


@pytest.mark.parametrize("path", sorted(NOTEBOOKS.glob("*.ipynb")), ids=lambda p: p.name)
def test_notebooks_are_committed_without_outputs(path):
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    dirty = [i for i, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and (cell.execution_count is not None or cell.outputs)]
    assert not dirty, f"{path.name}: cells {dirty} carry outputs or execution counts; clear them before committing"


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == ["ledgers.ipynb", "replication.ipynb", "storage.ipynb"]

