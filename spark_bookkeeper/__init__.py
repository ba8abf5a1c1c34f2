"""Spark data source for BookKeeper ledgers: ``spark.read.format("bookkeeper")``, ``df.write.format("bookkeeper")``.

``format("bookkeeper")`` works right after ``pip install`` (the ``pyspark_bookkeeper`` module exposes
``DefaultSource``, which Spark registers by itself); ``register(spark)`` does the same explicitly.
"""
from spark_bookkeeper.datasource import BookKeeperDataSource
from spark_bookkeeper.options import BookKeeperOptionException
from spark_bookkeeper.writer import foreach_batch_writer, sweep_uncommitted, truncate_log

__all__ = ["BookKeeperDataSource", "BookKeeperOptionException", "foreach_batch_writer", "register", "sweep_uncommitted",
           "truncate_log"]


def register(spark) -> None:
    """Register the ``bookkeeper`` format with a SparkSession."""
    spark.dataSource.register(BookKeeperDataSource)
