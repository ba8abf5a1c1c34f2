"""gc_paused: pauses of the cyclic garbage collector nest across threads and leave it as they found it;
a range read builds its entries with the collector paused (bookie/util/gc_pause.py says why)."""
from __future__ import annotations

import gc
import threading

import pytest

from bookie.util.gc_pause import gc_paused
from tests.unit.test_ledger_reader_stream import framed, reader_of, stream

pytestmark = pytest.mark.unit


@pytest.fixture
def collector():
    """The collector enabled with CPython's default thresholds, restored afterwards."""
    was_enabled, thresholds = gc.isenabled(), gc.get_threshold()
    gc.enable()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*thresholds)
    (gc.enable if was_enabled else gc.disable)()


def test_pauses_nest_across_threads_and_resume_the_collector_after_the_last(collector):
    inner_entered, outer_may_end = threading.Event(), threading.Event()
    seen = []

    def other_thread():
        with gc_paused():
            inner_entered.set()
            outer_may_end.wait(60)
            seen.append(gc.isenabled())
        seen.append(gc.isenabled())

    with gc_paused():
        t = threading.Thread(target=other_thread)
        t.start()
        assert inner_entered.wait(60)
        assert not gc.isenabled()
    assert not gc.isenabled()  # the other thread's pause still runs
    outer_may_end.set()
    t.join(60)
    assert seen == [False, True] and gc.isenabled()


@pytest.fixture
def collections():
    """(generation, thread id) of each collection that starts while the test runs."""
    seen = []

    def record(phase, info):
        if phase == "start":
            seen.append((info["generation"], threading.get_ident()))

    gc.callbacks.append(record)
    yield seen
    gc.callbacks.remove(record)


def test_a_collector_disabled_before_stays_disabled(collector, collections):
    gc.disable()
    with gc_paused():
        assert not gc.isenabled()
    assert not gc.isenabled()
    assert collections == []  # nor is it run at the end


def test_each_pause_ends_with_a_young_collection_in_its_own_thread(collector, collections):
    """While another thread's pause still holds the collector off, a pause that ends collects the young
    generation itself: what it built is checked while still in the CPU's caches."""
    other_entered, other_may_end = threading.Event(), threading.Event()

    def other_thread():
        with gc_paused():
            other_entered.set()
            other_may_end.wait(60)

    t = threading.Thread(target=other_thread)
    t.start()
    try:
        assert other_entered.wait(60)
        with gc_paused():
            built = [(i, str(i)) for i in range(5_000)]  # tracked tuples: 7 automatic collections unpaused
            assert collections == []
        assert not gc.isenabled()  # the other pause still runs
        assert collections == [(0, threading.get_ident())]
    finally:
        other_may_end.set()
        t.join(60)
    assert (0, t.ident) in collections[1:] and gc.isenabled()
    assert len(built) == 5_000


def test_an_exception_inside_still_resumes_the_collector(collector):
    with pytest.raises(KeyError):
        with gc_paused():
            raise KeyError("x")
    assert gc.isenabled()


def test_a_range_read_message_builds_its_entries_without_collections(collector):
    """10,000 entries are 10,000 tracked LedgerEntry tuples: unpaused, a collection every 700 of them."""
    ids = range(10_000)
    reader = reader_of(framed(ids))
    starts = []

    def count(phase, info):
        if phase == "start":
            starts.append(info["generation"])

    gc.collect()
    gc.callbacks.append(count)
    try:
        result = stream(reader, 0, 9_999, 0, 10_000)
    finally:
        gc.callbacks.remove(count)
    assert [e.entry_id for e in result] == list(ids)
    assert len(starts) <= 2, f"{len(starts)} collections while 10,000 entries were built"
