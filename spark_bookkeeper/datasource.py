"""The ``bookkeeper`` data source (``BookKeeperDataSource``): read ledgers and logs, write logs, inspect
metadata. Its options are parsed and checked in spark_bookkeeper/options.py, read by reader.py (batch),
stream_reader.py (logs) and ledger_stream_reader.py (bare ledgers), written by writer.py.

Which options a read takes is decided in options.py: everything at ``load()`` (``ReadOptions.parse``: names,
values, contradictions, and what the running PySpark cannot honour: spark_versions.py), then what only a batch
read (``check_batch``: no trigger options, Kafka's batch offsets) or only a stream (``check_stream``: no end)
takes. A batch read of a log may be placed by offsets or commit times (log_offsets.py), as Kafka's batch source.

A write is checked on the driver before a task runs (``check_write``): its options, its columns (one
``payload``, binary or string) and that the cluster has ``ensembleSize`` writable bookies.
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import BinaryType, StringType, StructType

from spark_bookkeeper import bookie_tables, tables
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, WriteOptions, check_batch, check_stream
from spark_bookkeeper.spark_versions import arrow_schema

READ_SCHEMA = "ledger_id long, entry_id long, payload binary"
LOG_READ_SCHEMA = READ_SCHEMA + ", log string, segment int"
STREAM_ONLY_OPTIONS = ("startingOffsets", "failOnDataLoss", "maxEntriesPerTrigger")


class BookKeeperDataSource(DataSource):
    """Read ledgers and logs of a BookKeeper cluster, write logs, inspect its metadata.

    Name: ``bookkeeper``

    Options: ``metadataServiceUri`` (the cluster, required); what to read: ``log`` (a log's ledgers in order),
    ``ledgers`` (ids or qualified names) or ``scope``; ``table`` reads metadata instead (``ledgers``,
    ``fragments``, ``bookies``, ``underreplicated``, or what each bookie reports: ``entrylogs``,
    ``bookie_ledgers``); a write names its ``log`` and the new ledgers' quorums. Every read and write option,
    with its default, is in the Spark options reference (docs/reference/spark_options.md).

    Schema: a read gives ``ledger_id long, entry_id long, payload binary``, plus ``log string, segment int``
    when it reads a log; a write takes a DataFrame of one ``payload`` column (binary or string). Streaming
    reads tail a log, or ledgers (open ones up to their LAC as they grow); streaming writes commit each
    micro-batch to the log once.

    Example::

        uri = "zk://127.0.0.1:2181/ledgers"
        df.write.format("bookkeeper").mode("append") \\
            .option("metadataServiceUri", uri).option("log", "events").save()
        spark.read.format("bookkeeper").option("metadataServiceUri", uri).option("log", "events").load().show()
        spark.read.format("bookkeeper").option("metadataServiceUri", uri) \\
            .option("table", "entrylogs").load().where("minor_compaction_candidate").show()
    """

    @classmethod
    def name(cls) -> str:
        return "bookkeeper"

    def schema(self):
        opts = ReadOptions.parse(self.options)
        if opts.table in bookie_tables.SCHEMAS:
            return bookie_tables.SCHEMAS[opts.table]
        if opts.table:
            return tables.SCHEMAS[opts.table]
        from spark_bookkeeper.reader import check_selection
        check_selection(opts)  # unknown log or ledger, wrong password, unreachable cluster: fail at load()
        return LOG_READ_SCHEMA if opts.log else READ_SCHEMA

    def reader(self, schema: StructType):
        opts = ReadOptions.parse(self.options)
        if opts.table in bookie_tables.SCHEMAS:
            return bookie_tables.BookieTableReader(opts)
        if opts.table:
            return tables.TableReader(opts)
        from spark_bookkeeper.reader import BookKeeperReader, PushdownBookKeeperReader
        check_batch(opts)  # Kafka's batch rules; no trigger options
        cls = PushdownBookKeeperReader if opts.filter_pushdown else BookKeeperReader
        return cls(opts, schema, arrow_schema(schema))

    def writer(self, schema: StructType, overwrite: bool):
        from spark_bookkeeper.writer import BookKeeperWriter
        return BookKeeperWriter(check_write(self.options, schema), overwrite)

    def streamReader(self, schema: StructType):
        from spark_bookkeeper.ledger_stream_reader import LedgerStreamReader
        from spark_bookkeeper.reader import BookKeeperReader
        from spark_bookkeeper.stream_reader import LogStreamReader
        opts = ReadOptions.parse(self.options)
        check_stream(opts)  # no end
        cls = LedgerStreamReader if opts.ledgers is not None else LogStreamReader
        return cls(opts, BookKeeperReader(opts, schema, arrow_schema(schema)))

    def streamWriter(self, schema: StructType, overwrite: bool):
        from spark_bookkeeper.writer import BookKeeperStreamWriter
        if overwrite:
            raise BookKeeperOptionException("a log is appended to: use outputMode(\"append\") for a streaming write")
        return BookKeeperStreamWriter(check_write(self.options, schema), overwrite)


def check_write(options, schema: StructType) -> WriteOptions:
    """Everything a write needs, checked before a task runs."""
    opts = WriteOptions.parse(options)
    names = [f.name for f in schema.fields]
    if "payload" not in names:
        raise BookKeeperOptionException(f"the DataFrame has no payload column (columns: {', '.join(names) or 'none'}); "
                                    "write a single column named payload, binary or string")
    others = [n for n in names if n != "payload"]
    if others:
        raise BookKeeperOptionException(f"columns {', '.join(others)} cannot be written: only payload is stored "
                                    "(select or encode them into payload first)")
    kind = schema["payload"].dataType
    if not isinstance(kind, (BinaryType, StringType)):
        raise BookKeeperOptionException(f"payload is {kind.simpleString()}; it must be binary or string")
    from spark_bookkeeper import connections
    bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
    writable = bk.writable_bookies()
    if len(writable) < opts.ensemble_size:
        raise BookKeeperOptionException(f"ensembleSize={opts.ensemble_size} but only {len(writable)} writable bookies "
                                    f"are registered ({', '.join(writable) or 'none'})")
    return opts
