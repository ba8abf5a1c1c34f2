"""A SparkSession for this machine's demos, benchmarks and tests: local[2], loopback only, quiet.

Python writers get Arrow batches of WRITE_ARROW_BATCH_ROWS (1,024) rows
(``spark.sql.execution.arrow.maxRecordsPerBatch``), not Spark's 10,000: ~1 MiB batches of 1 KiB rows cost
the JVM less CPU per write (docs/benchmarks.md, bench/spark_write.py).
"""
from __future__ import annotations

import os
import sys

# Rows per Arrow batch Spark sends a Python writer (Spark's default is 10,000): ~1 MiB batches of 1 KiB
# rows cost the JVM less CPU per write (figures: docs/benchmarks.md, bench/spark_write.py). Reads are
# not affected: the reader hands Spark Arrow batches of its own.
WRITE_ARROW_BATCH_ROWS = 1024


def local_spark_session(app_name: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # workers need this venv (pyarrow, the package)
    from pyspark.sql import SparkSession
    session = (SparkSession.builder.master("local[2]").appName(app_name)
               .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
               .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(WRITE_ARROW_BATCH_ROWS)).getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session
