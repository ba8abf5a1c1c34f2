"""What both audits share: reading the tables of format("bookkeeper") (the per-bookie ones planned from one
pass over the ledger metadata), the bookie row statuses, and the snapshot step (write this run's partition,
read it back, so every finding is computed from what was stored)."""
from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from spark_bookkeeper.audit.history import Run, write_table

ANSWERED = ("ok", "partial")  # bookie_ledgers rows from a bookie that answered (partial: a stock BookKeeper bookie)
UNAVAILABLE = "unavailable"
T = TypeVar("T")


def read_table(spark, uri: str, table: str):
    return spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("table", table).load()


def read_tables(spark, uri: str, names: tuple[str, ...]) -> dict[str, object]:
    """The tables ``names`` as format("bookkeeper") gives them: ``entrylogs`` and ``bookie_ledgers`` one task per
    bookie on the executors from one plan for both (bookie_tables.BookiePlan: one pass over the metadata, the
    driver keeping compact per-ledger facts only); ``ledgers`` and ``fragments`` read as the data source reads
    them, split by ledger-id ranges across the executors (the driver lists ids, never holds metadata)."""
    from spark_bookkeeper import bookie_tables, connections
    per_bookie_tables = [name for name in names if name in bookie_tables.SCHEMAS]
    plan = None
    if per_bookie_tables:
        bk = connections.driver_client(uri)
        plan = bookie_tables.BookiePlan(bk, bk.store.ledgers_with_metadata(None))
    out = {}
    for name in names:
        if name in bookie_tables.SCHEMAS:
            partitions = plan.partitions(name)
            per_bookie = spark.sparkContext.parallelize(partitions, max(1, len(partitions)))
            out[name] = spark.createDataFrame(per_bookie.flatMap(functools.partial(bookie_tables.read_partition, name)),
                                              bookie_tables.SCHEMAS[name])
        else:
            out[name] = read_table(spark, uri, name)
    return out


def snapshot(spark, df, output: str, table: str, run: Run, written: dict[str, str]):
    """Write ``df`` as this run's ``table``, note where, and read it back: the cluster is asked once, and the
    findings and the stored history agree."""
    path = write_table(df, output, table, run)
    written[table] = path
    return spark.read.parquet(path)


def side_by_side(jobs: dict[str, Callable[[], T]]) -> dict[str, T]:
    """Call each of ``jobs`` in its own thread and return their results by name: Spark runs the jobs they start
    side by side (a job over a few small files is mostly waiting: scheduling, listing, committing)."""
    with ThreadPoolExecutor(max(1, len(jobs)), thread_name_prefix="audit-job") as pool:
        futures = {name: pool.submit(job) for name, job in jobs.items()}
        return {name: future.result() for name, future in futures.items()}


def snapshots(spark, tables: dict[str, object], output: str, run: Run, written: dict[str, str]) -> list:
    """``snapshot`` of several tables side by side (each a DataFrame, or a function making one), returned in
    ``tables``' order."""
    def writer(name: str) -> Callable[[], str]:
        return lambda: write_table(tables[name]() if callable(tables[name]) else tables[name], output, name, run)

    paths = side_by_side({name: writer(name) for name in tables})
    written.update(paths)
    return [spark.read.parquet(paths[name]) for name in tables]


def check_cluster(uri: str) -> None:
    """Fail early, with exit code 2, when the cluster cannot be reached (rather than deep inside a Spark plan)."""
    from spark_bookkeeper import connections
    connections.driver_client(uri)


def record_findings(spark, result, output_dir: str):
    """The run's findings as a table too (``findings_<audit>``), and every run's so far: reports plot them
    over time."""
    from spark_bookkeeper.audit.history import read_history
    rows = [(result.audit, f.kind, f.count, f.at_risk, f.summary, result.run.at) for f in result.findings]
    df = spark.createDataFrame(rows, "audit string, kind string, count long, at_risk boolean, summary string, "
                                     "run_at timestamp")
    table = f"findings_{result.audit}"
    snapshot(spark, df, output_dir, table, result.run, result.tables)
    return read_history(spark, output_dir, table)
