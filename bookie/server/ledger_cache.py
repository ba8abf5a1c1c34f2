"""The ledger cache: index pages held in memory, written to index files lazily.

A page holds the locations of ``pageSize / 8`` consecutive entries of one ledger. Adds only touch
pages in memory. Dirty pages are written by the sync thread's checkpoint, or when the cache holds
more than ``pageLimit`` pages. Before any page is written, the entry logs are flushed
(``before_write``), so an index file never points at entry-log bytes that are not on disk.
"""
from __future__ import annotations

import bisect
import logging
from collections import OrderedDict
from typing import Callable, Iterator

import numpy as np

from bookie.ledger_id import LedgerId
from bookie.server.index import INDEX_HEADER_SIZE, IndexHeader, IndexPersistenceMgr

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
        self._cached: dict[LedgerId, list[int]] = {}  # per ledger, the numbers of its cached pages, sorted
        self._dirty: set[PageKey] = set()
        self.pages_written = 0
        self.pages_loaded = 0  # pages read from an index file or created: what a lookup cost

    # -- pages -------------------------------------------------------------------------------------
    def _page(self, ledger: LedgerId, page_no: int) -> np.ndarray:
        """The page, loaded (or created empty) if it is not cached."""
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
        self._insert(key, page)
        return page

    def _insert(self, key: PageKey, page: np.ndarray) -> None:
        self._pages[key] = page
        bisect.insort(self._cached.setdefault(key[0], []), key[1])
        self.pages_loaded += 1
        if len(self._pages) > self.page_limit:
            self._evict()

    def _stored_page(self, ledger: LedgerId, page_no: int) -> np.ndarray | None:
        """The page if it may hold locations (cached, or in a data region of the index file); None if it
        is a hole: nothing is loaded for it."""
        page = self._pages.get((ledger, page_no))
        if page is not None:
            self._pages.move_to_end((ledger, page_no))
            return page
        info = self.index.find(ledger)
        if info is None:
            return None
        start = self._page_offset(page_no)
        data = info.next_data(start)
        if data is None or data >= start + self.entries_per_page * 8:
            return None
        return self._page(ledger, page_no)

    def _page_offset(self, page_no: int) -> int:
        return INDEX_HEADER_SIZE + page_no * self.entries_per_page * 8

    def next_stored_page(self, ledger: LedgerId, page_no: int) -> int | None:
        """The first page from ``page_no`` on that holds a location, or None. Costs the cached pages of
        the ledger and the data regions of its index file that it passes, never the holes between."""
        pages = self._cached.get(ledger, [])
        cached = None
        i = bisect.bisect_left(pages, page_no)
        while i < len(pages):
            if self._pages[(ledger, pages[i])].any():
                cached = pages[i]
                break
            i += 1
        if cached == page_no:  # nothing comes before it: the index file need not be asked
            return cached
        info = self.index.find(ledger)
        pos = self._page_offset(page_no)
        while info is not None and (data := info.next_data(pos)) is not None:
            p = (data - INDEX_HEADER_SIZE) // (self.entries_per_page * 8)
            if cached is not None and p >= cached:
                break
            if (ledger, p) not in self._pages:  # a cached page is newer than the file: judged above
                page = info.read_slots(p * self.entries_per_page, self.entries_per_page)
                if page.any():
                    self._insert((ledger, p), page)
                    return p
                self.pages_loaded += 1
            pos = self._page_offset(p + 1)
        return cached

    def _evict(self) -> None:
        """Over the limit: write every dirty page (one entry-log flush, one fsync per file), drop the oldest."""
        if self._dirty:
            self.flush()
        target = max(1, self.page_limit * 3 // 4)  # the page just loaded (newest) always stays
        while len(self._pages) > target:
            (ledger, page_no), _ = self._pages.popitem(last=False)
            self._forget(ledger, page_no)

    def _forget(self, ledger: LedgerId, page_no: int) -> None:
        pages = self._cached[ledger]
        del pages[bisect.bisect_left(pages, page_no)]
        if not pages:
            del self._cached[ledger]

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
        steps = np.diff(entry_ids)
        if (steps > 0).all():  # increasing (a bookie's stripe of a ledger with WQ < E): one assignment per page
            for page_no, lo, hi in self._page_runs(entry_ids):
                self._page(ledger, page_no)[entry_ids[lo:hi] - page_no * per] = locations[lo:hi]
                self._dirty.add((ledger, page_no))
            return
        for eid, loc in zip(entry_ids.tolist(), locations.tolist()):
            page_no = eid // per
            self._page(ledger, page_no)[eid - page_no * per] = loc
            self._dirty.add((ledger, page_no))

    def _page_runs(self, entry_ids: np.ndarray) -> Iterator[tuple[int, int, int]]:
        """``(page_no, lo, hi)`` per page the increasing ``entry_ids`` fall on: ``entry_ids[lo:hi]`` are its ids."""
        if not len(entry_ids):
            return
        pages = entry_ids // self.entries_per_page
        cuts = (np.flatnonzero(pages[1:] != pages[:-1]) + 1).tolist()
        for lo, hi in zip([0, *cuts], [*cuts, len(entry_ids)]):
            yield int(pages[lo]), lo, hi

    def get(self, ledger: LedgerId, entry_id: int) -> int:
        page_no = entry_id // self.entries_per_page
        page = self._stored_page(ledger, page_no)
        return 0 if page is None else int(page[entry_id - page_no * self.entries_per_page])

    def get_strided(self, ledger: LedgerId, first: int, last: int, step: int = 1) -> np.ndarray:
        """Locations of entries ``first, first + step, ...`` up to ``last`` (0 = absent). Only pages that
        hold something are loaded: one probe per page the ids fall on, nothing for the holes."""
        per = self.entries_per_page
        n = (last - first) // step + 1
        out = np.zeros(n, dtype=np.int64)
        k = 0
        while k < n:
            eid = first + k * step
            page_no = eid // per
            m = min(n - k, (page_no * per + per - 1 - eid) // step + 1)  # wanted ids on this page
            page = self._stored_page(ledger, page_no)
            if page is not None:
                lo = eid - page_no * per
                out[k: k + m] = page[lo: lo + (m - 1) * step + 1: step]
            k += m
        return out

    def get_range(self, ledger: LedgerId, first: int, last: int) -> np.ndarray:
        return self.get_strided(ledger, first, last, 1)

    def get_sorted(self, ledger: LedgerId, entry_ids: np.ndarray) -> np.ndarray:
        """Locations of the increasing ``entry_ids`` (0 = absent): one probe per page they fall on, nothing
        for the pages between them, nothing loaded for a hole."""
        per = self.entries_per_page
        out = np.zeros(len(entry_ids), dtype=np.int64)
        for page_no, lo, hi in self._page_runs(entry_ids):
            page = self._stored_page(ledger, page_no)
            if page is not None:
                out[lo:hi] = page[entry_ids[lo:hi] - page_no * per]
        return out

    def stored_pages(self, ledger: LedgerId, last: int) -> Iterator[tuple[int, np.ndarray]]:
        """``(page_no, slots)`` of each page that holds a location, in order, its slots cut at id ``last``;
        the holes between cost nothing (next_stored_page). The slots are a view of the cached page, not a
        copy: callers hold the storage lock while they use them."""
        per = self.entries_per_page
        page_no = self.next_stored_page(ledger, 0)
        while page_no is not None and page_no * per <= last:
            yield page_no, self._page(ledger, page_no)[: last + 1 - page_no * per]
            page_no += 1  # a cached page is the index's latest word on its ids: no search for it
            if (ledger, page_no) not in self._pages:
                page_no = self.next_stored_page(ledger, page_no)

    def stored_ids(self, ledger: LedgerId, last: int) -> np.ndarray:
        """Ids up to ``last`` with a location: the pages that hold something are visited, nothing else."""
        per = self.entries_per_page
        parts = [np.flatnonzero(slots) + page_no * per for page_no, slots in self.stored_pages(ledger, last)]
        return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)

    def last_entry_on_disk(self, ledger: LedgerId) -> int:
        """Highest entry id with a location in the index file (-1 if none); reads only its data regions."""
        info = self.index.find(ledger)
        if info is None:
            return -1
        per = self.entries_per_page
        for start, end in reversed(info.data_extents()):
            first_page = (start - INDEX_HEADER_SIZE) // (per * 8)
            for page_no in range((end - 1 - INDEX_HEADER_SIZE) // (per * 8), first_page - 1, -1):
                nonzero = np.flatnonzero(info.read_slots(page_no * per, per))
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
        for page_no in self._cached.pop(ledger, []):
            del self._pages[(ledger, page_no)]
            self._dirty.discard((ledger, page_no))
