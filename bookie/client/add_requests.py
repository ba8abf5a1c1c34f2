"""The framed add requests of BookKeeper's protocol for a part of a writer's batch (NativeBookieClient.add),
each part encoded once for every bookie it goes to.

A writer sends the same part (one object when E == WQ) to every bookie of its write set. So a part is
encoded once: v2 ADDENTRY requests (the same head before every entry) and v3 AddRequests alike, and the same
buffer is queued on each bookie's connection (``RecentEncodings``). v3 requests carry txnIds, so those come
from one process-wide counter (``TxnIds``): a part keeps its txnIds on every bookie, and a txnId needs to be
unique only among the requests in flight on one connection. A part of MIN_COLUMN_ENTRIES or more entries of
one size is encoded by columns (v2_add_columns, v3_add_columns); any other one request at a time.
"""
from __future__ import annotations

import itertools
import threading
from collections import OrderedDict
from typing import Callable, Hashable, Iterable, TypeVar

from bookie.proto import entry_format, v2_add_columns, v3_add_columns
from bookie.proto.native_frames import FRAME_HEADER
from bookie.proto.v3_hand_encoding import V3AddRequestEncoder

MIN_COLUMN_ENTRIES = 16  # a part's requests are encoded by columns from this many entries on (below, numpy's
#   fixed cost of ~10-25 us a part exceeds what it saves over encoding each request)

T = TypeVar("T")


class TxnIds:
    """The txnIds of this process's v3 requests, from one counter."""

    def __init__(self):
        self._next = 1
        self._lock = threading.Lock()

    def take(self, count: int) -> int:
        """The first of ``count`` consecutive txnIds."""
        with self._lock:
            first = self._next
            self._next += count
        return first


TXN_IDS = TxnIds()


class RecentEncodings:
    """The encodings of the last few parts, by the part object (and what else the encoding depends on).
    Thread-safe: each bookie's client sends from its writer's thread or a completion thread."""

    def __init__(self, size: int = 64):
        self.size = size
        self._lock = threading.Lock()
        self._recent: OrderedDict[tuple, tuple[object, object]] = OrderedDict()

    def get(self, part: bytes, key: Hashable, encode: Callable[[], T], again: bool = False) -> T:
        """``part``'s encoding for ``key``: the one made before for the same object, else (or with ``again``)
        ``encode()``'s, kept for the next bookie."""
        slot = (id(part), key)
        with self._lock:
            hit = self._recent.get(slot)
        if hit is not None and hit[0] is part and not again:  # the same object (an id is reused only once freed)
            return hit[1]
        encoded = encode()
        with self._lock:
            self._recent[slot] = (part, encoded)
            while len(self._recent) > self.size:
                self._recent.popitem(last=False)
        return encoded


_V2 = RecentEncodings()
_V3 = RecentEncodings()


def _by_hand(part: bytes, requests: Callable[[list[int], list], Iterable[bytes]]) -> tuple[bytes, list[int]]:
    """(framed requests, entry ids) of a part's entries, one request at a time: ``requests(ids, entries)``."""
    bodies = list(entry_format.iter_frames(part))
    ids = [entry_format.peek_ids(body, 0)[2] for body in bodies]
    return b"".join(FRAME_HEADER.pack(len(p)) + p for p in requests(ids, bodies)), ids


def v2_add_requests(part: bytes, head: bytes) -> tuple[bytes, list[int]]:
    """(framed v2 ADDENTRY requests, entry ids) of ``part``'s entries, each ``head`` then the entry."""
    return _V2.get(part, head, lambda: v2_add_columns.encode_add_requests(head, part, MIN_COLUMN_ENTRIES)
                   or _by_hand(part, lambda ids, bodies: (head + body for body in bodies)))


def v3_add_requests(part: bytes, ledger_id: int, master_key: bytes, priority: int, recovery: bool,
                    again: bool = False) -> tuple[int, bytes, list[int]]:
    """(first txnId, framed v3 AddRequests, entry ids) of ``part``'s entries; ``again``: with new txnIds (the
    part's requests are still in flight on a connection it is sent to again)."""
    def encode() -> tuple[int, bytes, list[int]]:
        first_txn = TXN_IDS.take(entry_format.count_frames(part))
        encoded = v3_add_columns.encode_add_requests(ledger_id, master_key, first_txn, part, priority, recovery,
                                                     MIN_COLUMN_ENTRIES)
        if encoded is None:
            one = V3AddRequestEncoder(ledger_id, master_key, priority, recovery).encode
            encoded = _by_hand(part, lambda ids, bodies: map(one, itertools.count(first_txn), ids, bodies))
        return (first_txn, *encoded)
    return _V3.get(part, (ledger_id, master_key, priority, recovery), encode, again)
