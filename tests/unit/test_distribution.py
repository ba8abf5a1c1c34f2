"""Pure algorithms of the client: write sets, quorum coverage, placement."""
from __future__ import annotations

import itertools

import pytest

from bookie.client.distribution_schedule import is_covered, missing_quorum, stored_count, stores, write_set
from bookie.client.ensemble_placement import new_ensemble, replace_bookie
from bookie.exceptions import BKNotEnoughBookiesException


def test_write_sets_round_robin():
    assert [write_set(e, 3, 2) for e in range(4)] == [[0, 1], [1, 2], [2, 0], [0, 1]]
    assert write_set(7, 5, 5) == [2, 3, 4, 0, 1]
    for e, i in itertools.product(range(10), range(5)):
        assert stores(i, e, 5, 3) == (i in write_set(e, 5, 3))


@pytest.mark.parametrize("e,wq,aq", [(3, 2, 2), (3, 3, 2), (5, 3, 2), (4, 2, 1), (3, 3, 3)])
def test_coverage_matches_its_definition(e, wq, aq):
    """Covered iff every acked entry (AQ bookies of some write set) has an answering bookie."""
    for n in range(e + 1):
        for known in itertools.combinations(range(e), n):
            brute = all(any(b in known for b in acked)
                        for first in range(e)
                        for acked in itertools.combinations(write_set(first, e, wq), aq))
            assert is_covered(set(known), e, wq, aq) == brute, (known, e, wq, aq)


def test_known_examples():
    assert is_covered({0, 1, 2}, 3, 2, 2)
    assert is_covered({0}, 3, 3, 2) is False and is_covered({0, 1}, 3, 3, 2)
    assert missing_quorum(3, 2) == 2 and missing_quorum(2, 2) == 1


def test_placement():
    bookies = [f"b{i}" for i in range(5)]
    ensemble = new_ensemble(bookies, 3)
    assert len(set(ensemble)) == 3 and set(ensemble) <= set(bookies)
    assert replace_bookie(bookies, ensemble, {"b9"}) not in ensemble
    with pytest.raises(BKNotEnoughBookiesException, match="need 3 writable bookies, 2 available"):
        new_ensemble(["a", "b"], 3)


def test_stored_count_is_the_number_of_entries_of_the_range_the_bookie_stores():
    for ensemble in range(1, 6):
        for quorum in range(1, ensemble + 1):
            for member in range(ensemble):
                for first in range(0, 9):
                    for last in range(first - 1, first + 17):
                        brute = sum(1 for e in range(first, last + 1) if member in write_set(e, ensemble, quorum))
                        assert stored_count(member, first, last, ensemble, quorum) == brute
    assert stored_count(1, 10**15, 10**15 + 3 * 10**9 - 1, 3, 2) == 2 * 10**9  # no walk over the range

