"""A ledger open for reading (ReadOnlyLedgerHandle). Never fences: a tailing reader leaves the writer be.

For an open ledger, the readable end is the LAC, learnt by quorum coverage from the bookies of the
last ensemble (the larger of the LAC piggybacked on their last entry and the explicit LAC), and
``read_last_add_confirmed_and_entry`` long-polls them for the next entry.
"""
from __future__ import annotations

import concurrent.futures as cf
import time

from bookie.client.bookkeeper_client_stats import timed
from bookie.client.handle import Handle
from bookie.client.ledger_entry import LedgerEntry
from bookie.client.ledger_reader import LedgerReader
from bookie.exceptions import BKDigestMatchException, BKException, BKIllegalOpException, BKReadException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerMetadata
from bookie.meta.metadata_store import Versioned
from bookie.proto import status
from bookie.proto.checksum import DigestManager


class ReadOnlyLedgerHandle(Handle):
    def __init__(self, bk, ledger: LedgerId, versioned: Versioned[LedgerMetadata], password: bytes):
        self.bk = bk
        self.ledger = ledger
        self._versioned = versioned
        self.digest = DigestManager(ledger, password, versioned.value.digest_type)
        self.reader = LedgerReader(bk, ledger, self.digest)
        self._stats = bk.client_stats
        md = versioned.value
        # An open ledger's LAC is asked of its bookies on the metadata just read (not read again).
        self.last_add_confirmed = md.last_entry_id if md.is_closed else self.reader.read_last_confirmed(md).lac

    @property
    def is_closed(self) -> bool:
        return self.metadata.is_closed

    def _refresh(self) -> LedgerMetadata:
        if not self.metadata.is_closed:
            self._versioned = self.bk.store.read_ledger(self.ledger)
        return self.metadata

    def read_last_add_confirmed(self) -> int:
        """The LAC now (the last entry, once the ledger is closed)."""
        md = self._refresh()
        if md.is_closed:
            self.last_add_confirmed = md.last_entry_id
        else:
            lac = timed(self._stats.read_lac_op, lambda: self.reader.read_last_confirmed(md).lac)
            self.last_add_confirmed = max(self.last_add_confirmed, lac)
        return self.last_add_confirmed

    def read(self, first: int, last: int) -> list[LedgerEntry]:
        """Entries ``first..last``; ``last`` may not pass the LAC (the last entry of a closed ledger)."""
        if last > self.last_add_confirmed:
            self.read_last_add_confirmed()
        if first < 0 or last < first or last > self.last_add_confirmed:
            raise BKReadException(f"ledger {self.ledger}: cannot read {first}..{last}; readable entries are "
                                      f"0..{self.last_add_confirmed}")
        return timed(self._stats.read_op, lambda: self.reader.read_range(self.metadata, first, last))

    def read_last_add_confirmed_and_entry(self, entry_id: int, timeout: float) -> tuple[int, LedgerEntry | None]:
        """Wait up to ``timeout`` s for ``entry_id`` to be confirmed; returns (LAC, the entry or None)."""
        return timed(self._stats.read_lac_and_entry_op, lambda: self._read_lac_and_entry(entry_id, timeout))

    def _read_lac_and_entry(self, entry_id: int, timeout: float) -> tuple[int, LedgerEntry | None]:
        if entry_id <= self.last_add_confirmed:
            return self.last_add_confirmed, self.read(entry_id, entry_id)[0]
        md = self._refresh()
        if md.is_closed:
            self.last_add_confirmed = md.last_entry_id
            return self.last_add_confirmed, (self.read(entry_id, entry_id)[0] if entry_id <= md.last_entry_id else None)
        deadline = time.monotonic() + timeout
        futures = [self.bk.bookie_client(b).read_entry_async(self.ledger, -1, previous_lac=entry_id - 1,
                                                              timeout_ms=int(timeout * 1000), piggyback=True)
                   for b in md.last_ensemble]
        for future in cf.as_completed(futures, timeout=timeout + self.bk.conf.readTimeout):
            try:
                response = future.result()
            except BKException:
                continue
            if response.status != status.EOK or response.maxLAC < entry_id:
                continue
            self.last_add_confirmed = max(self.last_add_confirmed, response.maxLAC)
            if response.body:
                try:
                    payload = self.digest.verify(response.body, entry_id)[1].tobytes()
                    return self.last_add_confirmed, LedgerEntry(self.ledger_id, entry_id, payload)
                except BKDigestMatchException:
                    pass
            return self.last_add_confirmed, self.read(entry_id, entry_id)[0]
        if time.monotonic() < deadline:
            self.read_last_add_confirmed()
        return self.last_add_confirmed, None

    def append(self, payload: bytes) -> int:
        raise BKIllegalOpException(f"ledger {self.ledger} is open read-only")

    append_async = append

    def close(self) -> None:
        """Nothing to record: a reader never changes the ledger."""
