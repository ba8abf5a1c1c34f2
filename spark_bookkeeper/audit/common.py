"""What both audits share: reading the tables of format("bookkeeper") (each through the data source, on a
classic session as on Spark Connect), the bookie row statuses, and the snapshot step (write this run's
partition, read it back, so every finding is computed from what was stored)."""
from __future__ import annotations

import math
from collections.abc import Callable

from spark_bookkeeper.audit.result import AuditResult
from spark_bookkeeper.audit.staging import StagedTables
from spark_bookkeeper.audit.threads import side_by_side
from spark_bookkeeper.options import BOOKIE_TIMEOUT

ANSWERED = ("ok", "partial")  # bookie_ledgers rows from a bookie that answered (partial: a stock BookKeeper bookie)
UNAVAILABLE = "unavailable"


PER_BOOKIE = ("entrylogs", "bookie_ledgers")  # the tables whose rows each bookie answers for


def read_table(spark, uri: str, table: str, bookie_timeout: float = BOOKIE_TIMEOUT):
    """``table`` as format("bookkeeper") reads it; a per-bookie table waits for each bookie's answer at least
    ``bookie_timeout`` seconds (its bookieTimeout option: more for a request that lists more)."""
    reader = spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("table", table)
    if table in PER_BOOKIE:
        reader = reader.option("bookieTimeout", str(bookie_timeout))
    return reader.load()


def read_tables(spark, uri: str, names: tuple[str, ...], bookie_timeout: float = BOOKIE_TIMEOUT) -> dict[str, object]:
    """The tables ``names`` as format("bookkeeper") reads them: ``entrylogs`` and ``bookie_ledgers`` one task
    per bookie, planned by the data source (bookie_tables.BookiePlan: one pass over the metadata each, the
    planner keeping compact per-ledger facts only), ``ledgers`` and ``fragments`` split by ledger-id ranges
    (the planner lists ids, never holds metadata). Nothing runs on the client but the plans' requests: the
    same code runs on a classic session, on Spark Connect and on platforms that offer only DataFrames."""
    return {name: read_table(spark, uri, name, bookie_timeout) for name in names}


def check_bookie_timeout(seconds: float) -> None:
    """ValueError unless ``seconds`` is a finite number above 0."""
    if not 0 < seconds < math.inf:
        raise ValueError(f"bookie timeout {seconds} must be a finite number of seconds above 0")


def snapshot(staged: StagedTables, df, table: str):
    """Write ``df`` as this run's ``table`` (staged until the run is published) and read it back: the cluster
    is asked once, and the findings and the stored history agree."""
    return staged.spark.read.parquet(staged.write(df, table))


def snapshots(staged: StagedTables, tables: dict[str, object]) -> list:
    """``snapshot`` of several tables side by side (each a DataFrame, or a function making one), returned in
    ``tables``' order."""
    def writer(name: str) -> Callable[[], str]:
        return lambda: staged.write(tables[name]() if callable(tables[name]) else tables[name], name)

    paths = side_by_side({name: writer(name) for name in tables})
    return [staged.spark.read.parquet(paths[name]) for name in tables]


def check_cluster(uri: str) -> None:
    """Fail early, with exit code 2, when the cluster cannot be reached (rather than deep inside a Spark plan)."""
    from spark_bookkeeper import connections
    connections.driver_client(uri)


FINDINGS_SCHEMA = "audit string, kind string, count long, at_risk boolean, summary string, run_at timestamp"


def record_findings(staged: StagedTables, result: AuditResult):
    """The run's findings as a table too (``findings_<audit>``); returned with every published run's before it
    (kind, count, run_at): reports plot them over time."""
    from pyspark.sql import functions as F

    from spark_bookkeeper.audit.history import read_history
    rows = [(result.audit, f.kind, f.count, f.at_risk, f.summary, result.run.at) for f in result.findings]
    table = f"findings_{result.audit}"
    columns = ("kind", "count", "run_at")
    current = snapshot(staged, staged.spark.createDataFrame(rows, FINDINGS_SCHEMA), table).select(*columns)
    earlier = read_history(staged.spark, staged.output, table)
    if earlier is None:
        return current
    # An earlier attempt of this very run (the same --run-at) is the one being replaced.
    return earlier.where(F.col("run").cast("string") != result.run.run_id).select(*columns).unionByName(current)
