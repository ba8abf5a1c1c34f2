"""v3 adds as columns (bookie/proto/v3_add_columns.py): a run of same-size ADD_ENTRY Requests gives the entries
framed as stored and, for each request, the answer the one-message encoder gives; frames of another layout
are no run."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import entry_format, status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto.native_frames import encode_frames
from bookie.proto.v3_add_columns import decode_add_answers, scan_add_run
from bookie.proto.v3_hand_encoding import V3AddRequestEncoder, encode_v3_add_response, v3_header_field
from tests.helpers.v3_requests import scan_run, v3_request

KEY = generate_master_key(b"pw")
DIGEST = DigestManager(LedgerId(0, 9), b"pw")


def body(entry_id: int) -> bytes:
    return DIGEST.build_entry(entry_id, entry_id - 1, 0, b"p" * 40)


def request(txn: int, entry_id: int, *, priority: int = 0, recovery: bool = False, write_flags: int | None = None,
            context: bool = False, ledger_id: int = 9) -> pb.Request:
    r = v3_request(pb.ADD_ENTRY, txn, priority, context)
    add = r.addRequest
    add.ledgerId, add.entryId, add.masterKey, add.body = ledger_id, entry_id, KEY, body(entry_id)
    if recovery:
        add.flag = pb.AddRequest.RECOVERY_ADD
    if write_flags is not None:
        add.writeFlags = write_flags
    return r


def scan(requests: list[pb.Request]):
    return scan_run(scan_add_run, requests)


def one_by_one(requests: list[pb.Request], code: int) -> bytes:
    return encode_frames([encode_v3_add_response(v3_header_field(r), code, r.addRequest.ledgerId,
                                                 r.addRequest.entryId) for r in requests])


@given(st.integers(200, 16000), st.integers(200, 16000), st.integers(8, 40), st.sampled_from([0, 100]),
       st.booleans(), st.sampled_from([status.EOK, status.EFENCED, status.EIO]))
@settings(max_examples=100, deadline=None)
def test_a_run_is_its_entries_framed_and_each_request_answered_as_alone(first_txn, first_entry, count, priority,
                                                                        recovery, code):
    requests = [request(first_txn + k, first_entry + k, priority=priority, recovery=recovery) for k in range(count)]
    if len({r.ByteSize() for r in requests}) > 1:
        return  # a varint grew a byte within the run: not one size
    adds = scan(requests)
    assert adds is not None
    assert (adds.ledger_id, adds.master_key, adds.recovery, adds.count) == (9, KEY, recovery, count)
    assert adds.framed == entry_format.frame([r.addRequest.body for r in requests])
    assert adds.encode_answers(code) == one_by_one(requests, code)


def test_the_clients_hand_encoded_requests_are_a_run():
    encode = V3AddRequestEncoder(9, KEY).encode
    payloads = [encode(500 + k, 300 + k, body(300 + k)) for k in range(10)]
    adds = scan_add_run(encode_frames(payloads), len(payloads[0]), 10)
    assert adds is not None and adds.framed == entry_format.frame([body(300 + k) for k in range(10)])


@pytest.mark.parametrize("requests", [
    [request(200, 5), request(5, 200)],  # one size, but the varints changed places
    [request(300 + k, 300 + k, context=True) for k in range(4)],  # a requestContext: checked one by one
    [request(300 + k, 300 + k, write_flags=1) for k in range(4)],  # writeFlags (DEFERRED_SYNC): refused one by one
    [request(300 + k, 300 + k, ledger_id=10 + k % 2) for k in range(4)],  # two ledgers named
])
def test_frames_of_another_layout_are_no_run(requests):
    assert scan(requests) is None


def test_another_operation_or_an_entry_too_short_is_no_run():
    reads = [pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=300 + k),
                        readRequest=pb.ReadRequest(ledgerId=9, entryId=300 + k)) for k in range(4)]
    assert scan(reads) is None
    short = [request(300 + k, 300 + k) for k in range(4)]
    for r in short:
        r.addRequest.body = b"x" * 15
    assert scan(short) is None


@pytest.mark.parametrize("priority", [0, 100])
def test_answers_of_a_run_decode_to_their_txn_ids_and_status(priority):
    requests = [request(300 + k, 200 + k, priority=priority) for k in range(12)]
    answers = scan(requests).encode_answers(status.EFENCED)
    size = len(answers) // 12 - 4
    txns, code = decode_add_answers(answers, size, 12)
    assert (txns.tolist(), code) == ([300 + k for k in range(12)], status.EFENCED)
    reads = encode_frames([pb.Response(header=r.header, status=status.EOK).SerializeToString() for r in requests])
    assert decode_add_answers(reads, len(reads) // 12 - 4, 12) is None  # not answers to adds
