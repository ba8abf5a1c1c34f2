"""Which PySpark is running, and what of the Python data source API it has (4.0 to 4.3).

The connector runs on every PySpark with the Python data source API. Where an API is newer than 4.0
it is used where present; where it is absent, the option that needs it is refused, naming the PySpark
it needs (``require``), rather than silently ignored:

- 4.1: filter pushdown (``DataSourceReader.pushFilters``) and Arrow batches to a streaming writer
  (``DataSourceStreamArrowWriter``; 4.0 hands the writer rows).
- 4.2: admission control (``latestOffset(start, limit)``, ``ReadLimit``, ``getDefaultReadLimit``),
  ``SupportsTriggerAvailableNow`` and ``reportLatestOffset``. Before 4.2 Spark calls
  ``latestOffset()`` with no argument and runs ``Trigger.AvailableNow`` as one micro-batch of what
  the source held when the query started.
"""
from __future__ import annotations

from abc import ABC
from dataclasses import dataclass

import pyspark

__all__ = ["ADMISSION_CONTROL", "FILTER_PUSHDOWN", "PYSPARK_VERSION", "STREAM_ARROW_WRITER", "ReadAllAvailable",
           "ReadLimit", "ReadMaxRows", "StreamWriterBase", "SupportsTriggerAvailableNow", "arrow_schema", "has", "needs"]

PYSPARK_VERSION: tuple[int, int] = tuple(int(part) for part in pyspark.__version__.split(".")[:2])  # type: ignore
FILTER_PUSHDOWN = (4, 1)
STREAM_ARROW_WRITER = (4, 1)
ADMISSION_CONTROL = (4, 2)


def has(since: tuple[int, int]) -> bool:
    """Whether the running PySpark is ``since`` or newer."""
    return PYSPARK_VERSION >= since


def needs(since: tuple[int, int], what: str) -> str | None:
    """Why ``what`` cannot be used on the running PySpark, or None when it can."""
    if has(since):
        return None
    return (f"{what} needs PySpark {since[0]}.{since[1]} or newer; this is PySpark {pyspark.__version__}. "
            f"Upgrade PySpark, or leave it unset")


if has(ADMISSION_CONTROL):
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxRows,
                                                  SupportsTriggerAvailableNow)
else:
    # Stand-ins with the same names, so the stream readers are one class on every PySpark: Spark before
    # 4.2 never passes a ReadLimit nor calls prepareForTriggerAvailableNow.
    class ReadLimit:  # type: ignore[no-redef]
        """What a micro-batch may take (PySpark 4.2's ``pyspark.sql.streaming.datasource.ReadLimit``)."""

    @dataclass
    class ReadAllAvailable(ReadLimit):  # type: ignore[no-redef]
        pass

    @dataclass
    class ReadMaxRows(ReadLimit):  # type: ignore[no-redef]
        max_rows: int

    class SupportsTriggerAvailableNow(ABC):  # type: ignore[no-redef]
        def prepareForTriggerAvailableNow(self) -> None:
            pass

if has(STREAM_ARROW_WRITER):
    from pyspark.sql.datasource import DataSourceStreamArrowWriter as StreamWriterBase
else:
    from pyspark.sql.datasource import DataSourceStreamWriter as StreamWriterBase


def arrow_schema(schema):
    """The Arrow schema of the batches a reader hands Spark for ``schema`` (4.3 names the timestamps' zone,
    earlier PySparks take it as UTC)."""
    import inspect

    from pyspark.sql.pandas.types import to_arrow_schema
    if "timezone" in inspect.signature(to_arrow_schema).parameters:
        return to_arrow_schema(schema, timezone="UTC")
    return to_arrow_schema(schema, timestamp_utc=True)
