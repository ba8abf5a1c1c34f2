"""Small DataFrames shaped as format("bookkeeper")'s tables, for testing the audits' aggregations without a
cluster: rows given as dicts, every column not given null."""
from __future__ import annotations

import datetime as dt

from pyspark.sql.types import StructType

from spark_bookkeeper.bookie_tables import SCHEMAS as BOOKIE_SCHEMAS
from spark_bookkeeper.tables import SCHEMAS

ENTRYLOGS, BOOKIE_LEDGERS = BOOKIE_SCHEMAS["entrylogs"], BOOKIE_SCHEMAS["bookie_ledgers"]
T0 = dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc)


def frame(spark, schema: str, rows: list[dict]):
    names = [f.name for f in StructType.fromDDL(schema).fields]
    unknown = {k for r in rows for k in r} - set(names)
    assert not unknown, f"no such columns {unknown} in {schema}"
    return spark.createDataFrame([tuple(r.get(n) for n in names) for r in rows], schema)


def entrylogs(spark, rows: list[dict]):
    return frame(spark, ENTRYLOGS, rows)


def bookie_ledgers(spark, rows: list[dict]):
    return frame(spark, BOOKIE_LEDGERS, [{"scope_id": 0, "status": "ok", "in_metadata": True, **r} for r in rows])


def ledgers(spark, rows: list[dict]):
    base = {"scope_id": 0, "state": "CLOSED", "ensemble_size": 3, "write_quorum": 2, "ack_quorum": 2,
            "fragments": 1, "ctime": T0, "custom_metadata": {}}
    return frame(spark, SCHEMAS["ledgers"], [{**base, **r} for r in rows])


def fragments(spark, rows: list[dict]):
    return frame(spark, SCHEMAS["fragments"], [{"scope_id": 0, "fragment": 0, "state": "CLOSED", **r} for r in rows])


def underreplicated(spark, rows: list[dict]):
    return frame(spark, SCHEMAS["underreplicated"], [{"scope_id": 0, "state": "marked", "reason": "", **r}
                                                      for r in rows])
