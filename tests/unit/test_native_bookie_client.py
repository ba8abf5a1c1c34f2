"""NativeBookieClient's answers in the gRPC shapes the writer and readers consume, built from
single-entry answers (no connection: the single reads and adds are stubbed)."""
from __future__ import annotations

from concurrent.futures import Future

import numpy as np
import pytest

from bookie.client import add_requests
from bookie.client.add_requests import TxnIds
from bookie.client.native_bookie_client import NativeBookieClient
from bookie.client.native_connection import PendingAddBatch
from bookie.proto.native_frames import FrameDecoder
from bookie.exceptions import BKBookieHandleNotAvailableException, BKIncorrectParameterException
from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto import bookkeeper_protocol_pb2 as v3
from bookie.proto import entry_format, status
from bookie.proto.checksum import DigestManager

LEDGER = LedgerId.of(7, 0)


def done(value=None, error=None) -> Future:
    f: Future = Future()
    f.set_exception(error) if error is not None else f.set_result(value)
    return f


def stub_reads(client: NativeBookieClient, answers: dict[int, int]) -> None:
    """Entry e answers ``answers.get(e, EOK)``; an EOK body is 10 bytes naming the entry."""
    def read_entry_async(ledger, entry_id, **kwargs):
        code = answers.get(entry_id, status.EOK)
        body = b"%010d" % entry_id if code == status.EOK else b""
        return done(pb.ReadResponse(status=code, entryId=entry_id, body=body, maxLAC=entry_id))
    client.read_entry_async = read_entry_async


def ids_of(message) -> list[int]:
    return [int(bytes(frame)) for frame in entry_format.iter_frames(message.entries)]


def test_range_read_honours_stride_offset_and_skips_absent_entries():
    client = NativeBookieClient("127.0.0.1:1")
    stub_reads(client, {5: status.ENOENTRY})
    messages = list(client.read_entries(LEDGER, 0, 10, stride=3, offset=2))
    assert [e for m in messages for e in ids_of(m)] == [2, 8]
    assert messages[-1].lastEntryIdCovered == 10 and all(m.status == status.EOK for m in messages)


def test_range_read_splits_at_max_bytes():
    client = NativeBookieClient("127.0.0.1:1")
    stub_reads(client, {})
    messages = list(client.read_entries(LEDGER, 0, 9, max_bytes=30))  # 14 bytes a framed entry
    assert [ids_of(m) for m in messages] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert [m.lastEntryIdCovered for m in messages] == [2, 5, 8, 9]


def test_range_read_stops_at_an_error_after_what_it_read():
    client = NativeBookieClient("127.0.0.1:1")
    stub_reads(client, {3: status.EIO})
    messages = list(client.read_entries(LEDGER, 0, 9))
    assert ids_of(messages[0]) == [0, 1, 2] and messages[0].lastEntryIdCovered == 2
    assert messages[-1].status == status.EIO and "entry 3" in messages[-1].message


def test_add_batch_fails_with_the_transport_error():
    batch = PendingAddBatch(LEDGER, [0, 1])
    batch.fail(BKBookieHandleNotAvailableException("lost"))
    assert batch.take(np.array([0, 1]), 0, 2, status.EOK) == (True, True)
    batch.settle()
    with pytest.raises(BKBookieHandleNotAvailableException):
        batch.future.result()


@pytest.mark.parametrize("payloads, first_entry, first_txn", [
    ([b"a", b"bb"], 5, 1),  # entries of two sizes: each request encoded by hand
    ([b"xy"] * 40, 100, 110),  # one size: by columns, across a txnId's and an entry id's varint growing a byte
])
def test_add_sends_one_add_request_per_entry_with_consecutive_txn_ids(payloads, first_entry, first_txn, monkeypatch):
    txn_ids = TxnIds()
    txn_ids._next = first_txn
    monkeypatch.setattr(add_requests, "TXN_IDS", txn_ids)
    sent = []

    class Connection:
        def __init__(self, in_flight: bool = False):
            self.in_flight = in_flight  # the part's txnIds are in flight on it already (once)

        def send_adds(self, batch, ranges, blocks):
            if self.in_flight:
                self.in_flight = False
                return False
            sent.append((ranges, blocks, batch))
            return True

    def client(port: int, connection: Connection) -> NativeBookieClient:
        c = NativeBookieClient(f"127.0.0.1:{port}")
        c._send_block = lambda send, connect: send(connection)
        return c
    digest = DigestManager(LEDGER, b"")
    blob, _ = digest.build_framed(first_entry, first_entry - 1, 0, payloads)
    n = len(payloads)
    futures = [client(port, Connection()).add(LEDGER, b"key", blob, recovery=True) for port in (1, 2)]
    (ranges, blocks, batch), (other_ranges, other_blocks, _) = sent
    assert ranges == other_ranges == [(first_txn, n)] and other_blocks[0] is blocks[0]  # encoded once, for both bookies
    requests = [v3.Request.FromString(p) for p in FrameDecoder().feed(b"".join(blocks))]
    assert [r.header.txnId for r in requests] == list(range(first_txn, first_txn + n))
    assert [(r.header.operation, r.header.priority) for r in requests] == [(v3.ADD_ENTRY, 100)] * n
    bodies = [bytes(b) for b in entry_format.iter_frames(blob)]
    assert [(r.addRequest.ledgerId, r.addRequest.entryId, r.addRequest.masterKey, r.addRequest.body, r.addRequest.flag)
            for r in requests] == [(7, first_entry + k, b"key", body, v3.AddRequest.RECOVERY_ADD)
                                   for k, body in enumerate(bodies)]
    assert batch.take(np.arange(n), 0, n, status.EOK) == (True, True)
    batch.settle()
    assert futures[0].result().entryCount == n
    client(3, Connection(in_flight=True)).add(LEDGER, b"key", blob, recovery=True)
    assert sent[2][0] == [(first_txn + n, n)]  # those txnIds in flight there: encoded again with new ones


def test_scoped_ledgers_are_refused():
    with pytest.raises(BKIncorrectParameterException, match="gRPC path"):
        NativeBookieClient("127.0.0.1:1").read_entry_async(LedgerId.of(1, 5), 0)


def test_read_request_as_sent_and_its_answer():
    client = NativeBookieClient("127.0.0.1:1")
    sent = []
    client._submit = sent.extend
    future = client.read_entry_async(LEDGER, 3, fence=True, master_key=b"key")
    (txn, payload, call), = sent
    request = v3.Request.FromString(payload)
    assert (request.header.txnId, request.header.operation, request.header.priority) == (txn, v3.READ_ENTRY, 100)
    assert (request.readRequest.ledgerId, request.readRequest.entryId, request.readRequest.flag,
            request.readRequest.masterKey) == (7, 3, v3.ReadRequest.FENCE_LEDGER, b"key")
    answer = v3.Response(status=v3.EOK)
    answer.readResponse.status, answer.readResponse.body, answer.readResponse.maxLAC = v3.EOK, b"x", 2
    call.answer(txn, answer, client.bookie_id)
    response = future.result()
    assert (response.status, response.ledgerId, response.entryId, response.body, response.maxLAC) == (status.EOK, 7, 3, b"x", 2)
