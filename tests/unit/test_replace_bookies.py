"""Replacing the failed bookies of an ensemble (ensemble_placement.replace_bookies). No processes."""
from __future__ import annotations

import pytest

from bookie.client.ensemble_placement import replace_bookies
from bookie.exceptions import BKNotEnoughBookiesException

pytestmark = pytest.mark.unit


def test_failed_bookies_are_replaced_by_writable_ones_outside_the_ensemble():
    for _ in range(20):
        new = replace_bookies(["a", "b", "c", "d", "e"], ["a", "b", "c"], {0, 2}, set())
        assert new[1] == "b"
        assert sorted(new[i] for i in (0, 2)) == ["d", "e"]


def test_a_quarantined_bookie_only_if_nothing_else_will_do():
    for _ in range(20):
        assert replace_bookies(["a", "b", "c", "q", "d"], ["a", "b", "c"], {1}, {"q"}) == ["a", "d", "c"]
    assert replace_bookies(["a", "b", "c", "q"], ["a", "b", "c"], {1}, {"q"}) == ["a", "q", "c"]


def test_a_failed_bookie_is_never_its_own_replacement():
    with pytest.raises(BKNotEnoughBookiesException):
        replace_bookies(["a", "b", "c"], ["a", "b", "c"], {1}, set())
