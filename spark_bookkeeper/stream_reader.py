"""``spark.readStream.format("bookkeeper").option("log", ...)``: tail a log.

Offsets are positions in the log, ``{"segment": s, "entry": e}``: the next entry to read is entry e of
the log's s-th ledger. A log's ledgers are closed when committed, so every position is final and a
micro-batch read again after a restart returns exactly the same entries. ``maxEntriesPerTrigger``
bounds a micro-batch; ``Trigger.AvailableNow`` reads what the log held at the start, in such batches.
Partitions are planned like a batch read (ledger x fragment x ensemble member).

What every streaming read shares (options, the rows, the read limit, planning slices) is
``StreamReaderBase``; bare ledgers, open or closed, are tailed by ``LedgerStreamReader``
(spark_bookkeeper/ledger_stream_reader.py).
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from spark_bookkeeper import connections
from spark_bookkeeper.log import read_log
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from spark_bookkeeper.reader import (BookieTransports, BookKeeperReader, FragmentMemberPartition, LedgerSlice,
                                     slice_partitions)


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

    def _partitions(self, slices: list[LedgerSlice]) -> list[FragmentMemberPartition]:
        transports = BookieTransports(self._bk())
        return [p for sl in slices for p in slice_partitions(sl, transports, self.opts.max_entries_per_partition)]

    def read(self, partition):
        return self.batch_reader.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: ledgers stay until someone deletes them."""


def _pos(offset: dict) -> tuple[int, int]:
    return int(offset["segment"]), int(offset["entry"])


def _offset(segment: int, entry: int) -> dict:
    return {"segment": segment, "entry": entry}


class LogStreamReader(StreamReaderBase):
    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        if opts.log is None:
            raise BookKeeperOptionException("a streaming read tails a log or ledgers: set option log or ledgers")
        super().__init__(opts, batch_reader)
        self.target: tuple[int, int] | None = None

    def _segments(self):
        return read_log(self._bk().store, self.opts.log).segments

    def initialOffset(self) -> dict:
        return _offset(0, 0)

    def prepareForTriggerAvailableNow(self) -> None:
        segments = self._segments()
        self.target = (len(segments), 0)

    def _end(self, segments) -> tuple[int, int]:
        end = (len(segments), 0)
        return min(end, self.target) if self.target is not None else end

    def latestOffset(self, start: dict, limit) -> dict:
        segments = self._segments()
        seg, entry = _pos(start)
        end = self._end(segments)
        budget = self.budget(limit)
        while (seg, entry) < end and (budget is None or budget > 0):
            left = segments[seg].entries - entry
            take = left if budget is None else min(left, budget)
            entry += take
            if budget is not None:
                budget -= take
            if entry >= segments[seg].entries:
                seg, entry = seg + 1, 0
        return _offset(seg, entry)

    def reportLatestOffset(self):
        return _offset(len(self._segments()), 0)

    def partitions(self, start: dict, end: dict) -> list[FragmentMemberPartition]:
        segments = self._segments()
        bk = self._bk()
        (s0, e0), (s1, e1) = _pos(start), _pos(end)
        slices = []
        for seg in range(s0, min(s1 + 1, len(segments))):
            first = e0 if seg == s0 else 0
            last = (e1 if seg == s1 else segments[seg].entries) - 1
            if last < first:
                continue
            md = bk.ledger_metadata(segments[seg].ledger)
            slices.append(LedgerSlice(segments[seg].ledger, md, first, last, self.opts.log, seg))
        return self._partitions(slices)
