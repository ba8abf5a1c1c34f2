"""The per-bookie tables' pure part: a bookie's listing against the striping (spark_bookkeeper/bookie_tables.py)."""
from __future__ import annotations

import pickle

import numpy as np
from hypothesis import given, strategies as st

from bookie.ledger_id import LedgerId
from spark_bookkeeper.bookie_tables import KnownLedgers, LedgerOnBookie, LedgersOnBookie, compare


def test_a_bookies_listing_is_compared_fragment_by_fragment():
    """bookie_tables.compare: expected, missing, short fragments from a bookie's sorted entry ids."""
    # E=3 WQ=2, member 0 stores e when e mod 3 is 0 or 2: of fragment 0 (entries 0..9) 0,2,3,5,6,8,9, of
    # fragment 1 (10..13) 11,12.
    ledger = LedgerOnBookie(0, 7, True, 3, 2, ((0, 0, 9, 0), (1, 10, 13, 0)))
    everything = np.array([0, 2, 3, 5, 6, 8, 9, 11, 12], dtype=np.int64)
    assert compare(ledger, everything) == (9, 0, [])
    extra = np.array([0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13, 99], dtype=np.int64)  # more than it must hold
    assert compare(ledger, extra) == (9, 0, [])
    assert compare(ledger, np.array([0, 2, 3, 5, 6, 8, 9, 12, 13], dtype=np.int64)) == (9, 1, [1])
    assert compare(ledger, np.array([2, 3, 11, 12], dtype=np.int64)) == (9, 5, [0])
    assert compare(ledger, np.empty(0, dtype=np.int64)) == (9, 9, [0, 1])
    assert compare(ledger, None) == (9, None, None)
    assert compare(LedgerOnBookie(0, 7, False, 3, 2, ()), everything) == (None, None, None)  # open: not judged


def test_the_plans_compact_columns_give_back_what_was_put_in():
    """LedgersOnBookie and KnownLedgers (what the driver holds per bookie instead of objects) round-trip, also
    through pickle (as a partition reaches an executor)."""
    summaries = [LedgerOnBookie(0, 7, True, 3, 2, ((0, 0, 9, 0), (1, 10, 13, 2))),
                 LedgerOnBookie(5, 8, False, 3, 3, ()), LedgerOnBookie(0, 9, True, 1, 1, ((0, 0, 0, 0),))]
    columns = pickle.loads(pickle.dumps(LedgersOnBookie(summaries)))
    assert list(columns) == summaries and columns.count() == 3
    known = KnownLedgers()
    known.add(LedgerId(0, 7), True)
    known.add(LedgerId(5, 8), False)
    assert known.get((0, 7)) is True and (5, 8) in known  # the index, built on first use, does not travel
    back = pickle.loads(pickle.dumps(known))
    assert back.get((5, 8)) is False and back.get((0, 8)) is None and (0, 9) not in back


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50), st.booleans()), max_size=80),
       st.lists(st.tuples(st.integers(0, 3), st.integers(0, 50)), max_size=40))
def test_known_ledgers_answer_as_a_dict_would(added, asked):
    known, expected = KnownLedgers(), {}
    for scope, ledger_id, closed in added:
        if (scope, ledger_id) not in expected:  # the metadata names a ledger once
            known.add(LedgerId(scope, ledger_id), closed)
            expected[(scope, ledger_id)] = closed
    for key in [*expected, *asked]:
        assert known.get(key) == expected.get(key) and (key in known) == (key in expected)
