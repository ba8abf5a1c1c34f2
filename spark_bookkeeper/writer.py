"""Batch writes: each task writes its rows to a ledger of its own; the driver's commit appends the
batch's ledgers to the log in one compare-and-set.

- ``write`` (executor): the ``payload`` column (binary, or string as UTF-8) goes to a new ledger
  (``ensembleSize``/``writeQuorum``/``ackQuorum``/``digest``/``password``), tagged in its custom metadata
  with the log, the writer id and the batch; the ledger is closed and (ledger, entries, bytes) returned.
- ``commit`` (driver): ``log.commit_batch`` — once per (writer, batch); a replayed batch adds nothing
  and its duplicate ledgers are deleted. ``mode("overwrite")`` swaps the list, then deletes the old ledgers.
- ``abort``: deletes what the batch wrote. Spark passes None for failed tasks, so ledgers are also found
  by their tags (a sweep of the writer's ledgers that no log lists).
"""
from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage

from bookie.client.exceptions import BKException, BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from spark_bookkeeper import connections
from spark_bookkeeper.log import LogSegment, commit_batch, read_log
from spark_bookkeeper.options import BookKeeperOptionError, WriteOptions

log = logging.getLogger(__name__)
TAG_LOG, TAG_WRITER, TAG_BATCH = "spark.log", "spark.writer", "spark.batch"
WRITE_CHUNK = 4096  # rows appended per append_batch


@dataclass
class LedgerWritten(WriterCommitMessage):
    scope: int
    ledger: int  # -1: the task had no rows
    entries: int
    bytes: int


def payloads_of(batch: pa.RecordBatch) -> list:
    column = batch.column(batch.schema.get_field_index("payload"))
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    if column.null_count:
        raise ValueError(f"payload has {column.null_count} null values; every row needs a payload")
    return column.to_pylist()


class BookKeeperWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, overwrite: bool):
        self.opts = opts
        self.overwrite = overwrite
        self.writer_id = opts.writer_id or uuid.uuid4().hex  # chosen on the driver, travels with the writer

    def _batch_id(self) -> int:
        # A plain batch write is batch 0 of a writer of its own; foreachBatch passes writerId + batchId.
        return self.opts.batch_id if self.opts.batch_id is not None else 0

    def write(self, iterator) -> LedgerWritten:
        opts = self.opts
        handle = None
        entries = size = 0
        pending = None
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            if handle is None:
                bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
                handle = bk.create_ledger(opts.ensemble_size, opts.write_quorum, opts.ack_quorum, digest=opts.digest,
                                          password=opts.password, custom_metadata={
                                              TAG_LOG: opts.log.encode(), TAG_WRITER: self.writer_id.encode(),
                                              TAG_BATCH: str(self._batch_id()).encode()})
            payloads = payloads_of(batch)
            for start in range(0, len(payloads), WRITE_CHUNK):
                chunk = payloads[start: start + WRITE_CHUNK]
                pending = handle.append_batch(chunk)
                entries += len(chunk)
                size += sum(map(len, chunk))
        if handle is None:
            return LedgerWritten(0, -1, 0, 0)
        if pending is not None:
            pending.result()
        handle.close()
        return LedgerWritten(handle.scope_id, handle.ledger_id, entries, size)

    def commit(self, messages) -> None:
        self._commit(messages, self._batch_id())

    def _commit(self, messages, batch_id: int) -> None:
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        written = [m for m in messages if m is not None and m.ledger >= 0]
        segments = [LogSegment(LedgerId(m.scope, m.ledger), m.entries, m.bytes, self.writer_id, batch_id) for m in written]
        applied, replaced = commit_batch(bk.store, self.opts.log, self.writer_id, batch_id, segments, self.overwrite)
        if not applied:
            log.info("log %s: batch %d of writer %s was committed before; dropping its duplicate ledgers",
                     self.opts.log, batch_id, self.writer_id)
            self._delete(bk, [s.ledger for s in segments])
        self._delete(bk, [s.ledger for s in replaced])

    def abort(self, messages) -> None:
        self._abort(messages, self._batch_id())

    def _abort(self, messages, batch_id: int) -> None:
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        listed = {m.ledger for m in messages if m is not None and m.ledger >= 0}
        self._delete(bk, [LedgerId(0, lid) for lid in listed] + self.orphans(bk, batch_id))

    def orphans(self, bk, batch_id: int | None = None) -> list[LedgerId]:
        """Ledgers tagged with this writer (and batch) that the log does not list."""
        return uncommitted_ledgers(bk, self.opts.log, writer=self.writer_id, batch=batch_id)

    @staticmethod
    def _delete(bk, ledgers) -> None:
        delete_ledgers(bk, ledgers)


def delete_ledgers(bk, ledgers) -> None:
    for ledger in ledgers:
        try:
            bk.delete_ledger(ledger)
        except BKNoSuchLedgerExistsException:
            pass
        except BKException as exc:
            log.warning("could not delete ledger %s: %s", ledger, exc)


def uncommitted_ledgers(bk, log_name: str, writer: str | None = None, batch: int | None = None,
                        older_than: float | None = None) -> list[LedgerId]:
    """Ledgers tagged for ``log_name`` (by ``writer``, ``batch``) that the log does not list, and (with
    ``older_than`` seconds) that were created that long ago: left by a task that outlived its
    write's abort, or by a driver that died before committing."""
    in_log = {s.ledger for s in read_log(bk.store, log_name, missing_ok=True).segments}
    cutoff = None if older_than is None else (time.time() - older_than) * 1000
    found = []
    for ledger in bk.list_ledgers(None):
        if ledger in in_log:
            continue
        try:
            md = bk.ledger_metadata(ledger)
        except BKNoSuchLedgerExistsException:
            continue
        tags = md.custom()
        if tags.get(TAG_LOG) != log_name.encode():
            continue
        if writer is not None and tags.get(TAG_WRITER) != writer.encode():
            continue
        if batch is not None and tags.get(TAG_BATCH) != str(batch).encode():
            continue
        if cutoff is not None and md.ctime > cutoff:
            continue
        found.append(ledger)
    return found


def sweep_uncommitted(metadata_service_uri: str, log_name: str, older_than: float = 3600.0) -> list[LedgerId]:
    """Delete the ledgers written for ``log_name`` that no commit took in, once older than ``older_than``
    seconds (a write still in progress is younger). Meant for a scheduled job; returns what it deleted."""
    bk = connections.driver_client(metadata_service_uri)
    doomed = uncommitted_ledgers(bk, log_name, older_than=older_than)
    delete_ledgers(bk, doomed)
    return doomed


class BookKeeperStreamWriter(BookKeeperWriter, DataSourceStreamArrowWriter):
    """``df.writeStream.format("bookkeeper")``: the same writer, once per micro-batch.

    The writer id is stable across restarts (option ``writerId``, else derived from the query's
    ``checkpointLocation``), so a micro-batch replayed after a crash carries a batch id the log has
    already committed and adds nothing.
    """

    def __init__(self, opts: WriteOptions, overwrite: bool):
        if not opts.writer_id:
            if not opts.checkpoint:
                raise BookKeeperOptionError("a streaming write needs option checkpointLocation (or writerId), so that "
                                            "a replayed micro-batch can be recognised and written only once")
            opts.writer_id = "stream-" + hashlib.sha1(opts.checkpoint.encode()).hexdigest()[:16]
        super().__init__(opts, overwrite)

    def _batch_id(self) -> int:
        from pyspark import TaskContext
        return int(TaskContext.get().getLocalProperty("streaming.sql.batchId"))

    def commit(self, messages, batchId: int) -> None:
        self._commit(messages, batchId)

    def abort(self, messages, batchId: int) -> None:
        self._abort(messages, batchId)


def foreach_batch_writer(metadata_service_uri: str, log: str, writer_id: str | None = None, **options):
    """A ``foreachBatch`` function that appends each micro-batch to ``log`` exactly once per batch id.

        query = df.writeStream.foreachBatch(foreach_batch_writer(uri, "events")).start()

    ``writer_id`` names this pipeline in the log (default ``foreachBatch:<log>``: one pipeline per log);
    other options (``ensembleSize``, ``password``, ...) are passed to the writer.
    """
    from spark_bookkeeper.options import check_log_name
    check_log_name(log)
    wid = writer_id or f"foreachBatch:{log}"

    def write_batch(batch_df, batch_id: int) -> None:
        writer = (batch_df.write.format("bookkeeper").mode("append").option("metadataServiceUri", metadata_service_uri)
                  .option("log", log).option("writerId", wid).option("batchId", str(batch_id)))
        for key, value in options.items():
            writer = writer.option(key, str(value))
        writer.save()

    return write_batch
