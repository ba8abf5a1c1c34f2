"""The ledger cache: index pages held in memory, written to index files lazily.

A page holds the locations of ``pageSize / 8`` consecutive entries of one ledger. Adds only touch
pages in memory. Dirty pages are written by the sync thread's checkpoint, or when the cache holds
more than ``pageLimit`` pages. Before any page is written, the entry logs are flushed
(``before_write``), so an index file never points at entry-log bytes that are not on disk.
"""
from __future__ import annotations

import logging
from collections import OrderedDict
from typing import Callable

import numpy as np

from bookie.ledger_id import LedgerId
from bookie.server.index import IndexHeader, IndexPersistenceMgr

log = logging.getLogger(__name__)

PageKey = tuple[LedgerId, int]
DEFAULT_PAGE_MEMORY = 1 << 30  # pageLimit -1: a third of this, as BookKeeper sizes it from the heap


class LedgerCache:
    def __init__(self, index: IndexPersistenceMgr, page_size: int, page_limit: int,
                 before_write: Callable[[], None], header_for: Callable[[LedgerId], IndexHeader]):
        self.index = index
        self.entries_per_page = page_size // 8
        self.page_limit = max(2, page_limit) if page_limit > 0 else max(16, DEFAULT_PAGE_MEMORY // 3 // page_size)
        self._before_write = before_write
        self._header_for = header_for
        self._pages: OrderedDict[PageKey, np.ndarray] = OrderedDict()
        self._dirty: set[PageKey] = set()
        self.pages_written = 0

    # -- pages -------------------------------------------------------------------------------------
    def _page(self, ledger: LedgerId, page_no: int) -> np.ndarray:
        key = (ledger, page_no)
        page = self._pages.get(key)
        if page is not None:
            self._pages.move_to_end(key)
            return page
        info = self.index.find(ledger)
        if info is None:
            page = np.zeros(self.entries_per_page, dtype=np.int64)
        else:
            page = info.read_slots(page_no * self.entries_per_page, self.entries_per_page)
        self._pages[key] = page
        if len(self._pages) > self.page_limit:
            self._evict()
        return page

    def _evict(self) -> None:
        """Over the limit: write every dirty page (one entry-log flush, one fsync per file), drop the oldest."""
        if self._dirty:
            self.flush()
        target = max(1, self.page_limit * 3 // 4)  # the page just loaded (newest) always stays
        while len(self._pages) > target:
            self._pages.popitem(last=False)

    # -- locations ---------------------------------------------------------------------------------
    def put(self, ledger: LedgerId, entry_ids: np.ndarray, locations: np.ndarray) -> None:
        per = self.entries_per_page
        first, last = int(entry_ids[0]), int(entry_ids[-1])
        if last - first == len(entry_ids) - 1 and np.all(np.diff(entry_ids) == 1):
            pos = 0  # consecutive ids: whole slices per page
            for page_no in range(first // per, last // per + 1):
                lo = max(first, page_no * per)
                hi = min(last, page_no * per + per - 1)
                n = hi - lo + 1
                self._page(ledger, page_no)[lo - page_no * per: lo - page_no * per + n] = locations[pos: pos + n]
                self._dirty.add((ledger, page_no))
                pos += n
            return
        for eid, loc in zip(entry_ids.tolist(), locations.tolist()):
            page_no = eid // per
            self._page(ledger, page_no)[eid - page_no * per] = loc
            self._dirty.add((ledger, page_no))

    def get(self, ledger: LedgerId, entry_id: int) -> int:
        page_no = entry_id // self.entries_per_page
        return int(self._page(ledger, page_no)[entry_id - page_no * self.entries_per_page])

    def get_range(self, ledger: LedgerId, first: int, last: int) -> np.ndarray:
        per = self.entries_per_page
        parts = []
        for page_no in range(first // per, last // per + 1):
            lo = max(first, page_no * per) - page_no * per
            hi = min(last, page_no * per + per - 1) - page_no * per
            parts.append(self._page(ledger, page_no)[lo: hi + 1])
        return np.concatenate(parts) if len(parts) > 1 else parts[0].copy()

    def last_entry_on_disk(self, ledger: LedgerId) -> int:
        """Highest entry id with a location in the index file (-1 if none)."""
        info = self.index.find(ledger)
        if info is None:
            return -1
        per = self.entries_per_page
        slots = info.entry_slots()
        for page_no in range((slots - 1) // per, -1, -1):
            page = info.read_slots(page_no * per, per)
            nonzero = np.flatnonzero(page)
            if len(nonzero):
                return page_no * per + int(nonzero[-1])
        return -1

    # -- persistence -------------------------------------------------------------------------------
    def flush(self, headers: dict[LedgerId, IndexHeader] | None = None) -> int:
        """Write dirty pages (and the given headers); fsync each touched file. Returns pages written."""
        by_ledger: dict[LedgerId, list[int]] = {}
        for ledger, page_no in self._dirty:
            by_ledger.setdefault(ledger, []).append(page_no)
        headers = dict(headers or {})
        if not by_ledger and not headers:
            return 0
        self._before_write()
        written = 0
        for ledger in set(by_ledger) | set(headers):
            header = headers.get(ledger)
            info = self.index.find(ledger)
            if info is None:
                info = self.index.create(ledger, header or self._header_for(ledger))
            elif header is not None:
                info.write_header(header)
            per = self.entries_per_page
            for page_no in sorted(by_ledger.get(ledger, ())):
                page = self._pages.get((ledger, page_no))
                if page is not None:
                    info.write_slots(page_no * per, page)
                    written += 1
            info.fsync()
        self._dirty.clear()
        self.pages_written += written
        return written

    def drop(self, ledger: LedgerId) -> None:
        for key in [k for k in self._pages if k[0] == ledger]:
            del self._pages[key]
            self._dirty.discard(key)
