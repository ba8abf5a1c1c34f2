"""The ``bookkeeper`` data source: read ledgers and logs, write logs, inspect metadata.

Name: ``bookkeeper``

Options (read):
    metadataServiceUri  zk://host:port/ledgers (required)
    log | ledgers | scope   what to read: a log's ledgers in order, ids or qualified names ("12,13"), or a scope
    password            the ledgers' password (default empty)
    digest              expected digest type (checked against the metadata)
    startEntry, endEntry    entry range of each ledger (default: all up to the last entry / LAC)
    maxEntriesPerPartition  split big fragments (default 100000)
    maxBytesPerPartition, openCostInBytes   pack the slices one bookie serves into partitions of about
                        this many estimated bytes (default 128 MiB), each slice counting openCostInBytes
                        more (default 8 KiB)
    recover             true: recover (fence and close) open ledgers first; default: read up to the LAC.
                        Refused for a streaming read of ledgers (a stream must not fence a live writer)
    table               ledgers | fragments | bookies | underreplicated: one row per ledger / fragment / bookie
                        / under-replicated ledger (missing replicas, AutoRecovery's state and reason) instead;
                        entrylogs | bookie_ledgers: asked of each bookie by the executors (bookie_tables.py),
                        one row per entry log (usage, compaction candidates) / per ledger on a bookie
                        (entries listed against the striping, live and deleted bytes); a bookie that does
                        not answer gives rows with status "unavailable"
    ledgersPerPartition table=ledgers | fragments: ledgers whose metadata one task reads (default 5000); the
                        driver lists ids only
    filterPushdown      true: push filters on ledger_id / entry_id down (needs the Spark conf
                        spark.sql.python.filterPushdown.enabled=true)
    maxEntriesPerTrigger    (streaming) entries per micro-batch; Trigger.AvailableNow honours it
    startingOffsets     (streaming a log) earliest (default) | latest | {"segment": s, "entry": e}
    failOnDataLoss      (streaming a log) true (default): fail, naming them, when the next segments were
                        truncated away; false: log them and go on from the first segment left
Streaming reads tail a log (stream_reader.py) or ledgers, open ones up to their LAC as they grow
(ledger_stream_reader.py); not a scope.
Options (write): metadataServiceUri, log, ensembleSize (3), writeQuorum (2), ackQuorum (2), digest (crc32c),
    password; writerId (+ batchId) name the writer in the log for exactly-once commits (streams derive it
    from checkpointLocation; foreach_batch_writer sets both); retentionSegments, retentionMs: drop the log's
    oldest segments at each commit (never the batch being committed)

Schema (read): ``ledger_id long, entry_id long, payload binary`` plus ``log string, segment int`` when a
log is read. Write: a DataFrame with one ``payload`` column (binary or string).

Example::

    df.write.format("bookkeeper").mode("append") \\
        .option("metadataServiceUri", "zk://127.0.0.1:2181/ledgers").option("log", "events").save()
    spark.read.format("bookkeeper").option("metadataServiceUri", "zk://127.0.0.1:2181/ledgers") \\
        .option("log", "events").load().show()
    spark.read.format("bookkeeper").option("metadataServiceUri", "zk://127.0.0.1:2181/ledgers") \\
        .option("table", "entrylogs").load().where("minor_compaction_candidate").show()
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import BinaryType, StringType, StructType

from spark_bookkeeper import bookie_tables, tables
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, WriteOptions

READ_SCHEMA = "ledger_id long, entry_id long, payload binary"
LOG_READ_SCHEMA = READ_SCHEMA + ", log string, segment int"
STREAM_ONLY_OPTIONS = ("startingOffsets", "failOnDataLoss", "maxEntriesPerTrigger")


class BookKeeperDataSource(DataSource):
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
        for name in STREAM_ONLY_OPTIONS:
            if name in self.options:
                raise BookKeeperOptionException(f"option {name} applies to streaming reads (spark.readStream); a batch "
                                                "read takes every segment still in the log, or startEntry/endEntry")
        cls = PushdownBookKeeperReader if opts.filter_pushdown else BookKeeperReader
        return cls(opts, schema, to_arrow_schema(schema, timezone="UTC"))

    def writer(self, schema: StructType, overwrite: bool):
        from spark_bookkeeper.writer import BookKeeperWriter
        return BookKeeperWriter(check_write(self.options, schema), overwrite)

    def streamReader(self, schema: StructType):
        from spark_bookkeeper.ledger_stream_reader import LedgerStreamReader
        from spark_bookkeeper.reader import BookKeeperReader
        from spark_bookkeeper.stream_reader import LogStreamReader
        opts = ReadOptions.parse(self.options)
        cls = LedgerStreamReader if opts.ledgers is not None else LogStreamReader
        return cls(opts, BookKeeperReader(opts, schema, to_arrow_schema(schema, timezone="UTC")))

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
