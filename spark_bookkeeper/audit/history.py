"""Where audit runs keep their tables: ``OUTPUT/<table>/date=YYYY-MM-DD/run=YYYYMMDDTHHMMSSZ/`` (Parquet).

Every run is kept (a second run the same day adds a ``run=`` partition next to the first; rerunning the same
``--run-at`` replaces that one run): the replication audit compares open ledgers with an earlier run some hours
back, which a one-run-per-day layout would lose. "What changed since yesterday" compares the last run of each
date. Spark's partition discovery turns ``date`` and ``run`` into columns. A run writes its tables to staging
directories that neither partition discovery nor ``read_history`` sees, and publishes them when it is done
(staging.py).
"""
from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from spark_bookkeeper.audit import hadoop_fs
from spark_bookkeeper.audit.connect import client_path, is_connect

RUN_FORMAT = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True)
class Run:
    """One audit run, named by the UTC time it describes (``--run-at``; default: now)."""
    at: dt.datetime  # timezone-aware, UTC

    @classmethod
    def now(cls) -> "Run":
        return cls(dt.datetime.now(dt.timezone.utc).replace(microsecond=0))

    @classmethod
    def parse(cls, text: str) -> "Run":
        """``YYYY-MM-DD`` (midnight UTC) or an ISO 8601 time (no zone: UTC)."""
        try:
            at = dt.datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"run time {text!r} is neither a date (2026-11-22) nor an ISO 8601 time "
                             "(2026-11-22T06:00:00Z)") from None
        if at.tzinfo is None:
            at = at.replace(tzinfo=dt.timezone.utc)
        return cls(at.astimezone(dt.timezone.utc).replace(microsecond=0))

    @property
    def date(self) -> str:
        return self.at.strftime("%Y-%m-%d")

    @property
    def run_id(self) -> str:
        return self.at.strftime(RUN_FORMAT)

    def path(self, output: str, table: str) -> str:
        return f"{output.rstrip('/')}/{table}/date={self.date}/run={self.run_id}"


def run_time(run_id: str) -> dt.datetime:
    """The time a ``run=`` partition value names."""
    return dt.datetime.strptime(run_id, RUN_FORMAT).replace(tzinfo=dt.timezone.utc)


def write_table(df, output: str, table: str, run: Run) -> str:
    """Write ``df`` straight to this run's partition of ``table`` (replacing the same run's earlier attempt):
    backfills and tests. An audit run stages its tables first and publishes them together (staging.py)."""
    path = run.path(output, table)
    df.write.mode("overwrite").parquet(path)
    return path


def read_history(spark, output: str, table: str):
    """Every published run of ``table`` (columns ``date`` and ``run`` added), or None if there is none. Asks
    the file system first: Spark reading a glob that matches nothing logs a stack trace before it fails."""
    base = f"{output.rstrip('/')}/{table}"
    if is_connect(spark):  # the client's path, absolute: the server would take a relative one as its own
        base = client_path(base)
    runs = f"{base}/date=*/run=*"
    if not hadoop_fs.matches(spark, runs):
        return None
    return spark.read.option("basePath", base).parquet(runs)  # basePath: date and run become columns


def runs_before(spark, output: str, table: str, run: Run) -> list[str]:
    """Run ids of ``table`` earlier than ``run``, oldest first."""
    history = read_history(spark, output, table)
    if history is None:
        return []
    ids = [r.run for r in history.select(history.run.cast("string").alias("run")).distinct().collect()]
    return sorted(i for i in ids if i < run.run_id)

