"""ChannelConnection's v2 completion keys (ledger id, entry id), with the test as the bookie at the other end
of a socket pair: answers find their requests by key, the same entry sent again before its answer waits
behind the first, a lost connection fails every request, and a frame that is not an ADDENTRY answer ends it."""
from __future__ import annotations

import socket

import pytest

from bookie.client.native_connection import ChannelConnection, PendingAddBatch, v2_add_answer
from bookie.exceptions import BKBookieHandleNotAvailableException
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import status
from bookie.proto.native_frames import encode_frame, encode_frames
from tests.helpers.waiting import DEADLINE

LEDGER = LedgerId.of(7, 0)


@pytest.fixture
def connection():
    ours, bookie = socket.socketpair()
    conn = ChannelConnection("bookie-1", 1 << 20, ours, v2_add_answer)
    yield conn, bookie
    conn.close()
    bookie.close()


def answer(rc: int, entry_id: int, ledger_id: int = 7) -> bytes:
    return v2.encode_add_response(v2.CURRENT_PROTOCOL_VERSION, rc, ledger_id, entry_id)


def test_answers_complete_their_batches_by_ledger_and_entry(connection):
    conn, bookie = connection
    a, b = PendingAddBatch(LEDGER, [0, 1], v2_keys=True), PendingAddBatch(LEDGER, [2], v2_keys=True)
    conn.send([((7, 0), b"x", a), ((7, 1), b"x", a), ((7, 2), b"x", b)])
    bookie.sendall(encode_frames([answer(v2.EOK, 2), answer(v2.EFENCED, 1), answer(v2.EOK, 0)]))
    assert b.future.result(DEADLINE).status == status.EOK
    failed = a.future.result(DEADLINE)
    assert (failed.status, failed.message, failed.entryCount) == (status.EFENCED, "entry 1: EFENCED", 2)


def test_the_same_entry_sent_again_is_answered_after_the_first(connection):
    conn, bookie = connection
    first, again = PendingAddBatch(LEDGER, [5], v2_keys=True), PendingAddBatch(LEDGER, [5], v2_keys=True)
    conn.send([((7, 5), b"x", first)])
    conn.send([((7, 5), b"x", again)])
    assert list(conn.waiting) == [(7, 5)]
    bookie.sendall(encode_frame(answer(v2.EOK, 5)))
    assert first.future.result(DEADLINE).status == status.EOK and not again.future.done()
    bookie.sendall(encode_frame(answer(v2.EFENCED, 5)))
    assert again.future.result(DEADLINE).status == status.EFENCED
    assert conn.pending == {} and conn.waiting == {}


def test_a_lost_connection_fails_waiting_requests_too(connection):
    conn, bookie = connection
    first, again = PendingAddBatch(LEDGER, [5], v2_keys=True), PendingAddBatch(LEDGER, [5], v2_keys=True)
    conn.send([((7, 5), b"x", first), ((7, 5), b"x", again)])
    bookie.close()
    for batch in (first, again):
        with pytest.raises(BKBookieHandleNotAvailableException, match="connection to bookie bookie-1 lost"):
            batch.future.result(DEADLINE)


def test_a_frame_that_is_not_an_add_answer_ends_the_connection(connection):
    conn, bookie = connection
    batch = PendingAddBatch(LEDGER, [0], v2_keys=True)
    conn.send([((7, 0), b"x", batch)])
    bookie.sendall(encode_frame(v2.encode_response(v2.ReadResponse(2, v2.EOK, 7, 0, b"data"))))
    with pytest.raises(BKBookieHandleNotAvailableException, match="ADDENTRY answer is 24 bytes, got 28"):
        batch.future.result(DEADLINE)
