"""BookKeeper's v2 binary messages and the v3/v2 request detection (bookie/proto/bookie_proto_encoding.py).

The expected bytes are written out by hand from BookKeeper's layouts (BookieProtoEncoding,
DigestManager.computeDigestAndPackageForSendingV2), not produced by the code under test.
"""
from __future__ import annotations

import struct

import pytest

from bookie.exceptions import BadRequestException
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status

KEY = bytes(range(20))
ENTRY = struct.pack(">qqqq", 7, 3, 2, 100) + b"\x00\x00\x00\x01" + b"payload"  # ids, lac, length, crc32c, data


def test_the_packet_header_packs_version_op_and_flags():
    assert v2.pack_header(2, v2.ADDENTRY, v2.FLAG_RECOVERY_ADD | v2.FLAG_HIGH_PRIORITY) == 0x02010006
    assert v2.unpack_header(0x02070001) == (2, v2.BATCH_READ_ENTRY, v2.FLAG_DO_FENCING)
    assert v2.pack_header(0, v2.READENTRY, v2.FLAG_DO_FENCING) == 2  # version 0: the op code alone
    assert v2.unpack_header(2) == (0, v2.READENTRY, 0)
    assert v2.pack_header(0xFF, 1, 0xFFFF) < 0  # a Java int
    assert v2.unpack_header(v2.pack_header(0xFF, 1, 0xFFFF)) == (0xFF, 1, 0xFFFF)


def test_an_add_request_is_header_master_key_then_the_entry_as_stored():
    request = v2.ParsedAddRequest(2, v2.FLAG_RECOVERY_ADD, KEY, ENTRY)
    payload = v2.encode_request(request)
    assert payload == b"\x02\x01\x00\x02" + KEY + ENTRY
    decoded = v2.decode_request(payload)
    assert decoded == request
    assert (decoded.ledger_id, decoded.entry_id, decoded.recovery) == (7, 3, True)


def test_read_and_fencing_read_requests():
    assert v2.encode_request(v2.ReadRequest(2, 0, 7, -1)) == b"\x02\x02\x00\x00" + struct.pack(">qq", 7, -1)
    fence = v2.ReadRequest(2, v2.FLAG_DO_FENCING, 7, 0, KEY)
    payload = v2.encode_request(fence)
    assert payload == b"\x02\x02\x00\x01" + struct.pack(">qq", 7, 0) + KEY
    assert v2.decode_request(payload) == fence and fence.fencing
    # a version-1 fencing read carries no key (BookieProtoEncoding reads one from version 2 on)
    assert v2.decode_request(b"\x01\x02\x00\x01" + struct.pack(">qq", 7, 0)).master_key is None


def test_batch_read_request_carries_request_id_count_and_size():
    request = v2.BatchedReadRequest(2, 0, 7, 10, 99, 50, 1 << 20)
    payload = v2.encode_request(request)
    assert payload == b"\x02\x07\x00\x00" + struct.pack(">qqqiq", 7, 10, 99, 50, 1 << 20)
    assert v2.decode_request(payload) == request
    fenced = v2.BatchedReadRequest(2, v2.FLAG_DO_FENCING, 7, 10, 99, 0, 100, KEY)
    assert v2.decode_request(v2.encode_request(fenced)) == fenced


def test_responses_are_rc_ledger_entry_then_data():
    add = v2.AddResponse(2, v2.EFENCED, 7, 3)
    assert v2.encode_response(add) == struct.pack(">iiqq", 0x02010000, 104, 7, 3)
    assert v2.encode_add_response(2, v2.EFENCED, 7, 3) == v2.encode_response(add)
    read = v2.ReadResponse(2, v2.EOK, 7, 3, ENTRY)
    assert v2.encode_response(read) == struct.pack(">iiqq", 0x02020000, 0, 7, 3) + ENTRY
    batch = v2.BatchedReadResponse(2, v2.EOK, 7, 3, 99, (b"ab", b"cde"))
    payload = v2.encode_response(batch)
    assert payload == struct.pack(">iiqqq", 0x02070000, 0, 7, 3, 99) + b"\0\0\0\x02ab\0\0\0\x03cde"
    assert v2.batched_read_frame_size(5, 2) == 4 + len(payload)
    for response in (add, read, batch, v2.ReadResponse(2, v2.ENOENTRY, 7, 4), v2.AuthResponse(2, b"\x0a\x00")):
        assert v2.decode_response(v2.encode_response(response)) == response


def test_v2_return_codes_map_to_and_from_v3_statuses():
    assert v2.to_v2_status(status.ENOENTRY) == v2.ENOENTRY == 2
    assert v2.to_v2_status(status.EFENCED) == 104 and v2.to_v2_status(status.ETOOMANYREQUESTS) == 106
    assert all(v2.to_v3_status(v2.to_v2_status(code)) == code for code in status.NAMES)
    assert v2.to_v2_status(999) == v2.EIO and v2.to_v3_status(55) == status.EIO


@pytest.mark.parametrize("payload, match", [
    (b"\x02\x01", "shorter than its 4-byte header"),
    (b"\x02\x01\x00\x00" + KEY + b"short", "ADDENTRY request of 29 bytes is truncated"),
    (b"\x02\x02\x00\x00" + bytes(15), "READENTRY request of 19 bytes is truncated"),
    (b"\x02\x02\x00\x01" + bytes(16) + KEY[:19], "and a master key"),
    (b"\x02\x07\x00\x00" + bytes(35), "BATCH_READ_ENTRY request of 39 bytes"),
    (b"\x02\x04\x00\x00" + bytes(16), "unknown op code 4"),  # READ_LAC: an op code with no v2 message
    (b"\x02\x63\x00\x00", "unknown op code 99"),
    (b"\x02\x03\x00\x00garbage", "not an AuthMessage"),
])
def test_malformed_v2_requests_are_refused_with_a_reason(payload, match):
    with pytest.raises(BadRequestException, match=match):
        v2.decode_request(payload)


def test_v3_requests_are_told_from_v2_as_java_parses_them():
    header = pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=5)
    request = pb.Request(header=header, readRequest=pb.ReadRequest(ledgerId=7, entryId=1))
    assert v2.parse_v3_request(request.SerializeToString()) == request
    assert v2.parse_v3_request(v2.encode_request(v2.ReadRequest(2, 0, 7, 1))) is None  # field number 0
    assert v2.parse_v3_request(b"") is None  # required header missing
    unknown_op = pb.BKPacketHeader(version=pb.VERSION_THREE, operation=pb.READ_ENTRY, txnId=5).SerializeToString()
    unknown_op = unknown_op.replace(b"\x10\x01", b"\x10\x63")  # operation 99: an unknown enum is no value
    assert v2.parse_v3_request(b"\x0a" + bytes([len(unknown_op)]) + unknown_op) is None
    response = v2.v3_response(request, status.EBADREQ)
    assert (response.header, response.status) == (header, status.EBADREQ)
