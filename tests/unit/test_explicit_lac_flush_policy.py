"""When an idle writer sends its LAC explicitly (bookie/client/explicit_lac_flush_policy.py). No processes."""
from __future__ import annotations

import pytest

from bookie.client.explicit_lac_flush_policy import ExplicitLacFlushPolicy

pytestmark = pytest.mark.unit


def policy_idle_since(t: float, interval: float = 1.0, lac: int = -1) -> ExplicitLacFlushPolicy:
    policy = ExplicitLacFlushPolicy(interval, lac)
    policy.add_sent(t)
    return policy


def test_a_new_lac_is_sent_once_the_writer_is_idle_for_the_interval():
    policy = policy_idle_since(100.0)
    assert not policy.flush_due(100.5, 3, adds_pending=False)  # added too recently
    assert policy.flush_due(101.0, 3, adds_pending=False)
    assert not policy.flush_due(102.0, 3, adds_pending=False)  # already sent
    assert policy.flush_due(102.0, 4, adds_pending=False)


def test_nothing_is_sent_while_adds_are_pending_or_without_a_new_lac():
    assert not policy_idle_since(0.0).flush_due(10.0, 3, adds_pending=True)
    assert not policy_idle_since(0.0, lac=3).flush_due(10.0, 3, adds_pending=False)


def test_an_interval_of_zero_never_sends():
    assert not policy_idle_since(0.0, interval=0).flush_due(1e9, 3, adds_pending=False)
