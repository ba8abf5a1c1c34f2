"""The hot path's hand-serialized v3 messages (bookie/proto/bookie_proto_encoding.py) are byte for byte
what protobuf serializes: add and read Responses (the native server), add Requests (the native client)."""
from __future__ import annotations

import itertools

import pytest
from hypothesis import given, strategies as st
from google.protobuf.internal.encoder import _VarintBytes

from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import v3_hand_encoding as enc
from bookie.proto import bookkeeper_protocol_pb2 as pb

IDS = (0, 1, 127, 128, 300, 2 ** 37, 2 ** 63 - 1, -1, -2 ** 63)
CODES = [v.number for v in pb.StatusCode.DESCRIPTOR.values]


def request(operation: int, txn: int, priority: int) -> pb.Request:
    r = pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=operation, txnId=txn))
    if priority:
        r.header.priority = priority
    return r


@pytest.mark.parametrize("value", [*IDS, 2 ** 64 - 1])
def test_varint_is_protobufs(value):
    assert enc.varint(value) == _VarintBytes(value % 2 ** 64)  # a negative int64: its two's complement


@pytest.mark.parametrize("txn,priority", [(1, 0), (2 ** 40, 100), (2 ** 64 - 1, 0)])
def test_add_and_read_responses_are_protobufs(txn, priority):
    for code, ledger_id, entry_id in itertools.product(CODES, IDS, IDS[:4]):
        add = request(pb.ADD_ENTRY, txn, priority)
        expected = v2.v3_response(add, code)
        expected.addResponse.status, expected.addResponse.ledgerId, expected.addResponse.entryId = code, ledger_id, entry_id
        assert enc.encode_v3_add_response(enc.v3_header_field(add), code, ledger_id, entry_id) == \
            expected.SerializeToString()
    read = request(pb.READ_ENTRY, txn, priority)
    for body, lac in ((None, None), (b"", -1), (b"x" * 200, 5)):
        expected = v2.v3_response(read, pb.EOK)
        r = expected.readResponse
        r.status, r.ledgerId, r.entryId = pb.EOK, 7, 9
        if body is not None:
            r.body, r.maxLAC = body, lac
        assert enc.encode_v3_read_response(enc.v3_header_field(read), pb.EOK, 7, 9, body, lac) == \
            expected.SerializeToString()


@pytest.mark.parametrize("priority,recovery", [(0, False), (100, True)])
def test_add_requests_are_protobufs(priority, recovery):
    key = bytes(range(20))
    encoder = enc.V3AddRequestEncoder(2 ** 40, key, priority, recovery)
    for txn, entry_id, size in ((1, 0, 0), (128, 2 ** 37 - 1, 1024), (2 ** 50, 5, 70000)):
        expected = request(pb.ADD_ENTRY, txn, priority)
        a = expected.addRequest
        a.ledgerId, a.entryId, a.masterKey, a.body = 2 ** 40, entry_id, key, b"b" * size
        if recovery:
            a.flag = pb.AddRequest.RECOVERY_ADD
        assert encoder.encode(txn, entry_id, b"b" * size) == expected.SerializeToString()


@given(st.integers(min_value=-2 ** 63, max_value=2 ** 64 - 1))
def test_every_varint_is_protobufs(value):
    assert enc.varint(value) == _VarintBytes(value % 2 ** 64)


@given(st.integers(min_value=0, max_value=2 ** 64 - 1), st.sampled_from([pb.ADD_ENTRY, pb.READ_ENTRY]),
       st.one_of(st.none(), st.integers(min_value=0, max_value=2 ** 31 - 1)))
def test_every_header_field_is_protobufs(txn, operation, priority):
    r = pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=operation, txnId=txn))
    if priority is not None:  # set, even to 0: serialized then
        r.header.priority = priority
    expected = pb.Response(status=0)
    expected.header.CopyFrom(r.header)
    assert enc.v3_header_field(r) + b"\x10\x00" == expected.SerializeToString()
