"""``spark.readStream.format("bookkeeper").option("log", ...)``: tail a log.

Offsets are positions in the log, ``{"segment": s, "entry": e}``: the next entry to read is entry e of
the log's segment number s. Segment numbers are absolute (bookie.meta.log_metadata): truncation moves
the log's first segment and renumbers nothing, so offsets stay meaningful. Kafka's options with
Kafka's meaning: ``startingOffsets`` (``earliest``, the default; ``latest``; or that JSON) places a
query that has no checkpoint; ``failOnDataLoss`` (default true) fails a query whose next segment was
truncated away, naming what was lost, or (false) logs it and goes on from the first segment left.
A log's ledgers are closed when committed, so every position is final and a
micro-batch read again after a restart returns exactly the same entries. ``maxEntriesPerTrigger``
bounds a micro-batch; ``Trigger.AvailableNow`` reads what the log held at the start, in such batches.
Partitions are planned like a batch read (ledger x fragment x ensemble member slices, packed by bytes).

What every streaming read shares (options, the rows, the read limit, planning slices) is
``StreamReaderBase``; bare ledgers, open or closed, are tailed by ``LedgerStreamReader``
(spark_bookkeeper/ledger_stream_reader.py).
"""
from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from bookie.exceptions import BKException, BKNoSuchLedgerExistsException
from spark_bookkeeper import connections
from spark_bookkeeper.log import Log, read_log
from spark_bookkeeper.options import EARLIEST, LATEST, BookKeeperOptionException, ReadOptions
from spark_bookkeeper.read_partitions import PackedPartition
from spark_bookkeeper.reader import BookieTransports, BookKeeperReader, LedgerSlice, pack_partitions

logger = logging.getLogger(__name__)


class StreamReaderBase(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A streaming read: its micro-batches are planned and read as batch reads of ledger slices."""

    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        self.opts = opts
        self.batch_reader = batch_reader

    def _bk(self):
        return connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)

    def getDefaultReadLimit(self):
        n = self.opts.max_entries_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    @staticmethod
    def budget(limit: ReadLimit) -> int | None:
        """Entries a micro-batch may take (None: all there are)."""
        return limit.max_rows if isinstance(limit, ReadMaxRows) else None

    def _partitions(self, slices: list[LedgerSlice]) -> list[PackedPartition]:
        return pack_partitions(slices, BookieTransports(self._bk()), self.opts)

    def read(self, partition):
        return self.batch_reader.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: ledgers stay until someone deletes them."""


def _pos(offset: dict) -> tuple[int, int]:
    return int(offset["segment"]), int(offset["entry"])


def _offset(segment: int, entry: int) -> dict:
    return {"segment": segment, "entry": entry}


class LogDataLossException(BKException, RuntimeError):
    """The segments a log stream was about to read were truncated away (failOnDataLoss=true)."""


class LogStreamReader(StreamReaderBase):
    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        if opts.log is None:
            raise BookKeeperOptionException("a streaming read tails a log or ledgers: set option log or ledgers")
        super().__init__(opts, batch_reader)
        self.target: tuple[int, int] | None = None

    def _log(self) -> Log:
        return read_log(self._bk().store, self.opts.log)

    def initialOffset(self) -> dict:
        start = self.opts.starting_offsets
        if start == EARLIEST:
            return _offset(self._log().first_segment, 0)
        if start == LATEST:
            return _offset(self._log().end_segment, 0)
        return _offset(*start)

    def prepareForTriggerAvailableNow(self) -> None:
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

    def latestOffset(self, start: dict, limit) -> dict:
        log = self._log()
        seg, entry = self._resume(log, *_pos(start))
        end = (log.end_segment, 0)
        if self.target is not None:
            end = min(end, self.target)
        budget = self.budget(limit)
        while (seg, entry) < end and (budget is None or budget > 0):
            entries = log.segment(seg).entries
            left = max(0, entries - entry)
            take = left if budget is None else min(left, budget)
            entry += take
            if budget is not None:
                budget -= take
            if entry >= entries:
                seg, entry = seg + 1, 0
        return _offset(seg, entry)

    def reportLatestOffset(self):
        return _offset(self._log().end_segment, 0)

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
        return self._partitions(slices)
