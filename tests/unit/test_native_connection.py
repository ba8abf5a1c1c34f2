"""ChannelConnection, with the test as the bookie at the other end of a socket pair. v2 completion keys (ledger
id, entry id): answers find their requests by key, the same entry sent again before its answer waits behind the
first, a lost connection fails every request, and a frame that is not an ADDENTRY answer ends it. v3 adds:
a batch is answered by ranges of txnIds, whether its answers come as a run (columns) or one by one. Writes:
the writer thread's, so a bookie that does not read holds back no caller."""
from __future__ import annotations

import socket

import pytest

import threading

import numpy as np

from bookie.client.native_connection import ChannelConnection, PendingAddBatch, v2_add_answer
from bookie.exceptions import BKBookieHandleNotAvailableException
from bookie.ledger_id import LedgerId
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import status
from bookie.proto.v3_hand_encoding import encode_v3_add_response
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
    a, b = PendingAddBatch(LEDGER, [0, 1]), PendingAddBatch(LEDGER, [2])
    conn.send([((7, 0), b"x", a), ((7, 1), b"x", a), ((7, 2), b"x", b)])
    bookie.sendall(encode_frames([answer(v2.EOK, 2), answer(v2.EFENCED, 1), answer(v2.EOK, 0)]))
    assert b.future.result(DEADLINE).status == status.EOK
    failed = a.future.result(DEADLINE)
    assert (failed.status, failed.message, failed.entryCount) == (status.EFENCED, "entry 1: EFENCED", 2)


def test_the_same_entry_sent_again_is_answered_after_the_first(connection):
    conn, bookie = connection
    first, again = PendingAddBatch(LEDGER, [5]), PendingAddBatch(LEDGER, [5])
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
    first, again = PendingAddBatch(LEDGER, [5]), PendingAddBatch(LEDGER, [5])
    conn.send([((7, 5), b"x", first), ((7, 5), b"x", again)])
    bookie.settimeout(DEADLINE)
    assert bookie.recv(1 << 16)  # written (by the writer thread): then the bookie goes away
    bookie.close()
    for batch in (first, again):
        with pytest.raises(BKBookieHandleNotAvailableException, match="connection to bookie bookie-1 lost"):
            batch.future.result(DEADLINE)


def test_a_frame_that_is_not_an_add_answer_ends_the_connection(connection):
    conn, bookie = connection
    batch = PendingAddBatch(LEDGER, [0])
    conn.send([((7, 0), b"x", batch)])
    bookie.sendall(encode_frame(v2.encode_response(v2.ReadResponse(2, v2.EOK, 7, 0, b"data"))))
    with pytest.raises(BKBookieHandleNotAvailableException, match="ADDENTRY answer is 24 bytes, got 28"):
        batch.future.result(DEADLINE)


@pytest.fixture
def v3_connection():
    ours, bookie = socket.socketpair()
    conn = ChannelConnection("bookie-1", 1 << 20, ours)
    yield conn, bookie
    conn.close()
    bookie.close()


def v3_answers(code: int, txns, entry_id: int = 0) -> bytes:
    """Framed answers to adds, each with its txnId and ``code`` (laid out alike: a run of them is decoded as
    columns)."""
    header = v3.BKPacketHeader(version=v3.VERSION_THREE, operation=v3.ADD_ENTRY)
    frames = []
    for txn in txns:
        header.txnId = txn
        field = b"\x0a" + bytes([header.ByteSize()]) + header.SerializeToString()
        frames.append(encode_v3_add_response(field, code, 7, entry_id))
    return encode_frames(frames)


def test_a_v3_batch_is_answered_by_ranges_of_txn_ids(v3_connection):
    conn, bookie = v3_connection
    a, b = PendingAddBatch(LEDGER, list(range(10, 50))), PendingAddBatch(LEDGER, [50])
    assert conn.send_adds(a, [(1000, 30), (1030, 10)], [b"x"])  # two parts
    assert conn.send_adds(b, [(1040, 1)], [b"y"])
    assert not conn.send_adds(PendingAddBatch(LEDGER, [10]), [(1000, 1)], [b"z"])  # 1000 is in flight: not sent
    bookie.sendall(v3_answers(status.EOK, range(1000, 1020)))  # a run: columns
    bookie.sendall(v3_answers(status.EOK, [1040]) + v3_answers(status.EFENCED, [1025]))  # one by one
    assert b.future.result(DEADLINE).status == status.EOK and not a.future.done()
    bookie.sendall(v3_answers(status.EOK, [1019, 1025] + list(range(1020, 1040))))  # answered again: counted once
    failed = a.future.result(DEADLINE)
    assert (failed.status, failed.message, failed.entryCount) == (status.EFENCED, "entry 35: EFENCED", 40)
    assert conn.add_batches == {}


def test_an_add_answer_without_its_add_part_has_the_header_status(v3_connection):
    conn, bookie = v3_connection
    batch = PendingAddBatch(LEDGER, [4])
    conn.send_adds(batch, [(9, 1)], [b"x"])
    bookie.sendall(encode_frame(v3.Response(header=v3.BKPacketHeader(version=v3.VERSION_THREE, operation=v3.ADD_ENTRY,
                                                                      txnId=9), status=v3.EBADREQ).SerializeToString()))
    assert batch.future.result(DEADLINE).status == status.EBADREQ


def test_a_bookie_that_does_not_read_holds_back_no_caller(v3_connection):
    """The caller queues; the writer thread writes. A bookie that reads nothing fills the socket, and the
    writer waits there, not the caller; closing the connection ends the writer's wait."""
    conn, bookie = v3_connection
    batches = [PendingAddBatch(LEDGER, [k]) for k in range(64)]
    sent = threading.Event()

    def send_all() -> None:
        for k, batch in enumerate(batches):
            conn.send_adds(batch, [(k + 1, 1)], [b"x" * (1 << 20)])  # 64 MiB: far more than a socket holds
        sent.set()
    threading.Thread(target=send_all, daemon=True).start()
    assert sent.wait(DEADLINE), "a caller waited for the bookie to read"
    conn.close()
    assert not conn.writer.is_alive()
    for batch in batches:
        with pytest.raises(Exception, match="closed"):
            batch.future.result(DEADLINE)


def test_take_counts_each_entry_once_and_keeps_the_first_failure():
    batch = PendingAddBatch(LEDGER, [10, 11, 12, 13])  # parts: entries 10..11 at txnIds 100.., 12..13 at 500..
    assert batch.take(np.array([100, 7, 200]) - 100, 0, 2, status.EOK) == (False, False)  # 7, 200: not this part's
    assert batch.take(np.array([101]) - 100, 0, 2, status.EIO) == (True, False)
    assert batch.take(np.array([500, 500]) - 500, 2, 2, status.EOK) == (False, False)
    assert batch.take(np.array([501, 500]) - 500, 2, 2, status.EFENCED) == (True, True)
    assert (batch.response.status, batch.response.message) == (status.EIO, "entry 11: EIO")
