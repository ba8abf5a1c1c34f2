"""Waiting out a lost ZooKeeper connection (bookie/meta/retry.py), without a server: a request that may be sent
twice is sent again once the connection is back (kazoo moved to another server of the ensemble, or opened a new
session), and given up once no connection came back in time."""
from __future__ import annotations

import time

import pytest

from bookie.exceptions import BKZKConnectionLossException, BKZKException
from bookie.meta.retry import retry_when_reconnected


def failing(times: int, error: Exception):
    """A request that fails ``times`` times with ``error``, then answers 42; and the list of its calls."""
    calls = []

    def request():
        calls.append(time.monotonic())
        if len(calls) <= times:
            raise error
        return 42
    return request, calls


def test_sent_again_once_connected_again():
    request, calls = failing(2, BKZKConnectionLossException("lost"))
    looks = iter([False, False, True, False, True])  # the connection comes back after a few looks, twice
    assert retry_when_reconnected(request, lambda: next(looks), seconds=10) == 42
    assert len(calls) == 3


def test_given_up_when_no_connection_comes_back_in_time():
    request, calls = failing(1, BKZKConnectionLossException("lost"))
    start = time.monotonic()
    with pytest.raises(BKZKConnectionLossException, match="lost"):
        retry_when_reconnected(request, lambda: False, seconds=0.2)
    assert len(calls) == 1 and 0.15 < time.monotonic() - start < 5


def test_other_errors_are_not_retried():
    request, calls = failing(1, BKZKException("no such node"))
    with pytest.raises(BKZKException, match="no such node"):
        retry_when_reconnected(request, lambda: True, seconds=10)
    assert len(calls) == 1
