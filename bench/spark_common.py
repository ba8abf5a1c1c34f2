"""Shared by bench/spark_read.py and bench/spark_write.py: a local cluster, a SparkSession, a Spark Connect
session next to it (``connect_session``: a server of its own, the same settings), a timer."""
from __future__ import annotations

import argparse
import logging
import os
import shutil
import tempfile
import time
from contextlib import contextmanager

ROWS = 200_000
PAYLOAD = 1024
PARTITIONS = 4


@contextmanager
def connect_session(base: str):
    """A remote SparkSession on a Spark Connect server of its own (local[2], the classic session's settings),
    started under ``base``, stopped by PID at the end. Build its DataFrames and run its calls inside
    ``connect_mode()`` (bookie.testing.spark_connect: pyspark picks Connect's functions by an environment
    variable, and the classic session shares the process)."""
    from bookie.testing.spark_connect import SparkConnectServer
    with SparkConnectServer(os.path.join(base, "connect")) as server:
        session = server.session()
        try:
            yield session
        finally:
            session.stop()


def on_connect(call):
    """``call`` run with pyspark.sql's functions Spark Connect's (a contender of best_of_each)."""
    from bookie.testing.spark_connect import connect_mode

    def run():
        with connect_mode():
            return call()
    return run


@contextmanager
def cluster_and_spark():
    logging.getLogger("kazoo.client").setLevel(logging.ERROR)
    from bookie.testing.local_bookkeeper import LocalBookKeeper
    from spark_bookkeeper.local_session import local_spark_session
    base = tempfile.mkdtemp(prefix="bk-bench-spark-", dir=os.environ.get("BENCH_DIR"))
    try:
        with LocalBookKeeper(3, base_dir=os.path.join(base, "cluster")) as cluster:
            spark = local_spark_session("bench")
            try:
                yield cluster, spark, base
            finally:
                spark.stop()
    finally:
        shutil.rmtree(base, ignore_errors=True)


def parse_args(doc: str):
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--rows", type=int, default=ROWS)
    parser.add_argument("--runs", type=int, default=3)
    return parser.parse_args()


def best_of_each(runs: int, contenders: dict) -> dict:
    """Seconds of the fastest of ``runs`` calls of each contender, taking turns (after one warm-up round),
    so that none profits from a JVM the others warmed up."""
    for fn in contenders.values():
        fn()
    times: dict = {name: [] for name in contenders}
    for _ in range(runs):
        for name, fn in contenders.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {name: min(t) for name, t in times.items()}


def payload_frame(spark, rows: int = ROWS):
    from pyspark.sql import functions as F
    return spark.range(rows, numPartitions=PARTITIONS).select(
        F.expr(f"cast(rpad(cast(id as string), {PAYLOAD}, 'x') as binary)").alias("payload"))


def line(name: str, seconds: float, rows: int = ROWS, extra: str = "") -> str:
    return f"  {name:34s}: {rows / seconds:10,.0f} rows/s  {rows * PAYLOAD / seconds / 1e6:7.1f} MB/s {extra}"
