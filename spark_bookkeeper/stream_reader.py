"""``spark.readStream.format("bookkeeper").option("log", ...)``: tail a log.

Offsets are positions in the log, ``{"segment": s, "entry": e}``: the next entry to read is entry e of
the log's s-th ledger. A log's ledgers are closed when committed, so every position is final and a
micro-batch read again after a restart returns exactly the same entries. ``maxEntriesPerTrigger``
bounds a micro-batch; ``Trigger.AvailableNow`` reads what the log held at the start, in such batches.
Partitions are planned like a batch read (ledger x fragment x ensemble member).
"""
from __future__ import annotations

from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadMaxRows, SupportsTriggerAvailableNow

from spark_bookkeeper import connections
from spark_bookkeeper.log import read_log
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions
from spark_bookkeeper.reader import (BookieTransports, BookKeeperReader, FragmentMemberPartition, LedgerSlice,
                                     slice_partitions)


def _pos(offset: dict) -> tuple[int, int]:
    return int(offset["segment"]), int(offset["entry"])


def _offset(segment: int, entry: int) -> dict:
    return {"segment": segment, "entry": entry}


class BookKeeperStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        if opts.log is None:
            raise BookKeeperOptionException("a streaming read tails a log: set option log")
        self.opts = opts
        self.batch_reader = batch_reader
        self.target: tuple[int, int] | None = None

    def _segments(self):
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        return read_log(bk.store, self.opts.log).segments

    def initialOffset(self) -> dict:
        return _offset(0, 0)

    def getDefaultReadLimit(self):
        n = self.opts.max_entries_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

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
        budget = limit.max_rows if isinstance(limit, ReadMaxRows) else None
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
        bk = connections.driver_client(self.opts.uri, self.opts.zk_connect_timeout)
        transports = BookieTransports(bk)
        (s0, e0), (s1, e1) = _pos(start), _pos(end)
        out = []
        for seg in range(s0, min(s1 + 1, len(segments))):
            first = e0 if seg == s0 else 0
            last = (e1 if seg == s1 else segments[seg].entries) - 1
            if last < first:
                continue
            md = bk.ledger_metadata(segments[seg].ledger)
            sl = LedgerSlice(segments[seg].ledger, md, first, last, self.opts.log, seg)
            out += slice_partitions(sl, transports, self.opts.max_entries_per_partition)
        return out

    def read(self, partition):
        return self.batch_reader.read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to release: a log's ledgers stay until someone deletes them."""
