"""Per-bookie outboxes and in-flight batches of a writer (bookie/client/bookie_outbox.py). No processes."""
from __future__ import annotations

import pytest

from tests.helpers.striping import stripe_frames
from bookie.client.bookie_outbox import BookieOutboxes
from bookie.client.conf import ClientConfiguration
from bookie.client.distribution_schedule import write_set
from bookie.client.pending_add_op import PendingAddOp

pytestmark = pytest.mark.unit

ENSEMBLE = ["b0", "b1", "b2"]


def op_for(first: int, count: int = 1, size: int = 10, write_quorum: int = 2) -> PendingAddOp:
    sets = [tuple(write_set(r, len(ENSEMBLE), write_quorum)) for r in range(len(ENSEMBLE))]
    parts, quorums = stripe_frames(first, [bytes(size)] * count, sets)
    return PendingAddOp(first, first + count - 1, 0, parts, None, quorums)


def outboxes(message_bytes: int = 1 << 20, **conf) -> BookieOutboxes:
    return BookieOutboxes(len(ENSEMBLE), ClientConfiguration.of(conf), message_bytes)


def entries_by_bookie(batches) -> dict[int, list[list[int]]]:
    """Bookie index -> the entry ids of each of its batches."""
    out: dict[int, list[list[int]]] = {}
    for b in batches:
        out.setdefault(b.index, []).append([e for op in b.ops for e in range(op.entry_id, op.last_id + 1)])
    return out


def test_an_op_waits_in_the_outbox_of_each_bookie_of_its_write_sets():
    boxes = outboxes()
    for e in range(3):
        boxes.add(op_for(e))
    assert boxes.has_sendable()
    batches = boxes.take_sendable(ENSEMBLE)
    assert entries_by_bookie(batches) == {0: [[0, 2]], 1: [[0, 1]], 2: [[1, 2]]}
    assert [b.bookie for b in batches] == ENSEMBLE
    assert batches[0].payload() == bytes(20)
    assert not boxes.has_sendable()


def test_no_more_than_max_inflight_batches_per_bookie():
    boxes = outboxes(maxInflightBatchesPerBookie=1)
    boxes.add(op_for(0))
    first = boxes.take_sendable(ENSEMBLE)
    boxes.add(op_for(3))  # same write set as entry 0: bookies 0 and 1 are busy
    boxes.add(op_for(4))  # bookies 1 and 2: bookie 2 is free
    assert boxes.has_sendable()
    assert entries_by_bookie(boxes.take_sendable(ENSEMBLE)) == {2: [[4]]}
    assert not boxes.has_sendable()
    assert all(boxes.retire(b, ENSEMBLE) for b in first)
    assert entries_by_bookie(boxes.take_sendable(ENSEMBLE)) == {0: [[3]], 1: [[3, 4]]}


def test_a_batch_is_cut_at_max_batch_entries_and_at_one_add_message():
    boxes = outboxes(maxBatchEntries=4, maxInflightBatchesPerBookie=10)
    boxes.add(op_for(0, count=3))  # counted by entries, not ops
    boxes.add(op_for(3, count=3))
    boxes.add(op_for(6, count=3))
    assert [len(b) for b in entries_by_bookie(boxes.take_sendable(ENSEMBLE))[0]] == [6, 3]

    boxes = outboxes(message_bytes=25, maxInflightBatchesPerBookie=10)
    for e in (0, 3, 6):  # 10 bytes each for bookies 0 and 1: two fit in 25
        boxes.add(op_for(e))
    assert entries_by_bookie(boxes.take_sendable(ENSEMBLE)) == {0: [[0, 3], [6]], 1: [[0, 3], [6]]}


def test_an_op_larger_than_the_message_goes_alone():
    boxes = outboxes(message_bytes=25)
    boxes.add(op_for(0, size=40))
    boxes.add(op_for(3))
    assert entries_by_bookie(boxes.take_sendable(ENSEMBLE))[0] == [[0], [3]]


def test_retire_tells_a_stale_batch():
    boxes = outboxes()
    boxes.add(op_for(0))
    b0, b1 = boxes.take_sendable(ENSEMBLE)
    assert boxes.retire(b0, ENSEMBLE)
    assert not boxes.retire(b0, ENSEMBLE)  # already retired
    assert not boxes.retire(b1, ["b0", "b9", "b2"])  # its bookie was replaced meanwhile


def test_a_failed_bookie_holds_what_it_has_not_acknowledged_until_replaced():
    boxes = outboxes()
    pending = [op_for(0), op_for(1), op_for(2)]
    for op in pending:
        boxes.add(op)
    sent = boxes.take_sendable(ENSEMBLE)
    pending[0].ack(1)
    boxes.bookie_failed(1, pending)
    assert boxes.failed == {1}
    assert not any(b.index == 1 for b in boxes.take_sendable(ENSEMBLE))
    boxes.bookie_replaced(1, pending)
    assert boxes.failed == set()
    assert not boxes.retire(next(b for b in sent if b.index == 1), ENSEMBLE)  # its answers are ignored
    assert entries_by_bookie(boxes.take_sendable(["b0", "b9", "b2"])) == {1: [[1]]}


def test_timed_out_batches():
    boxes = outboxes()
    boxes.add(op_for(0))
    batches = boxes.take_sendable(ENSEMBLE)
    sent = batches[0].sent
    assert boxes.timed_out(sent + 1.0, 5.0) == []
    assert boxes.timed_out(sent + 6.0, 5.0) == batches
    boxes.retire(batches[0], ENSEMBLE)
    assert boxes.timed_out(sent + 6.0, 5.0) == batches[1:]


def test_clear_sends_nothing_more():
    boxes = outboxes()
    boxes.add(op_for(0))
    boxes.clear()
    assert not boxes.has_sendable()
    assert boxes.take_sendable(ENSEMBLE) == []
