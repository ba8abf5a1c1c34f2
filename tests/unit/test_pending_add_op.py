"""When a pending add is complete, and its ack bookkeeping (bookie/client/pending_add_op.py). No processes."""
from __future__ import annotations

from concurrent.futures import Future

import pytest

from tests.helpers.striping import stripe_frames
from bookie.client.distribution_schedule import write_set
from bookie.client.pending_add_op import PendingAddOp

pytestmark = pytest.mark.unit


def op_for(first: int, count: int, ensemble_size: int, write_quorum: int, result_first: int | None = None,
           future: Future | None = None) -> PendingAddOp:
    """A pending add of entries ``first..first + count - 1``, striped as the writer stripes it."""
    sets = [tuple(write_set(r, ensemble_size, write_quorum)) for r in range(ensemble_size)]
    parts, quorums = stripe_frames(first, [b"f%d" % e for e in range(first, first + count)], sets)
    return PendingAddOp(first, first + count - 1, 10 * (first + count), parts, future, quorums, result_first)


def acked(op: PendingAddOp, *indexes: int) -> PendingAddOp:
    for i in indexes:
        op.ack(i)
    return op


def test_a_lone_entry_completes_with_ack_quorum_of_its_write_set():
    assert not acked(op_for(0, 1, 3, 2), 0).is_complete(2)
    assert not acked(op_for(0, 1, 3, 2), 0, 2).is_complete(2)  # bookie 2 stores nothing of entry 0
    assert acked(op_for(0, 1, 3, 2), 0, 1).is_complete(2)
    assert acked(op_for(0, 1, 3, 2), 1).is_complete(1)
    assert not op_for(0, 1, 3, 2).is_complete(1)


def test_a_striped_run_needs_ack_quorum_in_every_write_set_it_uses():
    op = op_for(0, 3, 3, 2)  # write sets (0, 1), (1, 2), (2, 0)
    assert not acked(op, 1).is_complete(1)  # (2, 0) has no ack
    assert acked(op, 0).is_complete(1)
    assert not op.is_complete(2)  # (1, 2) has one ack of two
    assert acked(op, 2).is_complete(2)


def test_a_run_shorter_than_the_ensemble_needs_only_its_own_write_sets():
    op = op_for(0, 2, 5, 3)  # write sets (0, 1, 2) and (1, 2, 3): bookie 4 stores none of it
    assert op.write_set == (0, 1, 2, 3)
    assert acked(op, 1, 2).is_complete(2)
    assert not acked(op_for(0, 2, 5, 3), 0, 3).is_complete(2)  # each write set has only one of them


def test_without_striping_ack_quorum_of_the_ensemble_completes():
    op = op_for(0, 4, 3, 3)
    assert not acked(op, 2).is_complete(2)
    assert acked(op, 0).is_complete(2)


def test_acks_are_counted_once_per_bookie():
    op = acked(op_for(0, 1, 3, 2), 0, 0, 0)
    assert op.acked == {0}
    assert not op.is_complete(2)


def test_awaits_names_the_bookies_that_store_a_part_and_have_not_acknowledged():
    op = acked(op_for(4, 1, 3, 2), 2)  # entry 4 -> bookies 1, 2
    assert [i for i in range(3) if op.awaits(i)] == [1]
    op.acked.discard(2)  # a replaced bookie must store it again
    assert [i for i in range(3) if op.awaits(i)] == [1, 2]


def test_result_count_and_length():
    future = Future()
    single = op_for(7, 1, 3, 2, future=future)
    assert (single.count, single.result(), single.length, single.future) == (1, 7, 80, future)
    piece = op_for(1024, 500, 3, 2, result_first=0)  # the last piece of a batch that began at entry 0
    assert piece.count == 500
    assert piece.result() == range(0, 1524)
    assert piece.length == 15240
