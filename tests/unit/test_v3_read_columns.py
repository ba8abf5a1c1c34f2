"""v3 reads as columns (bookie/proto/v3_read_columns.py): a run of same-size plain READ_ENTRY Requests at evenly
stepped ids is named by its ledger, first id, step and count, and answered, for each request, with what the
one-message encoder gives; frames of another layout are no run."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status
from bookie.proto.native_frames import encode_frames
from bookie.proto.v3_hand_encoding import encode_v3_read_response, v3_header_field
from bookie.proto.v3_read_columns import scan_read_run
from tests.helpers.v3_requests import scan_run, v3_request

LEDGER = 77


def request(txn: int, entry_id: int, *, priority: int = 0, ledger_id: int = LEDGER, fence: bool = False,
            previous_lac: int | None = None, context: bool = False) -> pb.Request:
    r = v3_request(pb.READ_ENTRY, txn, priority, context)
    read = r.readRequest
    read.ledgerId, read.entryId = ledger_id, entry_id
    if fence:
        read.flag = pb.ReadRequest.FENCE_LEDGER
        read.masterKey = b"k" * 20
    if previous_lac is not None:
        read.previousLAC, read.timeOut = previous_lac, 1000
    return r


def scan(requests: list[pb.Request]):
    return scan_run(scan_read_run, requests)


def entry(entry_id: int, size: int) -> bytes:
    return LEDGER.to_bytes(8, "big") + entry_id.to_bytes(8, "big") + bytes([entry_id % 251]) * (size - 16)


@given(st.integers(200, 16000), st.integers(200, 16000), st.integers(1, 4), st.integers(1, 40),
       st.sampled_from([0, 100]), st.sampled_from([None, -1, 5, 300]), st.integers(16, 200))
@settings(max_examples=100, deadline=None)
def test_a_run_is_answered_as_each_request_alone(first_txn, first_entry, step, count, priority, lac, size):
    requests = [request(first_txn + k, first_entry + k * step, priority=priority) for k in range(count)]
    if len({r.ByteSize() for r in requests}) > 1:
        return  # a varint grew a byte within the run: not one size
    reads = scan(requests)
    assert reads is not None
    assert (reads.ledger_id, reads.first, reads.count) == (LEDGER, first_entry, count)
    assert reads.last == first_entry + (count - 1) * step
    if count > 1:
        assert reads.step == step
    bodies = [entry(r.readRequest.entryId, size) for r in requests]
    rows = np.frombuffer(b"".join(bodies), dtype=np.uint8).reshape(count, size)
    alone = encode_frames([encode_v3_read_response(v3_header_field(r), status.EOK, LEDGER, r.readRequest.entryId,
                                                   body, lac) for r, body in zip(requests, bodies)])
    assert reads.encode_answers(rows, lac) == alone
    for frame, r in zip(_frames(alone), requests):  # and protobuf reads each as its request's answer
        response = pb.Response.FromString(frame)
        assert response.header.txnId == r.header.txnId and response.readResponse.entryId == r.readRequest.entryId


def _frames(block: bytes) -> list[bytes]:
    out, at = [], 0
    while at < len(block):
        size = int.from_bytes(block[at:at + 4], "big")
        out.append(block[at + 4:at + 4 + size])
        at += 4 + size
    return out


@pytest.mark.parametrize("requests", [
    [request(300 + k, 300 + k, fence=True) for k in range(4)],  # fencing reads: answered after their fsync
    [request(300 + k, 300 + k, previous_lac=200) for k in range(4)],  # long polls
    [request(300 + k, 300 + k, context=True) for k in range(4)],  # a requestContext: checked one by one
    [request(300 + k, 300 + k, ledger_id=200 + k % 2) for k in range(4)],  # two ledgers named
    [request(300 + k, [300, 303, 306, 310][k]) for k in range(4)],  # ids not evenly stepped
    [request(300 + k, 310 - k) for k in range(4)],  # ids going down
    [request(300 + k, 300) for k in range(3)],  # one id again and again
])
def test_other_frames_are_no_run(requests):
    assert scan(requests) is None


def test_adds_are_no_read_run():
    r = pb.Request()
    r.header.version, r.header.operation, r.header.txnId = pb.VERSION_THREE, pb.ADD_ENTRY, 300
    r.addRequest.ledgerId, r.addRequest.entryId, r.addRequest.masterKey, r.addRequest.body = 1, 2, b"k", b"x" * 16
    assert scan([r, r]) is None
