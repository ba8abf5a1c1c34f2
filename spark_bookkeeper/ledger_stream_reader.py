"""``spark.readStream.format("bookkeeper").option("ledgers", "12,13")``: tail bare ledgers, open or closed.

A ledger someone is still writing (a Pulsar broker, BookKeeper's Java client) is read as it grows and
is never fenced: ``recover=true`` is refused, since a stream must not fence a live writer.

Offsets: ``{"ledgers": {"12": 1001, "13": 0}}``, for each ledger (its id, or the 32-hex-digit
qualified name of a ledger of a non-zero scope, as option ``ledgers`` takes them) the next entry id to
read. The readable end of a closed ledger is its last entry + 1; of an open one its LAC + 1, the LAC
asked of its bookies without fencing (ReadOnlyLedgerHandle, as a batch read with ``recover=false``).
Entries up to a LAC never change (a recovery keeps every acknowledged entry), so a micro-batch read
again after a restart returns exactly the same rows. A LAC read lower than one seen before (a bookie
slow to answer) only makes a micro-batch wait; the stream never goes back.

``maxEntriesPerTrigger`` bounds a micro-batch, shared evenly among the ledgers with entries to read
(a fast-growing ledger does not starve the others); ``Trigger.AvailableNow`` reads what the ledgers
held at the start. ``startEntry``/``endEntry`` bound each ledger as in a batch read. Rows have the
batch schema of ledgers (``ledger_id, entry_id, payload``); partitions are planned like a batch read.

A ledger deleted while tailed stops the stream with an error naming it. Kafka's ``failOnDataLoss``
(skip what was lost and go on) is not offered: a stream does not skip entries. A ledger that does not
exist at the start fails ``load()``, as a batch read does (``check_selection``).
"""
from __future__ import annotations

from bookie.exceptions import BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, parse_ledgers
from spark_bookkeeper.read_partitions import PackedPartition
from spark_bookkeeper.reader import BookKeeperReader, LedgerSlice
from spark_bookkeeper.stream_reader import StreamReaderBase

Positions = dict[str, int]  # ledger (as option ledgers names it) -> an entry id


def _offset(positions: Positions) -> dict:
    return {"ledgers": positions}


def share(available: Positions, budget: int | None) -> Positions:
    """How many of its ``available`` entries each ledger gives a micro-batch of at most ``budget``:
    equal shares, what a ledger cannot use going to the others."""
    if budget is None:
        return dict(available)
    take = {key: 0 for key in available}
    left = budget
    while left > 0:
        hungry = [key for key in available if take[key] < available[key]]
        if not hungry:
            break
        each = max(1, left // len(hungry))
        for key in hungry:
            n = min(each, available[key] - take[key], left)
            take[key] += n
            left -= n
            if not left:
                break
    return take


class LedgerStreamReader(StreamReaderBase):
    def __init__(self, opts: ReadOptions, batch_reader: BookKeeperReader):
        if opts.recover:
            raise BookKeeperOptionException(
                "option recover=true is not allowed for a streaming read: recovery fences a ledger, and a stream "
                "must not fence a live writer. Leave recover unset: open ledgers are read up to their LAC as they grow")
        super().__init__(opts, batch_reader)
        self.ledgers: dict[str, LedgerId] = {str(lid): lid for lid in opts.ledgers}
        self.target: Positions | None = None  # Trigger.AvailableNow: the ends at the start
        self._latest: Positions | None = None

    def initialOffset(self) -> dict:
        return _offset({key: self.opts.start_entry for key in self.ledgers})

    def _deleted(self, key: str, position: int | None) -> BKNoSuchLedgerExistsException:
        where = f"; entries from {position} on were not read" if position is not None else ""
        return BKNoSuchLedgerExistsException(
            f"ledger {key} was deleted while this stream tailed it{where} (metadataServiceUri {self.opts.uri}). "
            "A stream does not skip lost entries (no failOnDataLoss): remove the ledger from option ledgers, or "
            "start from a new checkpoint")

    def _ends(self, positions: Positions | None = None) -> Positions:
        """The readable end (next entry id past it) of each ledger now, within endEntry and AvailableNow's target."""
        bk = self._bk()
        ends = {}
        for key, lid in self.ledgers.items():
            try:
                handle = bk.open_ledger(lid, password=self.opts.password, recovery=False)
            except BKNoSuchLedgerExistsException:
                raise self._deleted(key, (positions or {}).get(key)) from None
            end = handle.last_add_confirmed + 1
            if self.opts.end_entry is not None:
                end = min(end, self.opts.end_entry + 1)
            if self.target is not None:
                end = min(end, self.target[key])
            ends[key] = end
        return ends

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._ends()

    def _positions(self, offset: dict) -> Positions:
        """The offset's position of each tailed ledger (startEntry for one added to option ledgers since)."""
        saved = offset["ledgers"]
        return {key: int(saved.get(key, self.opts.start_entry)) for key in self.ledgers}

    def latestOffset(self, start: dict, limit) -> dict:
        positions = self._positions(start)
        self._latest = self._ends(positions)
        available = {key: max(0, self._latest[key] - positions[key]) for key in self.ledgers}
        taken = share(available, self.budget(limit))
        return _offset({key: positions[key] + taken[key] for key in self.ledgers})

    def reportLatestOffset(self):
        return _offset(self._latest if self._latest is not None else self._ends())

    def _metadata(self, key: str, first: int) -> LedgerMetadata:
        try:
            return self._bk().ledger_metadata(parse_ledgers(key)[0])
        except BKNoSuchLedgerExistsException:
            raise self._deleted(key, first) from None

    def partitions(self, start: dict, end: dict) -> list[PackedPartition]:
        # The ledgers of the end offset, not of the option: a batch replayed after a restart reads what
        # it read before. Metadata read now is no older than the LAC that set ``end``, so its ensembles
        # are those the entries up to it were written to.
        begun = start["ledgers"]
        slices = []
        for key, stop in end["ledgers"].items():
            first = int(begun.get(key, self.opts.start_entry))
            if int(stop) > first:
                md = self._metadata(key, first)
                slices.append(LedgerSlice(parse_ledgers(key)[0], md, first, int(stop) - 1, None, None))
        return self._partitions(slices)
