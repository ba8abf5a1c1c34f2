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
(a fast-growing ledger does not starve the others, ``share``); ``maxBytesPerTrigger`` bounds its
estimated bytes, shared in the same way (a closed ledger's length over its entries; an open ledger's
length is not learnt with its LAC, so it counts as the average of the closed ones tailed, else 1 KiB
per entry: reader.estimate_entry_bytes); ``minEntriesPerTrigger`` / ``maxTriggerDelay`` hold a
micro-batch back as Kafka's do (stream_reader.StreamReaderBase). ``Trigger.AvailableNow`` reads what the
ledgers held at the start, in batches bounded by the max options. All of these need PySpark 4.2; before,
a micro-batch takes what is readable. ``startEntry``/``endEntry`` bound each ledger as in a batch read.
Rows have the batch schema of ledgers (``ledger_id, entry_id, payload``); partitions are planned like a
batch read. ``reportLatestOffset`` is each ledger's readable end when last asked (PySpark 4.2+ shows it
as the source's ``latestOffset``; ``stream_lag`` sums what is left).

A ledger deleted while tailed stops the stream with an error naming it. Kafka's ``failOnDataLoss``
(skip what was lost and go on) is not offered: a stream does not skip entries. A ledger that does not
exist at the start fails ``load()``, as a batch read does (``check_selection``).
"""
from __future__ import annotations

import math

from bookie.exceptions import BKNoSuchLedgerExistsException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from spark_bookkeeper.options import BookKeeperOptionException, ReadOptions, parse_ledgers
from spark_bookkeeper.read_partitions import PackedPartition
from spark_bookkeeper.reader import BookKeeperReader, LedgerSlice, estimate_entry_bytes
from spark_bookkeeper.spark_versions import ReadLimit
from spark_bookkeeper.stream_reader import StreamReaderBase

Positions = dict[str, int]  # ledger (as option ledgers names it) -> an entry id


def _offset(positions: Positions) -> dict:
    return {"ledgers": positions}


def share(available: Positions, budget: int | None, max_bytes: int | None = None,
          sizes: dict[str, float] | None = None) -> Positions:
    """How many of its ``available`` entries each ledger gives a micro-batch of at most ``budget`` entries and
    ``max_bytes`` estimated bytes (``sizes``: bytes per entry of each ledger): equal shares, what a ledger
    cannot use going to the others; at least one entry when there is one, so a stream goes on."""
    take = {key: 0 for key in available}
    left = sum(available.values()) if budget is None else budget
    room = math.inf if max_bytes is None else float(max_bytes)
    size = {key: (sizes or {}).get(key, 0.0) if max_bytes is not None else 0.0 for key in available}
    while left > 0:
        started = any(take.values())
        hungry = [key for key in available if take[key] < available[key] and (size[key] <= room or not started)]
        if not hungry:
            break
        each, each_room = max(1, left // len(hungry)), room / len(hungry)
        for key in hungry:
            n = min(each, available[key] - take[key], left)
            if size[key] > 0:  # an equal share of the bytes too, within what is left, one entry at least
                n = min(n, max(1, int(each_room // size[key])), int(room // size[key]))
                if n == 0 and not any(take.values()):
                    n = 1
            if n <= 0:
                continue
            take[key] += n
            left -= n
            room -= n * size[key]
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
        return self.remember(_offset({key: self.opts.start_entry for key in self.ledgers}))

    def _deleted(self, key: str, position: int | None) -> BKNoSuchLedgerExistsException:
        where = f"; entries from {position} on were not read" if position is not None else ""
        return BKNoSuchLedgerExistsException(
            f"ledger {key} was deleted while this stream tailed it{where} (metadataServiceUri {self.opts.uri}). "
            "A stream does not skip lost entries (no failOnDataLoss): remove the ledger from option ledgers, or "
            "start from a new checkpoint")

    def _ends(self, positions: Positions | None = None) -> tuple[Positions, dict[str, LedgerMetadata]]:
        """The readable end (next entry id past it) of each ledger now, within endEntry, and its metadata."""
        bk = self._bk()
        ends, metadata = {}, {}
        for key, lid in self.ledgers.items():
            try:
                handle = bk.open_ledger(lid, password=self.opts.password, recovery=False)
            except BKNoSuchLedgerExistsException:
                raise self._deleted(key, (positions or {}).get(key)) from None
            end = handle.last_add_confirmed + 1
            if self.opts.end_entry is not None:
                end = min(end, self.opts.end_entry + 1)
            ends[key], metadata[key] = end, handle.metadata
        return ends, metadata

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now = True
        self.target = self._ends()[0]

    def _positions(self, offset: dict) -> Positions:
        """The offset's position of each tailed ledger (startEntry for one added to option ledgers since)."""
        saved = offset["ledgers"]
        return {key: int(saved.get(key, self.opts.start_entry)) for key in self.ledgers}

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        """The end of the next micro-batch from ``start`` within ``limit``; ``start`` itself to hold it back
        (minEntriesPerTrigger). Without ``start`` (PySpark before 4.2): every ledger's readable end, but never
        short of where the stream is known to be (a LAC read lower than one seen before must not move it back:
        entries would be read twice), which also names what was not read of a ledger deleted."""
        if start is None:
            known = self._positions(self.known) if self.known is not None else None
            self._latest, _ = self._ends(known)
            return _offset({key: max(end, (known or {}).get(key, 0)) for key, end in self._latest.items()})
        positions = self._positions(start)
        self._latest, metadata = self._ends(positions)
        ends = self._latest if self.target is None else {k: min(e, self.target[k]) for k, e in self._latest.items()}
        available = {key: max(0, ends[key] - positions[key]) for key in self.ledgers}
        rows, max_bytes, waits = self.limits(limit)
        if waits and self.hold_back(sum(available.values())):
            return start
        sizes = estimate_entry_bytes(metadata) if max_bytes is not None else None
        taken = share(available, rows, max_bytes, sizes)
        return _offset({key: positions[key] + taken[key] for key in self.ledgers})

    def reportLatestOffset(self):
        """Each ledger's readable end when latestOffset last asked (uncapped by Trigger.AvailableNow)."""
        return _offset(dict(self._latest if self._latest is not None else self._ends()[0]))

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
        planned = self._partitions(slices)
        self.remember(end)
        return planned
