"""Auto-registration hook: Spark imports top-level ``pyspark_*`` modules and registers ``DefaultSource``."""
from spark_bookkeeper.datasource import BookKeeperDataSource as DefaultSource

__all__ = ["DefaultSource"]
