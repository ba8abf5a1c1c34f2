"""AddRequest decoded by hand on the bookie's add stream, its entries left in the received bytes.

Through protobuf a batch is copied twice before the engine sees it: into the parsed message, then
out of it as a fresh ``bytes`` on each access of ``entries``. Here ``entries`` is a read-only
``memoryview`` into the bytes gRPC handed over (immutable, so the entry log and the journal may keep
it until they have written it): no copy at all. Everything else is what
``bookkeeper_pb2.AddRequest.FromString`` gives for the same bytes (proto3: last value wins, unknown
fields skipped, an out-of-range enum kept as its number); a unit test holds the two decoders together.
Bytes protobuf refuses raise ``DecodeError`` here too.
"""
from __future__ import annotations

from dataclasses import dataclass

from google.protobuf.message import DecodeError

from bookie.proto import bookkeeper_pb2 as pb

# Field numbers of AddRequest in bookkeeper.proto.
_TXN_ID, _SCOPE, _LEDGER, _MASTER_KEY, _FLAG, _WRITE_FLAGS, _ENTRIES = 1, 2, 3, 4, 5, 6, 7
_VARINT, _I64, _LEN, _START_GROUP, _END_GROUP, _I32 = 0, 1, 2, 3, 4, 5
_U64 = (1 << 64) - 1
_MAX_GROUP_DEPTH = 100  # protobuf's recursion limit


@dataclass(slots=True)
class AddRequestView:
    """The fields of an AddRequest the service reads, under protobuf's names."""

    txnId: int = 0
    ledgerScopeId: int = 0
    ledgerId: int = 0
    masterKey: bytes = b""
    flag: int = pb.AddRequest.NONE
    writeFlags: int = 0
    entries: memoryview = memoryview(b"")


def _varint(data: bytes, pos: int, end: int) -> tuple[int, int]:
    """(value, next position) of the varint at ``pos``; at most 10 bytes, as protobuf reads them."""
    value = shift = 0
    while True:
        if pos >= end or shift > 63:
            raise DecodeError("truncated or overlong varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value & _U64, pos
        shift += 7


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _key(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(field number, wire type, next position) of the field key at ``pos``."""
    key, pos = _varint(data, pos, end)
    if key >> 3 == 0 or key > 0xFFFFFFFF:
        raise DecodeError(f"bad field key {key}")
    return key >> 3, key & 7, pos


def _skip(data: bytes, pos: int, end: int, number: int, wire: int, depth: int = 0) -> int:
    """The position after the value of a field AddRequest does not hold (or holds with another wire type)."""
    if wire == _VARINT:
        return _varint(data, pos, end)[1]
    if wire == _LEN:
        size, pos = _varint(data, pos, end)
        pos += size
    elif wire in (_I64, _I32):
        pos += 8 if wire == _I64 else 4
    elif wire == _START_GROUP and depth < _MAX_GROUP_DEPTH:
        while True:
            inner, inner_wire, pos = _key(data, pos, end)
            if inner_wire == _END_GROUP:
                if inner != number:
                    raise DecodeError(f"group {number} ended by field {inner}")
                return pos
            pos = _skip(data, pos, end, inner, inner_wire, depth + 1)
    else:  # an end of group outside one, wire types 6 and 7, nesting too deep
        raise DecodeError(f"field {number} has wire type {wire}")
    if pos > end:
        raise DecodeError(f"field {number} runs past the message's end")
    return pos


def decode_add_request(data: bytes) -> AddRequestView:
    """Decode a serialized AddRequest; ``DecodeError`` for bytes that are not one."""
    request = AddRequestView()
    view = memoryview(data)
    pos, end = 0, len(data)
    while pos < end:
        number, wire, pos = _key(data, pos, end)
        if wire == _VARINT:
            value, pos = _varint(data, pos, end)
            if number == _TXN_ID:
                request.txnId = value
            elif number == _SCOPE:
                request.ledgerScopeId = _signed(value, 64)
            elif number == _LEDGER:
                request.ledgerId = _signed(value, 64)
            elif number == _FLAG:
                request.flag = _signed(value, 32)
            elif number == _WRITE_FLAGS:
                request.writeFlags = _signed(value, 32)
        elif wire == _LEN and number in (_MASTER_KEY, _ENTRIES):
            size, pos = _varint(data, pos, end)
            if size > end - pos:
                raise DecodeError(f"field {number} of {size} bytes runs past the message's end")
            if number == _ENTRIES:
                request.entries = view[pos: pos + size]
            else:
                request.masterKey = bytes(view[pos: pos + size])
            pos += size
        else:
            pos = _skip(data, pos, end, number, wire)
    return request
