"""Decoding and encoding of BookKeeper's native messages (BookieProtoEncoding, BookieProtocol).

A frame's payload (bookie/proto/native_frames.py) is either a v3 protobuf ``Request``/``Response``
(bookie/proto/bookkeeper_protocol.proto) or a v2 binary message. v2 messages start with a 4-byte
header ``version << 24 | opCode << 16 | flags`` (version 0, the oldest, is the op code alone), then,
big-endian:

- ADDENTRY request: masterKey (20 bytes) | the entry as stored (ledgerId, entryId are its first 16 bytes)
- READENTRY request: ledgerId:i64 | entryId:i64 [| masterKey (20) with FLAG_DO_FENCING]
- BATCH_READ_ENTRY request (4.17): ledgerId:i64 | entryId:i64 | requestId:i64 | maxCount:i32 |
  maxSize:i64 [| masterKey (20) with FLAG_DO_FENCING]
- AUTH request/response: a serialized AuthMessage
- ADDENTRY/READENTRY response: rc:i32 | ledgerId:i64 | entryId:i64 [| the entry (reads, rc EOK)]
- BATCH_READ_ENTRY response: rc:i32 | ledgerId:i64 | entryId:i64 | requestId:i64 | (size:i32 | entry)*

READ_LAC, WRITE_LAC and GET_BOOKIE_INFO have op codes but no v2 message: BookKeeper's decoder refuses
them like any unknown op, and its v2 client sends those requests as v3 (or not at all).
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from bookie.exceptions import BadRequestException
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status

# BookieProtocol constants.
LOWEST_COMPAT_PROTOCOL_VERSION = 0
CURRENT_PROTOCOL_VERSION = 2
MASTER_KEY_LENGTH = 20
INVALID_ENTRY_ID = -1

ADDENTRY = 1
READENTRY = 2
AUTH = 3
READ_LAC = 4
WRITE_LAC = 5
GET_BOOKIE_INFO = 6
BATCH_READ_ENTRY = 7

FLAG_NONE = 0x0
FLAG_DO_FENCING = 0x1
FLAG_RECOVERY_ADD = 0x2
FLAG_HIGH_PRIORITY = 0x4

# v2 return codes.
EOK = 0
ENOLEDGER = 1
ENOENTRY = 2
EBADREQ = 100
EIO = 101
EUA = 102
EBADVERSION = 103
EFENCED = 104
EREADONLY = 105
ETOOMANYREQUESTS = 106
EUNKNOWNLEDGERSTATE = 107

V2_FROM_V3 = {status.EOK: EOK, status.ENOLEDGER: ENOLEDGER, status.ENOENTRY: ENOENTRY, status.EBADREQ: EBADREQ,
              status.EIO: EIO, status.EUA: EUA, status.EBADVERSION: EBADVERSION, status.EFENCED: EFENCED,
              status.EREADONLY: EREADONLY, status.ETOOMANYREQUESTS: ETOOMANYREQUESTS,
              status.EUNKNOWNLEDGERSTATE: EUNKNOWNLEDGERSTATE}
V3_FROM_V2 = {v2: v3 for v3, v2 in V2_FROM_V3.items()}

# The plugin name and empty payload a bookie without authentication answers AUTH with
# (AuthProviderFactoryFactory.AUTHENTICATION_DISABLED_PLUGIN_NAME, AuthToken.NULL).
AUTHENTICATION_DISABLED_PLUGIN_NAME = "AuthDisabledPlugin"

HEADER = struct.Struct(">i")
_IDS = struct.Struct(">qq")
_BATCH_READ = struct.Struct(">qqqiq")
_RESPONSE = struct.Struct(">iiqq")  # header, rc, ledgerId, entryId
RESPONSE_HEADERS_SIZE = _RESPONSE.size  # 24, as ResponseEnDeCoderPreV3
_REQUEST_ID = struct.Struct(">q")


def to_v2_status(code: int) -> int:
    """The v2 return code of a v3 status (EIO for a status v2 has no code for)."""
    return V2_FROM_V3.get(code, EIO)


def to_v3_status(rc: int) -> int:
    """The v3 status of a v2 return code (EIO for a code v2 does not define)."""
    return V3_FROM_V2.get(rc, status.EIO)


# -- the packet header (BookieProtocol.PacketHeader) ---------------------------------------------------
def pack_header(version: int, op_code: int, flags: int = FLAG_NONE) -> int:
    if version == 0:
        return op_code
    return _signed32(((version & 0xFF) << 24) | ((op_code & 0xFF) << 16) | (flags & 0xFFFF))


def unpack_header(header: int) -> tuple[int, int, int]:
    """(version, opCode, flags) of a header int; version 0 headers carry the op code alone."""
    version = (header >> 24) & 0xFF
    if version == 0:
        return 0, header & 0xFF, FLAG_NONE
    return version, (header >> 16) & 0xFF, header & 0xFFFF


def _signed32(value: int) -> int:
    return value - (1 << 32) if value & 0x80000000 else value


# -- v2 requests ------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ParsedAddRequest:
    version: int
    flags: int
    master_key: bytes
    body: bytes  # the entry as stored

    op_code = ADDENTRY

    @property
    def ledger_id(self) -> int:
        return _IDS.unpack_from(self.body, 0)[0]

    @property
    def entry_id(self) -> int:
        return _IDS.unpack_from(self.body, 0)[1]

    @property
    def recovery(self) -> bool:
        return bool(self.flags & FLAG_RECOVERY_ADD)


@dataclass(frozen=True, slots=True)
class ReadRequest:
    version: int
    flags: int
    ledger_id: int
    entry_id: int
    master_key: bytes | None = None  # present with FLAG_DO_FENCING

    op_code = READENTRY

    @property
    def fencing(self) -> bool:
        return bool(self.flags & FLAG_DO_FENCING)


@dataclass(frozen=True, slots=True)
class BatchedReadRequest:
    version: int
    flags: int
    ledger_id: int
    entry_id: int
    request_id: int
    max_count: int  # <= 0: no limit
    max_size: int  # bytes of the whole response frame
    master_key: bytes | None = None

    op_code = BATCH_READ_ENTRY

    @property
    def fencing(self) -> bool:
        return bool(self.flags & FLAG_DO_FENCING)


@dataclass(frozen=True, slots=True)
class AuthRequest:
    version: int
    auth_message: bytes  # a serialized AuthMessage

    op_code = AUTH
    flags = FLAG_NONE


V2Request = ParsedAddRequest | ReadRequest | BatchedReadRequest | AuthRequest


def decode_request(payload: bytes) -> V2Request:
    """A v2 request (RequestEnDeCoderPreV3.decode); BadRequestException for an unknown op or short payload."""
    if len(payload) < HEADER.size:
        raise BadRequestException(f"v2 request of {len(payload)} bytes: shorter than its 4-byte header")
    version, op, flags = unpack_header(HEADER.unpack_from(payload, 0)[0])
    pos = HEADER.size
    if op == ADDENTRY:
        _need(payload, pos + MASTER_KEY_LENGTH + _IDS.size, "ADDENTRY", "a 20-byte master key and an entry")
        return ParsedAddRequest(version, flags, payload[pos: pos + MASTER_KEY_LENGTH], payload[pos + MASTER_KEY_LENGTH:])
    if op == READENTRY:
        key = _fencing_key(payload, pos + _IDS.size, version, flags, "READENTRY")
        return ReadRequest(version, flags, *_IDS.unpack_from(payload, pos), key)
    if op == BATCH_READ_ENTRY:
        key = _fencing_key(payload, pos + _BATCH_READ.size, version, flags, "BATCH_READ_ENTRY")
        return BatchedReadRequest(version, flags, *_BATCH_READ.unpack_from(payload, pos), key)
    if op == AUTH:
        _check_auth_message(payload[pos:])
        return AuthRequest(version, payload[pos:])
    raise BadRequestException(f"v2 request with unknown op code {op} (ADDENTRY={ADDENTRY}, READENTRY={READENTRY}, "
                              f"AUTH={AUTH} and BATCH_READ_ENTRY={BATCH_READ_ENTRY} have v2 messages)")


def _check_auth_message(data: bytes) -> None:
    try:
        complete = pb.AuthMessage.FromString(data).IsInitialized()
    except DecodeError:
        complete = False
    if not complete:
        raise BadRequestException(f"v2 AUTH request whose {len(data)} bytes are not an AuthMessage")


def _need(payload: bytes, size: int, op: str, what: str) -> None:
    if len(payload) < size:
        raise BadRequestException(f"v2 {op} request of {len(payload)} bytes is truncated: it needs {size} ({what})")


def _fencing_key(payload: bytes, pos: int, version: int, flags: int, op: str) -> bytes | None:
    fencing = flags & FLAG_DO_FENCING and version >= 2  # older versions carried no key
    _need(payload, pos + (MASTER_KEY_LENGTH if fencing else 0), op, "the ids" + (" and a master key" if fencing else ""))
    return payload[pos: pos + MASTER_KEY_LENGTH] if fencing else None


def encode_request(request: V2Request) -> bytes:
    """The payload of a v2 request (what BookKeeper's v2 client sends, without the frame length)."""
    header = HEADER.pack(pack_header(request.version, request.op_code, request.flags))
    if isinstance(request, ParsedAddRequest):
        return header + _master_key(request.master_key) + request.body
    if isinstance(request, AuthRequest):
        return header + request.auth_message
    if isinstance(request, BatchedReadRequest):
        ids = _BATCH_READ.pack(request.ledger_id, request.entry_id, request.request_id, request.max_count,
                               request.max_size)
    else:
        ids = _IDS.pack(request.ledger_id, request.entry_id)
    key = _master_key(request.master_key) if request.master_key is not None else b""
    return header + ids + key


def _master_key(key: bytes) -> bytes:
    if len(key) != MASTER_KEY_LENGTH:
        raise ValueError(f"a v2 master key is {MASTER_KEY_LENGTH} bytes, got {len(key)}")
    return key


# -- v2 responses -----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AddResponse:
    version: int
    rc: int
    ledger_id: int
    entry_id: int

    op_code = ADDENTRY


@dataclass(frozen=True, slots=True)
class ReadResponse:
    version: int
    rc: int
    ledger_id: int
    entry_id: int
    data: bytes = b""  # the entry as stored, when rc is EOK

    op_code = READENTRY


@dataclass(frozen=True, slots=True)
class BatchedReadResponse:
    version: int
    rc: int
    ledger_id: int
    entry_id: int
    request_id: int
    entries: tuple[bytes, ...] = ()

    op_code = BATCH_READ_ENTRY


@dataclass(frozen=True, slots=True)
class AuthResponse:
    version: int
    auth_message: bytes

    op_code = AUTH


V2Response = AddResponse | ReadResponse | BatchedReadResponse | AuthResponse


def encode_add_response(version: int, rc: int, ledger_id: int, entry_id: int) -> bytes:
    """The hot path's response, without building an object (serializeAddResponseInto)."""
    return _RESPONSE.pack(pack_header(version, ADDENTRY), rc, ledger_id, entry_id)


def add_request_head(master_key: bytes, recovery: bool = False) -> bytes:
    """What every v2 ADDENTRY request of one ledger starts with (its header and master key): the request is
    this, then the entry (the client's hot path; ``encode_request`` of a ParsedAddRequest gives the same
    bytes). A recovery add is also of high priority, as BookKeeper's PendingAddOp sends it."""
    flags = FLAG_RECOVERY_ADD | FLAG_HIGH_PRIORITY if recovery else FLAG_NONE
    return HEADER.pack(pack_header(CURRENT_PROTOCOL_VERSION, ADDENTRY, flags)) + _master_key(master_key)


def decode_add_response(payload: bytes) -> tuple[int, int, int]:
    """(rc, ledger id, entry id) of a v2 ADDENTRY answer (the client's hot path); BadRequestException for
    anything else."""
    if len(payload) != RESPONSE_HEADERS_SIZE:
        raise BadRequestException(f"a v2 ADDENTRY answer is {RESPONSE_HEADERS_SIZE} bytes, got {len(payload)}")
    header, rc, ledger_id, entry_id = _RESPONSE.unpack(payload)
    if unpack_header(header)[1] != ADDENTRY:
        raise BadRequestException(f"not a v2 ADDENTRY answer (header {header:#x})")
    return rc, ledger_id, entry_id


def encode_response(response: V2Response) -> bytes:
    """The payload of a v2 response (ResponseEnDeCoderPreV3.encode)."""
    if isinstance(response, AuthResponse):
        return HEADER.pack(pack_header(response.version, AUTH)) + response.auth_message
    head = _RESPONSE.pack(pack_header(response.version, response.op_code), response.rc, response.ledger_id,
                          response.entry_id)
    if isinstance(response, AddResponse):
        return head
    if isinstance(response, ReadResponse):
        return head + response.data
    parts = [head, _REQUEST_ID.pack(response.request_id)]
    for entry in response.entries:
        parts += (HEADER.pack(len(entry)), entry)
    return b"".join(parts)


def encode_batched_read_response(version: int, rc: int, ledger_id: int, entry_id: int, request_id: int,
                                 framed: bytes) -> bytes:
    """A BATCH_READ_ENTRY answer from its entries already framed ``(size:i32 | entry)*``, as the bookie's
    storage keeps them: ``encode_response`` without taking the entries apart."""
    return b"".join((_RESPONSE.pack(pack_header(version, BATCH_READ_ENTRY), rc, ledger_id, entry_id),
                     _REQUEST_ID.pack(request_id), framed))


def batched_read_frame_size(entry_sizes_total: int, count: int) -> int:
    """Bytes of a BATCH_READ_ENTRY response frame (its 4-byte length included, as BookKeeper counts
    against maxSize) holding ``count`` entries of that total size."""
    return HEADER.size + RESPONSE_HEADERS_SIZE + _REQUEST_ID.size + entry_sizes_total + count * HEADER.size


def decode_response(payload: bytes) -> V2Response:
    """A v2 response (ResponseEnDeCoderPreV3.decode); BadRequestException for an unknown op or short payload."""
    if len(payload) < HEADER.size:
        raise BadRequestException(f"v2 response of {len(payload)} bytes: shorter than its 4-byte header")
    version, op, _ = unpack_header(HEADER.unpack_from(payload, 0)[0])
    if op == AUTH:
        return AuthResponse(version, payload[HEADER.size:])
    if op not in (ADDENTRY, READENTRY, BATCH_READ_ENTRY):
        raise BadRequestException(f"v2 response with unknown op code {op}")
    if len(payload) < RESPONSE_HEADERS_SIZE:
        raise BadRequestException(f"v2 response of {len(payload)} bytes is truncated: it needs {RESPONSE_HEADERS_SIZE}")
    _, rc, ledger_id, entry_id = _RESPONSE.unpack_from(payload, 0)
    if op == ADDENTRY:
        return AddResponse(version, rc, ledger_id, entry_id)
    if op == READENTRY:
        return ReadResponse(version, rc, ledger_id, entry_id, payload[RESPONSE_HEADERS_SIZE:])
    pos = RESPONSE_HEADERS_SIZE + _REQUEST_ID.size
    if len(payload) < pos:
        raise BadRequestException(f"v2 BATCH_READ_ENTRY response of {len(payload)} bytes has no request id")
    (request_id,) = _REQUEST_ID.unpack_from(payload, RESPONSE_HEADERS_SIZE)
    entries = []
    while pos < len(payload):
        if pos + HEADER.size > len(payload):
            raise BadRequestException("v2 BATCH_READ_ENTRY response truncated in an entry's size")
        (size,) = HEADER.unpack_from(payload, pos)
        pos += HEADER.size
        if size < 0 or pos + size > len(payload):
            raise BadRequestException(f"v2 BATCH_READ_ENTRY response truncated: entry of {size} bytes at {pos}")
        entries.append(payload[pos: pos + size])
        pos += size
    return BatchedReadResponse(version, rc, ledger_id, entry_id, request_id, tuple(entries))


# -- v3 ---------------------------------------------------------------------------------------------
def parse_v3_request(payload: bytes) -> pb.Request | None:
    """The v3 Request in ``payload``, or None if it is not one (RequestDecoder then tries v2). Like
    Java's parser, a message missing a required field (an unknown operation among them) is not one."""
    try:
        request = pb.Request.FromString(payload)
    except DecodeError:
        return None
    return request if request.IsInitialized() else None


def v3_response(request: pb.Request, code: int) -> pb.Response:
    """A Response to ``request`` with its header (version, operation, txnId) and a status."""
    response = pb.Response(status=code)
    response.header.CopyFrom(request.header)
    return response


def auth_disabled_message() -> pb.AuthMessage:
    """What a bookie without authentication answers an AUTH request with (BookieRequestProcessor)."""
    return pb.AuthMessage(authPluginName=AUTHENTICATION_DISABLED_PLUGIN_NAME, payload=b"")
