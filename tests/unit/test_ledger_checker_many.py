"""LedgerChecker as the auditor's check of every ledger uses it, without processes: a check left in flight
finds what the blocking one finds, with the registered bookies given once; a closed ledger without entries is
judged by its bookies' registrations alone (no read)."""
from __future__ import annotations

from bookie.client.ledger_checker import LedgerChecker, unregistered_fragments
from bookie.meta.ledger_metadata import LedgerState
from tests.helpers.sample_metadata import metadata
from tests.unit.test_ledger_checker import B1, B2, B3, B4, LEDGER, FakeBookie, FakeHandle, fake_bk


def test_a_check_in_flight_finds_what_the_blocking_check_finds():
    md = metadata(ensembles=((0, (B1, B2, B3)), (10, (B1, B4, B3))), state=LedgerState.CLOSED, last_entry_id=14)
    bookies = {B1: FakeBookie(set(range(15))), B2: FakeBookie(set(range(5))), B3: FakeBookie(set(range(15))),
               B4: FakeBookie(None)}
    checker = LedgerChecker(fake_bk(bookies, [B1, B2, B3, B4]))
    handle = FakeHandle(LEDGER, md, 14)
    blocking = checker.check_ledger(handle)
    assert checker.check_ledger_async(handle).result(timeout=10) == blocking
    assert {(f.first, tuple(f.bad_bookies)) for f in blocking} == {(0, (B2,)), (10, (B4,))}
    # The registered bookies given by the caller (once for a whole walk) are the ones that count.
    given = checker.check_ledger_async(handle, available={B1, B2, B3}).result(timeout=10)
    assert {(f.first, tuple(f.bad_bookies)) for f in given} == {(0, (B2,)), (10, (B4,))}


def test_a_closed_ledger_without_entries_is_judged_by_registration_alone():
    md = metadata(ensembles=((0, (B1, B2, B3)),), state=LedgerState.CLOSED, last_entry_id=-1)
    assert unregistered_fragments(LEDGER, md, {B1, B2, B3}) == set()
    (fragment,) = unregistered_fragments(LEDGER, md, {B1, B3, B4})
    assert (fragment.first, fragment.last, fragment.bad_bookies, fragment.closed) == (0, -1, [B2], True)
    # What a check with reads finds when the registered bookies answer: the same, without the reads.
    checker = LedgerChecker(fake_bk({B1: FakeBookie(set()), B3: FakeBookie(set()), B4: FakeBookie(set())},
                                    [B1, B3, B4]))
    assert checker.check_ledger(FakeHandle(LEDGER, md, -1)) == {fragment}
