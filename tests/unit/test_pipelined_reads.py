"""bookie.meta.pipelined_reads: answers in order, never more than the window outstanding."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from bookie.meta.pipelined_reads import pipelined


@given(st.lists(st.integers(), max_size=200), st.integers(min_value=1, max_value=50))
def test_answers_come_in_order_with_at_most_window_outstanding(items, window):
    outstanding, most = set(), [0]

    def send(item):
        handle = object()
        outstanding.add(handle)
        most[0] = max(most[0], len(outstanding))
        return handle, item

    def receive(item, sent):
        handle, sent_for = sent
        outstanding.remove(handle)
        assert sent_for == item
        return item * 2

    assert list(pipelined(items, send, receive, window)) == [(i, i * 2) for i in items]
    assert not outstanding
    assert most[0] == min(window, len(items))


def test_a_failed_answer_ends_the_walk():
    def receive(item, sent):
        if item == 3:
            raise KeyError(item)
        return item

    walk = pipelined(range(10), lambda i: i, receive, 4)
    assert [next(walk) for _ in range(3)] == [(0, 0), (1, 1), (2, 2)]
    with pytest.raises(KeyError):
        next(walk)


def test_window_must_be_positive():
    with pytest.raises(ValueError, match="window must be at least 1"):
        list(pipelined([1], lambda i: i, lambda i, s: s, 0))
