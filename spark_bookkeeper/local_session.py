"""A SparkSession for this machine's demos, benchmarks and tests: local[2], loopback only, quiet."""
from __future__ import annotations

import os
import sys

# Rows per Arrow batch Spark sends a Python writer (Spark's default is 10,000). With 1 KiB payloads a
# batch of 1,024 rows is ~1 MiB: the JVM spent 0.32-0.73 s of CPU per 200k-row write instead of
# 0.56-1.1, and df.write.format("bookkeeper") ran ~9% faster (README, Benchmarks). Reads are not
# affected: the reader hands Spark Arrow batches of its own.
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
