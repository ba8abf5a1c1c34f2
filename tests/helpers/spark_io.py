"""Reading and writing logs through the connector (``format("bookkeeper")``), as the Spark tests do."""
from __future__ import annotations

from pyspark.sql import functions as F


def source(spark, uri: str, **options):
    reader = spark.read.format("bookkeeper").option("metadataServiceUri", uri)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def write(df, uri: str, log: str, mode: str = "append", **options):
    writer = df.write.format("bookkeeper").mode(mode).option("metadataServiceUri", uri).option("log", log)
    for key, value in options.items():
        writer = writer.option(key, value)
    writer.save()


def payloads(spark, start: int, count: int, partitions: int = 3):
    return spark.range(start, start + count, numPartitions=partitions).select(
        F.concat(F.lit("event-"), F.col("id").cast("string")).cast("binary").alias("payload"))
