"""The future an append returns (AddFuture, bookie/client/pending_add_op.py): it behaves as a
concurrent.futures.Future whether or not anybody waits on it, and it makes no Condition until
somebody does. No processes."""
from __future__ import annotations

import asyncio
import concurrent.futures as cf
import gc
import threading

import pytest

from bookie.client.pending_add_op import AddFuture
from bookie.exceptions import BKWriteException
from tests.helpers.waiting import wait_for

pytestmark = pytest.mark.unit


def test_is_a_future_and_completes_without_a_condition_when_nobody_waits() -> None:
    f = AddFuture()
    seen: list[object] = []
    f.add_done_callback(lambda g: seen.append(g.result()))
    f.add_done_callback(lambda g: seen.append("second"))
    assert isinstance(f, cf.Future) and not f.done()
    f.set_result(7)
    assert f.done() and f.result() == 7 and f.exception() is None
    assert seen == [7, "second"]  # callbacks run once each, in the order they were added
    assert f._cond is None  # completed, read and called back without a Condition
    assert not f.cancelled() and not f.running()
    g = AddFuture()
    g.set_result(1)
    g.add_done_callback(lambda h: seen.append("late"))  # added after completion: called at once
    assert seen[-1] == "late" and g._cond is None


def test_callbacks_run_in_the_order_added_before_and_after_a_waiter_made_the_condition() -> None:
    f = AddFuture()
    order: list[int] = []
    for i in range(3):  # the first kept alone, the next ones in a list, all without a Condition
        f.add_done_callback(lambda g, i=i: order.append(i))
    with pytest.raises(cf.TimeoutError):
        f.result(timeout=0)  # a waiter: the Condition is made, Future's own methods take over
    f.add_done_callback(lambda g: order.append(3))
    f.set_result(None)
    f.add_done_callback(lambda g: order.append(4))  # after completion: at once
    assert order == [0, 1, 2, 3, 4]


def test_an_append_in_flight_is_one_object_for_the_garbage_collector() -> None:
    f = AddFuture()
    f.add_done_callback(lambda g: None)
    # No per-instance dict and no list for one callback: thousands in flight cost the collector little.
    assert not any(isinstance(r, (dict, list)) for r in gc.get_referents(f))


def test_exception_is_raised_by_result_and_given_by_exception() -> None:
    f = AddFuture()
    error = BKWriteException("bookie gone")
    f.set_exception(error)
    assert f.done() and f.exception() is error
    with pytest.raises(BKWriteException, match="bookie gone"):
        f.result()


def test_a_second_completion_is_refused() -> None:
    f = AddFuture()
    f.set_result(1)
    with pytest.raises(cf.InvalidStateError):
        f.set_result(2)
    with pytest.raises(cf.InvalidStateError):
        f.set_exception(BKWriteException("late"))
    assert f.result() == 1


def test_cancelled_future_stays_cancelled() -> None:
    f = AddFuture()
    called: list[bool] = []
    f.add_done_callback(lambda g: called.append(g.cancelled()))
    assert f.cancel() and f.cancelled() and f.done() and called == [True]
    with pytest.raises(cf.InvalidStateError):
        f.set_result(1)  # the completion thread ignores this (a future its owner cancelled)
    with pytest.raises(cf.CancelledError):
        f.result()


@pytest.mark.parametrize("outcome", ["result", "exception"])
def test_a_thread_waiting_in_result_is_woken_by_completion(outcome: str) -> None:
    f = AddFuture()
    got: list[object] = []

    def wait() -> None:
        try:
            got.append(f.result())
        except BKWriteException as exc:
            got.append(exc)

    waiter = threading.Thread(target=wait)
    waiter.start()
    # Waiting made the Condition: completion must notify it.
    wait_for(lambda: f._cond is not None and f._cond._waiters, "the thread waits on the future")
    error = BKWriteException("failed")
    f.set_result(5) if outcome == "result" else f.set_exception(error)
    waiter.join(10)
    assert not waiter.is_alive() and got == [5 if outcome == "result" else error]


def test_result_times_out_when_not_completed() -> None:
    f = AddFuture()
    with pytest.raises(cf.TimeoutError):
        f.result(timeout=0)
    f.set_result(3)  # after a waiter made the Condition, completion goes through it
    assert f.result(timeout=0) == 3


def test_works_with_wait_and_as_completed() -> None:
    futures = [AddFuture() for _ in range(3)]
    futures[0].set_result(0)  # completed before anyone waited: no Condition
    done, not_done = cf.wait(futures, timeout=0)
    assert done == {futures[0]} and not_done == set(futures[1:])
    completing = threading.Thread(target=lambda: [f.set_result(i) for i, f in enumerate(futures[1:], 1)])
    completing.start()
    assert sorted(f.result() for f in cf.as_completed(futures, timeout=10)) == [0, 1, 2]
    completing.join()


def test_works_with_asyncio() -> None:
    f = AddFuture()

    async def main() -> int:
        threading.Thread(target=f.set_result, args=(9,)).start()
        return await asyncio.wrap_future(f)

    assert asyncio.run(main()) == 9
