"""A run's output, staged and then published: a run interrupted (Ctrl-C) or failed leaves nothing behind.

Each table is written to ``OUTPUT/<table>/date=YYYY-MM-DD/_staging-<run>/run=<run>/``: the staging directory
``_staging-<run>`` is hidden from Spark's partition discovery (a name starting with ``_`` and without ``=``) and
from ``history``'s ``date=*/run=*``, so readers of the history never see a run half-written; the data under it
has the published partition's name, so the run reads its snapshot back as any partition (Spark warns "All paths
were ignored" when the path it is given is itself hidden). The report and its plots go to ``_staging-<run>/``
next to (or, with ``--report-dir``, inside) their directory. Once every table and the report are written,
``publish`` renames each table's ``run=<run>`` up into its date (replacing an earlier attempt of the same run)
and removes the emptied staging directory, through Hadoop's FileSystem in the session's JVM (any path Spark
writes), then moves the report's files in, ``report.md`` last (the report is on the driver's own disk:
``os.replace``). A run that ends early cancels Spark's jobs, waits for the writes under way to stop, removes
its staging directories (and any table already published) and raises RunAborted with one line that says so
(Ctrl-C raises a plain KeyboardInterrupt meanwhile: interrupts.py). On Spark Connect the same steps run with
the client's own file calls on a local output path, and the run's operations are interrupted instead of its
jobs cancelled (connect.py).
A driver killed outright (SIGKILL) leaves its ``_staging-<run>`` directories: hidden, removable by hand.
"""
from __future__ import annotations

import os
import shutil
import threading
import time

from spark_bookkeeper.audit import hadoop_fs
from spark_bookkeeper.audit.connect import client_path, is_connect
from spark_bookkeeper.audit.history import Run
from spark_bookkeeper.audit.interrupts import cancel_jobs, plain_ctrl_c, quiet_spark_log
from spark_bookkeeper.audit.phases import Phases, Progress
from spark_bookkeeper.audit.result import EXIT_FAILED, INTERRUPTED, AuditResult, RunAborted
from spark_bookkeeper.audit.threads import on_a_fresh_connection

STAGING_PREFIX = "_staging-"
REPORT_NAME = "report.md"
DRAIN_SECONDS = 30.0  # at most this long for writes under way to stop once their jobs are cancelled
DRAIN_POLL_SECONDS = 0.1


def staging_name(run: Run) -> str:
    return f"{STAGING_PREFIX}{run.run_id}"


def first_line(error: BaseException) -> str:
    """The line of ``error`` that says what went wrong (a Py4J error's first line only names the JVM call)."""
    lines = [line.strip().lstrip(": ") for line in str(error).splitlines() if line.strip()]
    return next((line for line in lines if not line.startswith("An error occurred while calling")), "")


class StagedTables:
    """This run's tables, written to their staging directories; ``written`` maps each to where it is."""

    def __init__(self, spark, output: str, run: Run, written: dict[str, str]):
        self.spark, self.output, self.run, self.written = spark, output.rstrip("/"), run, written
        self._changes = threading.Condition()
        self._writing = 0  # writes under way (the audits write several tables side by side)
        self._closed = False  # set when the run ends early: no write starts after it
        self._published: list[str] = []

    def staging_dir(self, table: str) -> str:
        return f"{self.output}/{table}/date={self.run.date}/{staging_name(self.run)}"

    def path(self, table: str) -> str:
        """Where ``table`` is written: named as its published partition, inside the hidden staging directory."""
        return f"{self.staging_dir(table)}/run={self.run.run_id}"

    def write(self, df, table: str) -> str:
        """Write ``df`` as this run's ``table`` (replacing an earlier attempt's staging directory)."""
        path = self.path(table)
        with self._changes:
            if self._closed:
                raise RuntimeError(f"the run ended: table {table} is not written")
            self._writing += 1
            self.written[table] = path  # noted first: a write that fails half-way is removed too
        try:
            df.write.mode("overwrite").parquet(path)
            if is_connect(self.spark) and not hadoop_fs.exists(self.spark, path):
                raise OSError(f"the Spark Connect server wrote table {table} to {path}, which this client does not "
                              "see: give an output directory both see (the same host, or a shared mount)")
        finally:
            with self._changes:
                self._writing -= 1
                self._changes.notify_all()
        return path

    def publish(self) -> None:
        """Move each table's ``run=<run>`` up into its date and remove the emptied staging directory; ``written``
        then names the published partitions."""
        for table, staged in list(self.written.items()):
            final = self.run.path(self.output, table)
            hadoop_fs.replace(self.spark, staged, final)
            self._published.append(final)
            self.written[table] = final
            hadoop_fs.delete(self.spark, self.staging_dir(table))

    def discard(self) -> int:
        """Cancel Spark's jobs until no write is under way, then remove what this run wrote; how many
        directories were removed."""
        self._drain()
        paths = [self.staging_dir(table) for table in self.written] + self._published
        return sum(hadoop_fs.delete(self.spark, path) for path in paths)

    def _drain(self) -> None:
        deadline = time.monotonic() + DRAIN_SECONDS
        with self._changes:
            self._closed = True
        while True:
            cancel_jobs(self.spark)  # again each time: a write may have started a job since
            with self._changes:
                if not self._writing or time.monotonic() >= deadline:
                    return
                self._changes.wait(DRAIN_POLL_SECONDS)


class StagedReport:
    """The report's directory (``directory``) and the one it is written to first (``staging``)."""

    def __init__(self, directory: str, staging: str):
        self.directory, self.staging = directory, staging
        self._moved: list[str] = []  # files already in place: a run that ends while publishing removes them too

    @classmethod
    def for_run(cls, audit: str, run: Run, output: str, report_dir: str | None) -> "StagedReport":
        """``report_dir``, else ``OUTPUT/reports/<audit>/date=…/run=…/`` when OUTPUT is a local path."""
        if report_dir is not None:
            return cls(report_dir, os.path.join(report_dir, staging_name(run)))
        if "://" in output and not output.startswith("file://"):
            raise ValueError(f"output {output} is not a local path: give a local report directory "
                             "(--report-dir) for the Markdown report and its plots")
        base = output[len("file://"):] if output.startswith("file://") else output
        dated = os.path.join(base, "reports", audit, f"date={run.date}")
        return cls(os.path.join(dated, f"run={run.run_id}"), os.path.join(dated, staging_name(run)))

    def open(self) -> str:
        """The staging directory, made empty."""
        shutil.rmtree(self.staging, ignore_errors=True)
        os.makedirs(self.staging)
        return self.staging

    def publish(self) -> str:
        """Move the report's files into place, report.md last; its path."""
        os.makedirs(self.directory, exist_ok=True)
        for name in sorted(os.listdir(self.staging), key=lambda n: (n == REPORT_NAME, n)):
            os.replace(os.path.join(self.staging, name), os.path.join(self.directory, name))
            self._moved.append(os.path.join(self.directory, name))
        os.rmdir(self.staging)
        return os.path.join(self.directory, REPORT_NAME)

    def discard(self) -> int:
        """Remove the staging directory (and what was moved out of it); 1 if there was anything, else 0."""
        existed = os.path.isdir(self.staging) or bool(self._moved)
        shutil.rmtree(self.staging, ignore_errors=True)
        for path in self._moved:
            os.remove(path)
        return int(existed)


class AuditRun:
    """One audit run: its result, staged tables, staged report and phases. As a context manager, a run that
    ends with an error or Ctrl-C is discarded and RunAborted raised (module docstring)."""

    def __init__(self, spark, audit: str, output: str, run: Run, report_dir: str | None, read: tuple[str, ...],
                 progress: Progress | None = None):
        self.spark = spark
        if is_connect(spark):  # the client stages and publishes: a path it sees, absolute as the server takes it
            output = client_path(output)
        self._ctrl_c = plain_ctrl_c()
        self.result = AuditResult(audit, run)
        self.report = StagedReport.for_run(audit, run, output, report_dir)  # a bad --report-dir fails first
        self.tables = StagedTables(spark, output, run, self.result.tables)
        self.phases = Phases(audit, read, run.run_id, progress)

    def __enter__(self) -> "AuditRun":
        self._ctrl_c.__enter__()
        return self

    def __exit__(self, kind, error, traceback) -> bool:
        try:
            if error is not None:
                raise self.abort(error) from error
        finally:
            self._ctrl_c.__exit__(None, None, None)
        return False

    def abort(self, error: BaseException) -> RunAborted:
        """Discard the run; the RunAborted that says what was done."""
        where = self.phases.where()
        removed = on_a_fresh_connection(self.discard)
        run = self.result.run.run_id
        done = f"Spark's jobs cancelled, {removed} staging director{'y' if removed == 1 else 'ies'} removed; " \
               f"nothing of run {run} was kept"
        if isinstance(error, KeyboardInterrupt):
            return RunAborted(f"{self.result.audit} audit interrupted while {where}: {done}", INTERRUPTED)
        return RunAborted(f"{self.result.audit} audit failed while {where} ({type(error).__name__}: "
                          f"{first_line(error)}): {done}", EXIT_FAILED)

    def discard(self) -> int:
        """Remove what the run wrote (its Spark jobs cancelled, Spark's log of them silenced); how many
        directories."""
        with quiet_spark_log(self.spark):
            return self.tables.discard() + self.report.discard()

    def publish(self) -> AuditResult:
        """Every table and the report written: make them the run's."""
        self.phases.start("publish")
        self.tables.publish()
        self.result.report = self.report.publish()
        return self.result
