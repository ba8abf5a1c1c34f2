"""BookKeeper's v3 messages of the hot paths serialized by hand: the native server's add and read answers and
the native client's add requests (one each per entry: BookKeeper's protocol has no batched add). Byte for byte
what protobuf serializes (tests/unit/test_v3_hand_encoding.py holds them together), without building a
message per entry; ``varint`` also serves the gRPC range-read answers (bookie/proto/read_range.py).
"""
from __future__ import annotations

from bookie.proto import bookkeeper_protocol_pb2 as pb

_ADD_RESPONSE_TAG = b"\xaa\x06"  # field 101 (addResponse), length-delimited
_READ_RESPONSE_TAG = b"\xa2\x06"  # field 100 (readResponse), length-delimited


_ONE_BYTE = tuple(bytes((v,)) for v in range(0x80))


def varint(value: int) -> bytes:
    """A protobuf varint (a negative int64 as its 10-byte two's complement). Unrolled for the sizes of the
    hot path's ids and lengths: this runs several times per request."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    if 0 < value < 0x4000:
        return bytes(((value & 0x7F) | 0x80, value >> 7))
    if 0 < value < 0x200000:
        return bytes(((value & 0x7F) | 0x80, ((value >> 7) & 0x7F) | 0x80, value >> 14))
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_HEADER_STARTS: dict[tuple[int, int], bytes] = {}  # (version, operation) -> the header's bytes before its txnId


def v3_header_field(request: pb.Request) -> bytes:
    """A Response's field 1 (its header: the request's version, operation, txnId, priority), as the header
    serializes: version, operation, txnId, then priority where it is set (a Java client sets it only on
    high-priority requests)."""
    header = request.header
    if header.HasField("priority"):
        inner = header.SerializeToString()
        return b"\x0a" + varint(len(inner)) + inner
    key = (header.version, header.operation)
    start = _HEADER_STARTS.get(key)
    if start is None:
        start = _HEADER_STARTS[key] = b"\x08" + varint(key[0]) + b"\x10" + varint(key[1]) + b"\x18"
    txn = varint(header.txnId)
    return b"\x0a" + _ONE_BYTE[len(start) + len(txn)] + start + txn


def encode_v3_add_response(header_field: bytes, code: int, ledger_id: int, entry_id: int) -> bytes:
    """A serialized v3 Response to an ADD_ENTRY (as ``v3_response`` with its addResponse, serialized)."""
    code_field = varint(code)
    body = b"".join((b"\x08", code_field, b"\x10", varint(ledger_id), b"\x18", varint(entry_id)))
    return b"".join((header_field, b"\x10", code_field, _ADD_RESPONSE_TAG, _ONE_BYTE[len(body)], body))


def encode_v3_read_response(header_field: bytes, code: int, ledger_id: int, entry_id: int,
                            body: bytes | None = None, max_lac: int | None = None) -> bytes:
    """A serialized v3 Response to a READ_ENTRY: status, ledger and entry ids, the entry and the LAC if read."""
    code_field = varint(code)
    parts = [b"\x08", code_field, b"\x10", varint(ledger_id), b"\x18", varint(entry_id)]
    if body is not None:
        parts += (b"\x22", varint(len(body)), body)
    if max_lac is not None:
        parts += (b"\x28", varint(max_lac))
    inner = b"".join(parts)
    return b"".join((header_field, b"\x10", code_field, _READ_RESPONSE_TAG, varint(len(inner)), inner))


class V3AddRequestEncoder:
    """Serialized v3 ADD_ENTRY Requests of one ledger (the client's hot path): only the txnId, the entry id
    and the body change between them. The same bytes as the Request message serialized."""

    def __init__(self, ledger_id: int, master_key: bytes, priority: int = 0, recovery: bool = False):
        self._header_start = b"\x08" + varint(pb.VERSION_THREE) + b"\x10" + varint(pb.ADD_ENTRY) + b"\x18"
        self._priority = b"\x20" + varint(priority) if priority else b""
        self._ledger = b"\x08" + varint(ledger_id)
        self._key = b"\x1a" + varint(len(master_key)) + master_key
        self._flag = b"\xa0\x06" + varint(pb.AddRequest.RECOVERY_ADD) if recovery else b""

    def encode(self, txn: int, entry_id: int, body: bytes) -> bytes:
        header = self._header_start + varint(txn) + self._priority
        size = len(body)
        add_head = self._ledger + b"\x10" + varint(entry_id) + self._key + b"\x22" + varint(size)
        add_len = len(add_head) + size + len(self._flag)
        return b"".join((b"\x0a", varint(len(header)), header, b"\xaa\x06", varint(add_len), add_head, body,
                         self._flag))
