"""The auditor's audit as pure functions: which bookies are lost, which ledgers to mark, when the delay runs out,
which entries a bookie must hold."""
from bookie.meta.ledger_metadata import LedgerMetadata, LedgerState
from bookie.replication.auditor import (bookie_ledger_index, expected_entries, ledgers_to_mark, lost_bookies,
                                        recovery_due)
from bookie.replication.auditor_elector import decode_vote, encode_vote, ordered_votes


def metadata(*ensembles, e=3, wq=2, last=-1) -> LedgerMetadata:
    return LedgerMetadata(e, wq, wq, tuple(ensembles), b"", state=LedgerState.CLOSED if last >= 0 else LedgerState.OPEN,
                          last_entry_id=last)


def test_index_lost_and_marks_follow_every_fragment():
    ledgers = [(1, metadata((0, ("a", "b", "c")))), (2, metadata((0, ("a", "b", "d")), (5, ("e", "b", "d")))),
               (3, metadata((0, ("b", "c", "d"))))]
    index = bookie_ledger_index(ledgers)
    assert index["a"] == {1, 2} and index["e"] == {2} and index["b"] == {1, 2, 3}
    # read-only counts as available; "a" (only in an old fragment) and "e" are lost
    lost = lost_bookies(index, writable=["b", "c"], read_only=["d"])
    assert lost == {"a", "e"}
    assert ledgers_to_mark(index, lost) == {1: {"a"}, 2: {"a", "e"}}
    assert ledgers_to_mark(index, set()) == {}


def test_recovery_due_after_the_delay_only():
    lost_since = {"a": 100.0, "b": 105.0}
    assert recovery_due(lost_since, 0, 105.0) == ({"a", "b"}, None)
    assert recovery_due(lost_since, 10, 104.0) == (set(), 110.0)
    assert recovery_due(lost_since, 10, 110.0) == ({"a"}, 115.0)
    assert recovery_due({}, 10, 0.0) == (set(), None)


def test_expected_entries_follow_the_striping():
    m = metadata((0, ("a", "b", "c")), (4, ("a", "d", "c")), last=7)  # E=3, WQ=2
    assert expected_entries(m, "a") == {0, 2, 3, 5, 6}  # index 0 of both: write set of e is (e, e+1) mod 3
    assert expected_entries(m, "b") == {0, 1, 3}
    assert expected_entries(m, "d") == {4, 6, 7}
    assert expected_entries(m, "x") == set()


def test_votes_round_trip_and_order_by_sequence():
    assert decode_vote(encode_vote("127.0.0.1:3181")) == "127.0.0.1:3181"
    assert encode_vote("b1") == b'bookieId: "b1"\n'
    assert ordered_votes(["V_0000000010", "V_0000000002", "other", "V_0000000009"]) == \
        ["V_0000000002", "V_0000000009", "V_0000000010"]


def test_first_run_honors_the_stored_ctime():
    from bookie.replication.auditor import first_run
    now_ms, now = 1_000_000, 50.0
    assert first_run(0, -1, now_ms, now) is None  # the check is off
    assert first_run(600, -1, now_ms, now) == now  # never ran: at once, as BookKeeper's Auditor
    assert first_run(600, now_ms - 100_000, now_ms, now) == now + 500  # ran 100 s ago: the rest of the interval
    assert first_run(600, now_ms - 700_000, now_ms, now) == now  # overdue: at once
    assert first_run(600, now_ms + 5_000, now_ms, now) == now + 600  # written by a clock ahead: as if just run
