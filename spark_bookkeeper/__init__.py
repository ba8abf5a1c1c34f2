"""Spark data source for BookKeeper ledgers: ``spark.read.format("bookkeeper")``, ``df.write.format("bookkeeper")``.

``format("bookkeeper")`` works right after ``pip install`` (the ``pyspark_bookkeeper`` module exposes
``DefaultSource``, which Spark registers by itself); ``register(spark)`` does the same explicitly.
``stream_lag(query.lastProgress["sources"][i], uri, log)``: how many entries a stream is behind.
"""
from spark_bookkeeper.datasource import BookKeeperDataSource
from spark_bookkeeper.log_offsets import stream_lag
from spark_bookkeeper.options import BookKeeperOptionException
from spark_bookkeeper.writer import foreach_batch_writer, sweep_uncommitted, truncate_log

__all__ = ["BookKeeperDataSource", "BookKeeperOptionException", "foreach_batch_writer", "register", "stream_lag",
           "sweep_uncommitted", "truncate_log"]


def register(spark) -> None:
    """Register the ``bookkeeper`` format with a SparkSession (classic or Connect). Nothing to do where Spark
    already found it by itself: PySpark 4.0 refuses a second registration of a name, later ones replace it."""
    from pyspark.errors import AnalysisException
    try:
        spark.dataSource.register(BookKeeperDataSource)
    except AnalysisException as exc:
        if exc.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise
