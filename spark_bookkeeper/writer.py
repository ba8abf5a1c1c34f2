"""Batch writes: each task writes its rows to a ledger of its own; the driver's commit appends the
batch's ledgers to the log in one compare-and-set.

- ``write`` (executor): the ``payload`` column (binary, or string as UTF-8) goes to a new ledger
  (``ensembleSize``/``writeQuorum``/``ackQuorum``/``digest``/``password``), tagged in its custom metadata
  with the log, the writer id and the batch (``spark.log``, ``spark.writer``, ``spark.batch``); each Arrow
  batch's payloads go to ``append_batch`` as they lie in Arrow's buffers (``payloads_of``); the ledger is
  closed and (ledger, entries, bytes) returned (``LedgerWritten``).
- ``commit`` (driver): ``log.commit_batch`` — once per (writer, batch); a replayed batch adds nothing
  and its duplicate ledgers are deleted. ``mode("overwrite")`` swaps the list, then deletes the old ledgers;
  ``retentionSegments``/``retentionMs`` drop first segments in the commit's CAS, deleted the same way
  (``bookie.client.log_truncation.delete_truncated``; ``truncate_log`` does it on demand).
  A commit whose ZooKeeper reply was lost reads the log back to learn whether it landed; a commit whose
  ledgers a sweep took fails the batch and leaves the log unchanged (see ``spark_bookkeeper.log``).
- ``abort``: deletes what the batch wrote. Spark passes None for failed tasks, so ledgers are also found
  by their tags (a sweep of the writer's ledgers that no log lists). Whatever the log names is never
  deleted (Spark may abort a batch whose commit landed), and nothing is deleted if the log cannot be read.
- Tasks heartbeat a running-writer marker (``log.touch_running``) that ``sweep_uncommitted`` respects.
"""
from __future__ import annotations

import hashlib
import logging
import time
import uuid
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage

from bookie.client import PayloadColumn
from bookie.client.log_truncation import TruncationResult, delete_truncated
from bookie.client.log_truncation import truncate_log as truncate
from bookie.exceptions import BKException, BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from spark_bookkeeper import connections
from spark_bookkeeper.log import (LogRetention, LogSegment, LogUnavailableException, claim_for_sweep, commit_batch,
                                  finish_running, read_log_retrying, release_swept, running_writers, touch_running)
from spark_bookkeeper.options import BookKeeperOptionException, WriteOptions
from spark_bookkeeper.spark_versions import StreamWriterBase

log = logging.getLogger(__name__)
TAG_LOG, TAG_WRITER, TAG_BATCH = "spark.log", "spark.writer", "spark.batch"
WRITE_CHUNK = 4096  # rows appended per append_batch
RUNNING_HEARTBEAT_SECONDS = 30.0  # a task re-touches its writer's running marker this often while it writes
QUERY_ID_PROPERTY = "sql.streaming.queryId"  # Spark's StreamExecution.QUERY_ID_KEY, a local property of the query


@dataclass
class LedgerWritten(WriterCommitMessage):
    scope: int
    ledger: int  # -1: the task had no rows
    entries: int
    bytes: int


def payloads_of(batch: pa.RecordBatch) -> PayloadColumn | list:
    """The batch's payloads as they lie in Arrow's buffers (a ``PayloadColumn``: no Python object per row);
    a list of bytes for a type laid out otherwise."""
    column = batch.column(batch.schema.get_field_index("payload"))
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        column = column.cast(pa.binary())
    if column.null_count:
        raise ValueError(f"payload has {column.null_count} null values; every row needs a payload")
    if not (pa.types.is_binary(column.type) or pa.types.is_large_binary(column.type)):
        return column.to_pylist()
    _, offsets, data = column.buffers()
    offsets = np.frombuffer(offsets, dtype=np.int64 if pa.types.is_large_binary(column.type) else np.int32)
    return PayloadColumn.of(data if data is not None else b"", offsets[column.offset: column.offset + len(column) + 1])


def payload_bytes(payloads: PayloadColumn | list) -> int:
    return payloads.nbytes if isinstance(payloads, PayloadColumn) else sum(map(len, payloads))


class BookKeeperWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, overwrite: bool):
        self.opts = opts
        self.overwrite = overwrite
        # A named writer (writerId, a stream, foreachBatch) may see a batch replayed: the log keeps its last
        # batch id. A plain write gets a fresh id on the driver (it travels with the writer) and never replays.
        self.replayable = bool(opts.writer_id)
        self.writer_id = opts.writer_id or uuid.uuid4().hex

    def _batch_id(self) -> int:
        # A plain batch write is batch 0 of a writer of its own; foreachBatch passes writerId + batchId.
        return self.opts.batch_id if self.opts.batch_id is not None else 0

    def write(self, iterator) -> LedgerWritten:
        opts = self.opts
        handle = bk = None
        entries = size = 0
        pending = None
        touched = 0.0
        for batch in iterator:
            if batch.num_rows == 0:
                continue
            if handle is None:
                bk = connections.driver_client(opts.uri, opts.zk_connect_timeout)
                touch_running(bk.store, opts.log, self.writer_id)  # before the ledger exists: the sweep sees it
                touched = time.monotonic()
                handle = bk.create_ledger(opts.ensemble_size, opts.write_quorum, opts.ack_quorum, digest=opts.digest,
                                          password=opts.password, custom_metadata={
                                              TAG_LOG: opts.log.encode(), TAG_WRITER: self.writer_id.encode(),
                                              TAG_BATCH: str(self._batch_id()).encode()})
            payloads = payloads_of(batch)
            for start in range(0, len(payloads), WRITE_CHUNK):
                chunk = payloads[start: start + WRITE_CHUNK]
                pending = handle.append_batch(chunk)
                entries += len(chunk)
                size += payload_bytes(chunk)
            if time.monotonic() - touched >= RUNNING_HEARTBEAT_SECONDS:
                touch_running(bk.store, opts.log, self.writer_id)
                touched = time.monotonic()
        if handle is None:
            return LedgerWritten(0, -1, 0, 0)
        if pending is not None:
            pending.result()
        handle.close()
        touch_running(bk.store, opts.log, self.writer_id)  # the ledger now waits for the job's commit
        return LedgerWritten(handle.scope_id, handle.ledger_id, entries, size)

    def commit(self, messages) -> None:
        self._commit(messages, self._batch_id())

    def _commit(self, messages, batch_id: int) -> None:
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        written = [m for m in messages if m is not None and m.ledger >= 0]
        segments = [LogSegment(LedgerId(m.scope, m.ledger), m.entries, m.bytes, self.writer_id, batch_id) for m in written]
        applied, stored = commit_batch(bk.store, self.opts.log, self.writer_id, batch_id, segments, self.overwrite,
                                       self.replayable, self.opts.retention())
        if applied:
            # Overwritten segments and those retention dropped (and any an earlier deletion left pending).
            try:
                truncated = delete_truncated(bk, stored)
                if truncated.deleted or truncated.failed:
                    log.info("%s", truncated.describe())
            except BKException as exc:  # the batch is settled; what is pending stays recorded in the log
                log.warning("log %s: truncated ledgers stay pending (the next commit or truncate_log retries): %s",
                            self.opts.log, exc)
        else:
            log.info("log %s: batch %d of writer %s was committed before; dropping its duplicate ledgers",
                     self.opts.log, batch_id, self.writer_id)
            try:
                delete_unlisted(bk, self.opts.log, [s.ledger for s in segments])
            except LogUnavailableException as exc:  # the batch is settled; sweep_uncommitted removes these later
                log.warning("log %s: ledgers %s are left for sweep_uncommitted: %s", self.opts.log,
                            [s.ledger for s in segments], exc)
        finish_running(bk.store, self.opts.log, self.writer_id)

    def abort(self, messages) -> None:
        self._abort(messages, self._batch_id())

    def _abort(self, messages, batch_id: int) -> None:
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        listed = [LedgerId(m.scope, m.ledger) for m in messages if m is not None and m.ledger >= 0]
        try:
            delete_unlisted(bk, self.opts.log, listed + self.orphans(bk, batch_id))
        except LogUnavailableException as exc:
            log.warning("abort of batch %d of writer %s deletes nothing: %s (sweep_uncommitted removes what no "
                        "commit took in)", batch_id, self.writer_id, exc)
            return
        finish_running(bk.store, self.opts.log, self.writer_id)

    def orphans(self, bk, batch_id: int | None = None) -> list[LedgerId]:
        """Ledgers tagged with this writer (and batch) that the log does not list."""
        return uncommitted_ledgers(bk, self.opts.log, writer=self.writer_id, batch=batch_id)


def delete_ledgers(bk, ledgers) -> list[LedgerId]:
    """Delete ``ledgers``; returns those now gone (a failed delete is logged and left for a later try)."""
    gone = []
    for ledger in ledgers:
        try:
            bk.delete_ledger(ledger)
        except BKNoSuchLedgerExistsException:
            pass
        except BKException as exc:
            log.warning("could not delete ledger %s: %s", ledger, exc)
            continue
        gone.append(ledger)
    return gone


def delete_unlisted(bk, log_name: str, ledgers: list[LedgerId]) -> None:
    """Delete those of ``ledgers`` that the log does not name (read now). LogUnavailableException, having
    deleted nothing, if the log cannot be read: "could not read" is not "not there"."""
    if ledgers:
        listed = read_log_retrying(bk.store, log_name).ledgers()
        delete_ledgers(bk, [lid for lid in ledgers if lid not in listed])


def uncommitted_ledgers(bk, log_name: str, writer: str | None = None, batch: int | None = None,
                        older_than: float | None = None, spare: set[str] = frozenset()) -> list[LedgerId]:
    """Ledgers tagged for ``log_name`` (by ``writer``, ``batch``; by none of the writers ``spare``) that
    the log does not list, and (with ``older_than`` seconds) that were created that long ago: left by a
    task that outlived its write's abort, or by a driver that died before committing."""
    in_log = read_log_retrying(bk.store, log_name).ledgers()
    spared = {w.encode() for w in spare}
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
        if tags.get(TAG_WRITER) in spared:
            continue
        if batch is not None and tags.get(TAG_BATCH) != str(batch).encode():
            continue
        if cutoff is not None and md.ctime > cutoff:
            continue
        found.append(ledger)
    return found


def sweep_uncommitted(metadata_service_uri: str, log_name: str, older_than: float = 3600.0) -> list[LedgerId]:
    """Delete the ledgers written for ``log_name`` that no commit took in, once older than ``older_than``
    seconds, except those of a writer whose tasks heartbeat within ``older_than`` (a write still in
    progress). Meant for a scheduled job; returns what it deleted.

    The ledgers are marked in the log by compare-and-set before they are deleted, so a commit racing
    the sweep fails its batch instead of naming a deleted ledger (protocol in ``spark_bookkeeper.log``).
    """
    bk = connections.driver_client(metadata_service_uri)
    running = running_writers(bk.store, log_name, older_than)
    candidates = uncommitted_ledgers(bk, log_name, older_than=older_than, spare=running)
    marked = claim_for_sweep(bk.store, log_name, candidates)
    deleted = delete_ledgers(bk, marked)
    release_swept(bk.store, log_name, deleted)
    return deleted


def truncate_log(metadata_service_uri: str, log_name: str, *, before_segment: int | None = None,
                 older_than_ms: int | None = None, now_ms: int | None = None) -> TruncationResult:
    """Drop the first segments of ``log_name``: those numbered below ``before_segment``, and/or those
    committed more than ``older_than_ms`` before ``now_ms`` (default: now), in one compare-and-set; then
    delete their ledgers. Segment numbers of what stays do not change (the log's ``first_segment``
    moves), so streams' offsets keep their meaning. A ledger that fails to be deleted is reported in
    the result's ``failed`` and retried by the next truncation. Returns what was dropped and deleted."""
    if before_segment is None and older_than_ms is None:
        raise BookKeeperOptionException("truncate_log needs before_segment or older_than_ms")
    if (before_segment is not None and before_segment < 0) or (older_than_ms is not None and older_than_ms < 0):
        raise BookKeeperOptionException(f"truncate_log: before_segment={before_segment} and older_than_ms="
                                        f"{older_than_ms} must not be negative")
    bk = connections.driver_client(metadata_service_uri)
    return truncate(bk, log_name, LogRetention(before_segment=before_segment, max_age_ms=older_than_ms,
                                               now_ms=now_ms))


class BookKeeperStreamWriter(BookKeeperWriter, StreamWriterBase):
    """``df.writeStream.format("bookkeeper")``: the same writer, once per micro-batch (Arrow batches on every
    PySpark: 4.0's worker hands Arrow to any ``DataSourceArrowWriter``, 4.1 added the streaming one).

    The writer id is stable across restarts (option ``writerId``, else derived from the query's
    ``checkpointLocation``), so a micro-batch replayed after a crash carries a batch id the log has
    already committed and adds nothing.
    """

    def __init__(self, opts: WriteOptions, overwrite: bool):
        if not opts.writer_id:
            if not opts.checkpoint:
                raise BookKeeperOptionException("a streaming write needs option checkpointLocation (or writerId), so that "
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

    ``writer_id`` names this pipeline in the log; by default it is ``foreachBatch:<log>:<query id>``, the
    streaming query's id, which its checkpoint keeps across restarts and which differs between two
    queries, so two queries writing one log never take each other's batches for replays. On Spark Connect
    the function runs on the server and finds the query id through the session that started the query
    (spark_bookkeeper.foreach_batch_query): that session must run this one query only, else pass
    ``writer_id``. Other options (``ensembleSize``, ``password``, ...) are passed to the writer.
    """
    from spark_bookkeeper.foreach_batch_query import StartingSession
    from spark_bookkeeper.options import check_log_name
    check_log_name(log)
    starting = StartingSession()  # notes the starting session where Spark Connect unpickles this function

    def write_batch(batch_df, batch_id: int) -> None:
        wid = writer_id or query_writer_id(batch_df, log, starting)
        writer = (batch_df.write.format("bookkeeper").mode("append").option("metadataServiceUri", metadata_service_uri)
                  .option("log", log).option("writerId", wid).option("batchId", str(batch_id)))
        for key, value in options.items():
            writer = writer.option(key, str(value))
        writer.save()

    return write_batch


def query_writer_id(batch_df, log_name: str, starting=None) -> str:
    """``foreachBatch:<log>:<query id>`` of the streaming query running ``batch_df``'s foreachBatch: the
    thread's local property on a classic session, the starting session's one query on Spark Connect
    (``starting``: a ``foreach_batch_query.StartingSession``)."""
    from spark_bookkeeper.foreach_batch_query import AmbiguousQuery
    reason = "called outside writeStream.foreachBatch"
    try:
        query_id = batch_df.sparkSession.sparkContext.getLocalProperty(QUERY_ID_PROPERTY)
    except Exception:  # Spark Connect sessions have no SparkContext (the error class differs by version)
        query_id = None
    if not query_id and starting is not None:
        try:
            query_id = starting.query_id()
        except AmbiguousQuery as exc:
            reason = f"on Spark Connect, {exc}"
    if not query_id:
        raise BookKeeperOptionException(
            f"foreach_batch_writer for log {log_name!r} cannot tell the streaming query's id ({reason}); pass "
            "writer_id=..., a name unique to this query and the same across its restarts")
    return f"foreachBatch:{log_name}:{query_id}"
