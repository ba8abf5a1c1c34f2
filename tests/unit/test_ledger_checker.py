"""LedgerChecker without processes: which entries each bookie must hold, the fragments of open and
closed ledgers, and which bookies are bad (unregistered, silent, or missing an entry they must hold)."""
from __future__ import annotations

import concurrent.futures as cf
from dataclasses import dataclass

from bookie.client.ledger_checker import LedgerChecker, fragments_of, stored_bounds
from bookie.exceptions import BKBookieHandleNotAvailableException
from bookie.ledger_id import LedgerId
from bookie.meta.ledger_metadata import LedgerState
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import status
from tests.helpers.sample_metadata import metadata

LEDGER = LedgerId(0, 7)
B1, B2, B3, B4 = "127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3", "127.0.0.1:4"


def test_stored_bounds_follow_the_striping():
    # E 3, WQ 2: bookie i stores e when (i - e) mod 3 < 2.
    assert stored_bounds(0, 0, 9, 3, 2) == (0, 9)
    assert stored_bounds(1, 0, 9, 3, 2) == (0, 9)
    assert stored_bounds(2, 0, 9, 3, 2) == (1, 8)
    assert stored_bounds(2, 3, 3, 3, 2) is None  # entry 3 is on bookies 0 and 1 only
    assert stored_bounds(1, 5, 5, 3, 3) == (5, 5)  # WQ == E: every bookie holds every entry


def test_fragments_end_at_the_next_segment_the_last_entry_or_the_lac():
    md = metadata(ensembles=((0, (B1, B2, B3)), (10, (B1, B4, B3))), state=LedgerState.CLOSED, last_entry_id=14)
    assert fragments_of(LEDGER, md, lac=-1) == [(0, 9, (B1, B2, B3), True), (10, 14, (B1, B4, B3), True)]
    open_md = metadata(ensembles=((0, (B1, B2, B3)), (10, (B1, B4, B3))))
    assert fragments_of(LEDGER, open_md, lac=12) == [(0, 9, (B1, B2, B3), True), (10, 12, (B1, B4, B3), False)]


@dataclass
class FakeHandle:
    ledger: LedgerId
    metadata: object
    last_add_confirmed: int


class FakeBookie:
    def __init__(self, entries: set[int] | None):
        self.entries = entries  # None: not answering

    def read_entry_async(self, ledger, entry_id):
        future: cf.Future = cf.Future()
        if self.entries is None:
            future.set_exception(BKBookieHandleNotAvailableException("not reachable"))
        else:
            future.set_result(pb.ReadResponse(status=status.EOK if entry_id in self.entries else status.ENOENTRY))
        return future


class FakeStore:
    def __init__(self, registered: list[str]):
        self.registered = registered

    def bookies(self, read_only: bool = False) -> list[str]:
        return [] if read_only else self.registered


@dataclass
class FakeBK:
    """What the checker asks of the client: the store's bookie listings and a client per bookie."""
    clients: dict[str, FakeBookie]
    store: FakeStore

    def bookie_client(self, bookie_id: str) -> FakeBookie:
        return self.clients[bookie_id]


def fake_bk(bookies: dict[str, FakeBookie], registered: list[str]) -> FakeBK:
    return FakeBK(bookies, FakeStore(registered))


def test_bad_bookies_are_unregistered_silent_or_missing_a_bound_entry():
    md = metadata(ensembles=((0, (B1, B2, B3)), (10, (B1, B4, B3))), state=LedgerState.CLOSED, last_entry_id=14)
    bookies = {
        B1: FakeBookie(set(range(15))),  # all it must hold (and more: only the bounds are read)
        B2: FakeBookie({0, 1, 3, 4, 6, 7}),  # misses 9, its last entry of fragment 0
        B3: FakeBookie(None),  # registered but silent
        B4: FakeBookie(set(range(10, 15))),
    }
    found = LedgerChecker(fake_bk(bookies, [B1, B2, B3, B4])).check_ledger(FakeHandle(LEDGER, md, 14))
    assert {(f.first, f.last, f.bad, f.closed) for f in found} == {
        (0, 9, frozenset({1, 2}), True), (10, 14, frozenset({2}), True)}
    unregistered = LedgerChecker(fake_bk({**bookies, B3: FakeBookie(set(range(15)))}, [B1, B2, B4]))
    assert {f.bad for f in unregistered.check_ledger(FakeHandle(LEDGER, md, 14))} == {frozenset({1, 2}), frozenset({2})}


def test_an_empty_closed_fragment_is_bad_only_where_a_bookie_does_not_answer():
    md = metadata(state=LedgerState.CLOSED, last_entry_id=-1)
    alive = {B1: FakeBookie(set()), B2: FakeBookie(set()), B3: FakeBookie(set())}
    assert LedgerChecker(fake_bk(alive, [B1, B2, B3])).check_ledger(FakeHandle(LEDGER, md, -1)) == set()
    found = LedgerChecker(fake_bk({**alive, B2: FakeBookie(None)}, [B1, B2, B3])).check_ledger(FakeHandle(LEDGER, md, -1))
    assert [(f.first, f.last, f.bad) for f in found] == [(0, -1, frozenset({1}))]


def test_the_open_last_fragment_is_checked_up_to_the_lac_and_reported_open():
    md = metadata()  # open, one fragment
    bookies = {B1: FakeBookie(set(range(5))), B2: FakeBookie(set(range(5))), B3: FakeBookie(set(range(5)))}
    c = LedgerChecker(fake_bk(bookies, [B1, B3]))  # B2 lost
    found = c.check_ledger(FakeHandle(LEDGER, md, 4))
    assert [(f.first, f.last, f.bad, f.closed) for f in found] == [(0, 4, frozenset({1}), False)]
    assert c.check_ledger(FakeHandle(LEDGER, md, 4), include_open=False) == set()
