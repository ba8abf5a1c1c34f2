"""The storage and replication audits of a BookKeeper cluster, as Spark jobs over format("bookkeeper")'s tables.

``run_storage_audit`` and ``run_replication_audit`` write this run's tables as Parquet under
``OUTPUT/<table>/date=YYYY-MM-DD/run=YYYYMMDDTHHMMSSZ/`` and a Markdown report with plots, published together
once all are written (staging.py), and return an AuditResult (its ``exit_code``: 0 nothing at risk, 3 data at
risk); a run interrupted or failed raises RunAborted having kept nothing (exit code 130 or 1). ``jobs/*.py``
(spark-submit), ``bk audit`` and the notebooks all run this code.
"""
from spark_bookkeeper.audit.history import Run
from spark_bookkeeper.audit.replication import run_replication_audit
from spark_bookkeeper.audit.result import (EXIT_AT_RISK, EXIT_FAILED, EXIT_OK, EXIT_USAGE, INTERRUPTED, AuditResult,
                                           Finding, RunAborted)
from spark_bookkeeper.audit.storage import run_storage_audit

__all__ = ["AuditResult", "EXIT_AT_RISK", "EXIT_FAILED", "EXIT_OK", "EXIT_USAGE", "Finding", "INTERRUPTED", "Run",
           "RunAborted", "run_replication_audit", "run_storage_audit"]
