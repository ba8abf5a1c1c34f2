"""``spark.readStream.format("bookkeeper").option("log", ...)``: tail a log.

Offsets are positions in the log, ``{"segment": s, "entry": e}``: the next entry to read is entry e of
the log's segment number s. Segment numbers are absolute (bookie.meta.log_metadata): truncation moves
the log's first segment and renumbers nothing, so offsets stay meaningful. Kafka's options with
Kafka's meaning: ``startingOffsets`` (``earliest``, the default; ``latest``; or that JSON) or
``startingTimestamp`` (the first segment committed at or after it, with
``startingOffsetsByTimestampStrategy``: spark_bookkeeper/log_offsets.py) places a query that has no
checkpoint; ``failOnDataLoss`` (default true) fails a query whose next segment was truncated away,
naming what was lost, or (false) logs it and goes on from the first segment left. A log's ledgers are
closed when committed, so every position is final and a micro-batch read again after a restart returns
exactly the same entries. Partitions are planned like a batch read (ledger x fragment x ensemble member
slices, packed by bytes).

Admission control (PySpark 4.2+, which hands a source its read limit; ``spark_versions``), as Kafka's
KafkaMicroBatchStream: ``maxEntriesPerTrigger`` bounds a micro-batch (the read limit Spark passes back:
``getDefaultReadLimit``); ``maxBytesPerTrigger`` bounds its estimated bytes (a log records each segment's
payload bytes and entries: their ratio per entry), never to less than one entry; ``minEntriesPerTrigger``
holds a micro-batch back until that many new entries are readable, but not longer than ``maxTriggerDelay``
since the last one was triggered (Kafka's ``delayBatch``). ``Trigger.AvailableNow`` reads what the source
held at its start, in batches bounded by the max options, ignoring the minimum (so the query ends). A
``ReadAllAvailable`` limit where the options asked for less (Spark's ``Trigger.Once``) reads everything, as
Kafka does. Before 4.2 Spark calls ``latestOffset()`` without arguments: the newest offset, no limits (the
options are refused at ``load()``: spark_bookkeeper/options.py).

Progress: ``reportLatestOffset`` is the newest offset seen (uncapped by ``Trigger.AvailableNow``), which
PySpark 4.2+ shows as ``latestOffset`` in ``query.lastProgress["sources"][i]``; ``stream_lag`` turns that
and ``endOffset`` into entries (log_offsets.py). The Python data source API has no custom metrics for a
stream reader, so that is where the lag is read.

What every streaming read shares (options, the rows, the read limits, planning slices) is
``StreamReaderBase``; bare ledgers, open or closed, are tailed by ``LedgerStreamReader``
(spark_bookkeeper/ledger_stream_reader.py).
"""
from __future__ import annotations

import logging
import time

from pyspark.sql.datasource import DataSourceStreamReader

from bookie.exceptions import BKNoSuchLedgerExistsException
from spark_bookkeeper import connections
from spark_bookkeeper.log import Log, read_log
from spark_bookkeeper.log_offsets import LogDataLossException, advance, commit_time, entries_between, starting_position
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from spark_bookkeeper.read_partitions import PackedPartition
from spark_bookkeeper.reader import BookieTransports, BookKeeperReader, LedgerSlice, pack_partitions
from spark_bookkeeper.spark_versions import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

logger = logging.getLogger(__name__)
__all__ = ["LogDataLossException", "LogStreamReader", "StreamReaderBase"]
# The default read limit when only minEntriesPerTrigger / maxBytesPerTrigger are set: a ReadMaxRows that bounds
# nothing, so that a ReadAllAvailable Spark passes instead (Trigger.Once) is told apart and reads everything.
UNBOUNDED_ROWS = 2 ** 63 - 1


class StreamReaderBase(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read: its micro-batches are planned and read as batch reads of ledger slices."""

    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        self.opts = opts
        self.batch_reader = batch_reader
        self.available_now = False  # prepareForTriggerAvailableNow was called: the minimum does not apply
        self.last_trigger_ms = 0  # when a micro-batch was last let through (Kafka's lastTriggerMillis)
        # Where the stream is, as far as this reader saw: before 4.2 Spark calls latestOffset() without its start.
        self.known: dict | None = None

    def remember(self, offset: dict) -> dict:
        """Note ``offset`` as where the stream is. The driver's reader gives the initial offset, plans each batch
        (partitions) and commits it, so the end of the last batch planned is where the next one starts."""
        self.known = offset
        return offset

    def _bk(self):
        return connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)

    def getDefaultReadLimit(self):
        o = self.opts
        if o.max_entries_per_trigger:
            return ReadMaxRows(o.max_entries_per_trigger)
        if o.min_entries_per_trigger or o.max_bytes_per_trigger:
            return ReadMaxRows(UNBOUNDED_ROWS)
        return ReadAllAvailable()

    def limits(self, limit: ReadLimit | None) -> tuple[int | None, int | None, bool]:
        """(entries, estimated bytes) a micro-batch may take (None: no bound), and whether minEntriesPerTrigger
        may hold it back. Spark passes the default limit (getDefaultReadLimit), or ReadAllAvailable to take
        everything (Trigger.Once); Trigger.AvailableNow ignores the minimum, as Kafka's does, so it ends."""
        if limit is None or isinstance(limit, ReadAllAvailable):
            return None, None, False
        rows = limit.max_rows if isinstance(limit, ReadMaxRows) and limit.max_rows < UNBOUNDED_ROWS else None
        waits = self.opts.min_entries_per_trigger is not None and not self.available_now
        return rows, self.opts.max_bytes_per_trigger, waits

    def hold_back(self, new_entries: int) -> bool:
        """Kafka's KafkaMicroBatchStream.delayBatch: let a micro-batch through once maxTriggerDelay has passed
        since the last one was (the first call always does), or once minEntriesPerTrigger new entries are
        readable; otherwise hold it back (latestOffset returns its start: no batch)."""
        now = int(time.time() * 1000)
        if now - self.last_trigger_ms >= self.opts.max_trigger_delay_ms:
            self.last_trigger_ms = now
            return False
        if new_entries < self.opts.min_entries_per_trigger:
            return True
        self.last_trigger_ms = now
        return False

    def read(self, partition):
        return self.batch_reader.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release (ledgers stay until someone deletes them); ``end`` is where the stream is."""
        self.remember(end)

    def _partitions(self, slices: list[LedgerSlice]) -> list[PackedPartition]:
        return pack_partitions(slices, BookieTransports(self._bk()), self.opts)


def _pos(offset: dict) -> tuple[int, int]:
    return int(offset["segment"]), int(offset["entry"])


def _offset(segment: int, entry: int) -> dict:
    return {"segment": segment, "entry": entry}


class LogStreamReader(StreamReaderBase):
    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        if opts.log is None:
            raise BookKeeperOptionException("a streaming read tails a log or ledgers: set option log or ledgers")
        super().__init__(opts, batch_reader)
        self.target: tuple[int, int] | None = None  # Trigger.AvailableNow: the log's end at the start
        self.latest: tuple[int, int] | None = None  # the log's end when latestOffset last read it

    def _log(self) -> Log:
        return read_log(self._bk().store, self.opts.log)

    def initialOffset(self) -> dict:
        return self.remember(_offset(*starting_position(self._log(), self.opts, commit_time(self._bk()))))

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True
        self.target = (self._log().end_segment, 0)

    def _resume(self, log: Log, segment: int, entry: int) -> tuple[int, int]:
        """Where to read from ``segment``/``entry``: there, or if that was truncated away, fail
        (failOnDataLoss=true, Kafka's default) or go on from the first segment still there."""
        if segment >= log.first_segment:
            return segment, entry
        lost = log.describe_loss(segment, entry)
        if self.opts.fail_on_data_loss:
            raise LogDataLossException(f"{lost}. Set option failOnDataLoss=false to go on from segment "
                                       f"{log.first_segment}")
        logger.warning("%s; going on from there (failOnDataLoss=false)", lost)
        return log.first_segment, 0

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next micro-batch from ``start`` within ``limit``; ``start`` itself to hold it back
        (minEntriesPerTrigger). Without ``start`` (PySpark before 4.2): the log's end, once the data-loss rule has
        judged where the stream is known to be (a loss fails here, as it does with a start)."""
        log = self._log()
        self.latest = (log.end_segment, 0)
        if start is None:
            if self.known is not None:
                self._resume(log, *_pos(self.known))
            return _offset(*self.latest)
        position = self._resume(log, *_pos(start))
        end = min(self.latest, self.target) if self.target is not None else self.latest
        rows, max_bytes, waits = self.limits(limit)
        if waits and self.hold_back(entries_between(log, position, end)):
            return start
        return _offset(*advance(log, position, max(position, end), rows, max_bytes))

    def reportLatestOffset(self) -> dict:
        """The log's end as the last latestOffset saw it (PySpark 4.2+ reports it as the source's latestOffset)."""
        return _offset(*(self.latest if self.latest is not None else (self._log().end_segment, 0)))

    def partitions(self, start: dict, end: dict) -> list[PackedPartition]:
        log = self._log()
        bk = self._bk()
        (s0, e0), (s1, e1) = self._resume(log, *_pos(start)), _pos(end)
        slices = []
        for seg in range(s0, min(s1 + 1, log.end_segment)):
            segment = log.segment(seg)
            first = e0 if seg == s0 else 0
            last = (e1 if seg == s1 else segment.entries) - 1
            if last < first:
                continue
            try:
                md = bk.ledger_metadata(segment.ledger)
            except BKNoSuchLedgerExistsException:
                # Truncated (and deleted) since the log was read: the data-loss rule decides; else it is an error.
                log = self._log()
                if seg >= log.first_segment:
                    raise
                self._resume(log, seg, first)
                continue
            slices.append(LedgerSlice(segment.ledger, md, first, last, self.opts.log, seg))
        planned = self._partitions(slices)
        self.remember(end)
        return planned
