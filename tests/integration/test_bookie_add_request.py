"""The add stream's hand decoder (bookie/server/add_request.py) reads every AddRequest as protobuf
does, keeps the entries in the received bytes without a copy, and refuses what protobuf refuses.
(No process is started: this module is plain decoding.)"""
from __future__ import annotations

import random

import pytest
from google.protobuf.message import DecodeError

from bookie.proto import bookkeeper_pb2 as pb
from bookie.server.add_request import decode_add_request

FIELDS = ("txnId", "ledgerScopeId", "ledgerId", "masterKey", "flag", "writeFlags", "entries")


def _protobufs(data: bytes):
    """(fields as protobuf reads them) or DecodeError's type."""
    try:
        message = pb.AddRequest.FromString(data)
    except DecodeError:
        return DecodeError
    return tuple(getattr(message, name) for name in FIELDS)


def _ours(data: bytes):
    try:
        request = decode_add_request(data)
    except DecodeError:
        return DecodeError
    return tuple(bytes(v) if isinstance(v, memoryview) else v for v in (getattr(request, n) for n in FIELDS))


@pytest.mark.parametrize("fields", [
    {},
    {"txnId": 2 ** 64 - 1, "ledgerScopeId": 2 ** 63 - 1, "ledgerId": 2 ** 63 - 1, "masterKey": b"k" * 20,
     "flag": pb.AddRequest.RECOVERY_ADD, "writeFlags": 1, "entries": bytes(range(256)) * 1100},
    {"ledgerScopeId": -1, "ledgerId": -(2 ** 63), "writeFlags": -(2 ** 31), "flag": 7, "entries": b"e"},
    {"txnId": 300, "ledgerId": 128, "masterKey": b"", "entries": b""},
])
def test_each_field_reads_as_protobuf_reads_it(fields):
    data = pb.AddRequest(**fields).SerializeToString()
    assert _ours(data) == _protobufs(data)


def test_entries_are_a_view_into_the_received_bytes():
    data = pb.AddRequest(txnId=1, ledgerId=5, entries=b"x" * 5000).SerializeToString()
    entries = decode_add_request(data).entries
    assert isinstance(entries, memoryview) and entries.obj is data and bytes(entries) == b"x" * 5000


def test_repeated_unknown_and_mistyped_fields_as_protobuf():
    message = pb.AddRequest(txnId=1, ledgerId=2, masterKey=b"a", entries=b"first").SerializeToString()
    later = pb.AddRequest(ledgerId=9, masterKey=b"b", entries=b"second").SerializeToString()
    unknown = (b"\x48\x05"  # field 9, varint
               b"\x52\x03abc"  # field 10, bytes
               b"\x59" + bytes(8) +  # field 11, fixed64
               b"\x65" + bytes(4) +  # field 12, fixed32
               b"\x6b\x08\x01\x6c"  # field 13, a group holding a varint
               b"\x0a\x01z"  # txnId sent as bytes: an unknown field to protobuf
               b"\x38\x01")  # entries sent as a varint: likewise
    for data in (message + later, message + unknown, unknown + message, later + unknown + message):
        assert _ours(data) == _protobufs(data) != DecodeError


@pytest.mark.parametrize("data", [
    b"\xff\xff\xff\xff",  # a key cut short
    b"\x08",  # a value missing
    b"\x08" + b"\xff" * 10 + b"\x01",  # a varint of 11 bytes
    b"\x3a\x05abc",  # entries longer than the message
    b"\x59\x00\x00",  # a fixed64 cut short
    b"\x00\x01",  # field number 0
    b"\x0c",  # an end of group outside any group
    b"\x6b\x08\x01",  # a group never ended
    b"\x6b\x74",  # a group ended by another field's end
    b"\x0e\x00",  # wire type 6
])
def test_refuses_what_protobuf_refuses(data):
    assert _protobufs(data) is DecodeError
    assert _ours(data) is DecodeError


def test_random_bytes_and_mutated_messages_agree_with_protobuf():
    rng = random.Random(15)
    base = pb.AddRequest(txnId=77, ledgerScopeId=3, ledgerId=99, masterKey=b"key", flag=1,
                         entries=bytes(range(40))).SerializeToString()
    refused = 0
    for _ in range(20000):
        if rng.random() < 0.5:
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 24)))
        else:
            data = bytearray(base)
            for _ in range(rng.randrange(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            data = bytes(data[:rng.randrange(1, len(data) + 1)])
        expected = _protobufs(data)
        assert _ours(data) == expected, data
        refused += expected is DecodeError
    assert 1000 < refused < 19000  # both outcomes were exercised
