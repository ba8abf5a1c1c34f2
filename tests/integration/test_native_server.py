"""The native protocol server (bookie/server/native_server.py) driven with raw frames, v3 and v2.

A storage engine runs in this process with the server on a free 127.0.0.1 port (its event loop in a
thread); the tests speak to it over real TCP connections, byte for byte as BookKeeper's clients do.
"""
from __future__ import annotations

import logging
import socket

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto import availability
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import status
from bookie.proto.checksum import DigestManager, generate_master_key
from bookie.proto.native_frames import FrameDecoder, encode_frames
from bookie.server import native_server
from tests.helpers.native_bookie import KEY, MAX_FRAME
from tests.helpers.waiting import DEADLINE, wait_for



class RawConnection:
    """A client socket that sends and receives frames, nothing more."""

    def __init__(self, port: int):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=DEADLINE)
        self.decoder = FrameDecoder(MAX_FRAME * 2)
        self.frames: list[bytes] = []
        self._txn = 0

    def send(self, *payloads: bytes) -> None:
        self.sock.sendall(encode_frames(list(payloads)))

    def receive(self) -> bytes:
        while not self.frames:
            data = self.sock.recv(1 << 20)
            assert data, "the bookie closed the connection"
            self.frames += self.decoder.feed(data)
        return self.frames.pop(0)

    def is_closed_by_peer(self) -> bool:
        """True once the bookie closes the connection (reads until EOF)."""
        try:
            while self.sock.recv(1 << 16):
                pass
        except ConnectionResetError:
            pass
        return True

    # -- v3 -----------------------------------------------------------------------------------------
    def request(self, operation: int, field: str | None = None, **fields) -> pb.Request:
        self._txn += 1
        request = pb.Request(header=pb.BKPacketHeader(version=pb.VERSION_THREE, operation=operation, txnId=self._txn))
        if field is not None:
            sub = getattr(request, field)
            sub.CopyFrom(type(sub)(**fields))
        return request

    def call(self, request: pb.Request) -> pb.Response:
        self.send(request.SerializeToString())
        response = pb.Response.FromString(self.receive())
        assert response.header.txnId == request.header.txnId
        return response

    def add(self, ledger_id: int, entry_id: int, lac: int = -1, payload: bytes = b"x", key: bytes = KEY,
            recovery: bool = False) -> pb.Response:
        body = entry(ledger_id, entry_id, lac, payload)
        flag = {"flag": pb.AddRequest.RECOVERY_ADD} if recovery else {}
        return self.call(self.request(pb.ADD_ENTRY, "addRequest", ledgerId=ledger_id, entryId=entry_id,
                                      masterKey=key, body=body, **flag))

    def read(self, ledger_id: int, entry_id: int, **fields) -> pb.Response:
        return self.call(self.request(pb.READ_ENTRY, "readRequest", ledgerId=ledger_id, entryId=entry_id, **fields))

    # -- v2 -----------------------------------------------------------------------------------------
    def call_v2(self, request: v2.V2Request) -> v2.V2Response:
        self.send(v2.encode_request(request))
        return v2.decode_response(self.receive())


def entry(ledger_id: int, entry_id: int, lac: int = -1, payload: bytes = b"x") -> bytes:
    return DigestManager(LedgerId(0, ledger_id), b"pw").build_entry(entry_id, lac, entry_id + 1, payload)


@pytest.fixture
def connect(native_bookie):
    connections: list[RawConnection] = []

    def make() -> RawConnection:
        connections.append(RawConnection(native_bookie[1].port))
        return connections[-1]
    yield make
    for c in connections:
        c.sock.close()


def test_v3_add_and_read_with_many_requests_in_flight(connect):
    c = connect()
    adds = [c.request(pb.ADD_ENTRY, "addRequest", ledgerId=5, entryId=i, masterKey=KEY, body=entry(5, i, i - 1))
            for i in range(50)]
    c.send(*(a.SerializeToString() for a in adds))  # one write: all in flight together
    answers = {r.header.txnId: r for r in (pb.Response.FromString(c.receive()) for _ in adds)}
    assert sorted(answers) == [a.header.txnId for a in adds]
    for a in adds:
        r = answers[a.header.txnId]
        assert (r.status, r.addResponse.status, r.addResponse.ledgerId, r.addResponse.entryId) == \
            (status.EOK, status.EOK, 5, a.addRequest.entryId)
        assert r.header.operation == pb.ADD_ENTRY
    read = c.read(5, 7)
    assert (read.status, read.readResponse.body, read.readResponse.maxLAC) == (status.EOK, entry(5, 7, 6), 48)
    last = c.read(5, -1)
    assert (last.readResponse.entryId, last.readResponse.body) == (49, entry(5, 49, 48))
    assert c.read(5, 50).readResponse.status == status.ENOENTRY
    assert c.read(6, 0).status == status.ENOLEDGER
    assert c.add(5, 50, key=generate_master_key(b"other")).addResponse.status == status.EUA


def test_v3_fence_read_then_normal_adds_are_fenced_and_recovery_adds_are_taken(connect):
    writer, recoverer = connect(), connect()
    assert writer.add(9, 0).status == status.EOK
    assert recoverer.read(9, -1, flag=pb.ReadRequest.FENCE_LEDGER).status == status.EBADREQ  # no master key
    fenced = recoverer.read(9, -1, flag=pb.ReadRequest.FENCE_LEDGER, masterKey=KEY)
    assert (fenced.status, fenced.readResponse.entryId) == (status.EOK, 0)
    assert writer.add(9, 1).addResponse.status == status.EFENCED
    assert recoverer.add(9, 1, recovery=True).status == status.EOK
    # a fence of a ledger this bookie never saw creates it, fenced: its read is "no such entry"
    assert recoverer.read(10, -1, flag=pb.ReadRequest.FENCE_LEDGER, masterKey=KEY).status == status.ENOENTRY
    assert writer.add(10, 0).status == status.EFENCED


def test_v3_long_poll_answers_when_the_lac_passes_with_the_next_entry_piggybacked(connect):
    poller, writer = connect(), connect()
    for i in range(2):
        assert writer.add(3, i, lac=i - 1).status == status.EOK  # LAC known here: 0
    poll = poller.request(pb.READ_ENTRY, "readRequest", ledgerId=3, entryId=-1, previousLAC=0, timeOut=60000,
                          flag=pb.ReadRequest.ENTRY_PIGGYBACK)
    poller.send(poll.SerializeToString())
    assert writer.add(3, 2, lac=1).status == status.EOK  # the LAC moves to 1
    answer = pb.Response.FromString(poller.receive())
    assert answer.header.txnId == poll.header.txnId and answer.status == status.EOK
    assert (answer.readResponse.maxLAC, answer.readResponse.entryId, answer.readResponse.body) == (1, 1, entry(3, 1, 0))
    assert answer.readResponse.lacUpdateTimestamp > 0
    expired = poller.read(3, -1, previousLAC=5, timeOut=0, flag=pb.ReadRequest.ENTRY_PIGGYBACK)
    assert (expired.status, expired.readResponse.maxLAC, expired.readResponse.HasField("body")) == (status.EOK, 1, False)
    assert poller.read(3, 4, previousLAC=0, flag=pb.ReadRequest.ENTRY_PIGGYBACK).status == status.EBADREQ


def test_v3_lac_force_bookie_info_and_list_of_entries(connect):
    c = connect()
    assert c.call(c.request(pb.READ_LAC, "readLacRequest", ledgerId=4)).status == status.ENOLEDGER
    for i in (0, 1, 2, 5):
        assert c.add(4, i, lac=-1).status == status.EOK
    lac_blob = DigestManager(LedgerId(0, 4), b"pw").build_lac(2)
    written = c.call(c.request(pb.WRITE_LAC, "writeLacRequest", ledgerId=4, lac=2, masterKey=KEY, body=lac_blob))
    assert (written.status, written.writeLacResponse.ledgerId) == (status.EOK, 4)
    bad = c.call(c.request(pb.WRITE_LAC, "writeLacRequest", ledgerId=4, lac=3, masterKey=KEY, body=lac_blob))
    assert bad.status == status.EBADREQ  # the blob's LAC is not the request's
    lac = c.call(c.request(pb.READ_LAC, "readLacRequest", ledgerId=4)).readLacResponse
    assert (lac.status, lac.lacBody, lac.lastEntryBody) == (status.EOK, lac_blob, entry(4, 5))
    forced = c.call(c.request(pb.FORCE_LEDGER, "forceLedgerRequest", ledgerId=4))
    assert (forced.status, forced.forceLedgerResponse.ledgerId) == (status.EOK, 4)
    info = c.call(c.request(pb.GET_BOOKIE_INFO, "getBookieInfoRequest",
                            requested=pb.GetBookieInfoRequest.TOTAL_DISK_CAPACITY | pb.GetBookieInfoRequest.FREE_DISK_SPACE))
    assert info.status == status.EOK and info.getBookieInfoResponse.totalDiskCapacity >= info.getBookieInfoResponse.freeDiskSpace > 0
    listed = c.call(c.request(pb.GET_LIST_OF_ENTRIES_OF_LEDGER, "getListOfEntriesOfLedgerRequest", ledgerId=4))
    assert availability.decode(listed.getListOfEntriesOfLedgerResponse.availabilityOfEntriesOfLedger) == [0, 1, 2, 5]
    auth = c.call(c.request(pb.AUTH, "authRequest", authPluginName="AuthDisabledPlugin", payload=b""))
    assert (auth.status, auth.authResponse.authPluginName) == (status.EOK, v2.AUTHENTICATION_DISABLED_PLUGIN_NAME)


def test_v2_add_read_fence_and_batch_read(connect):
    c = connect()
    for i in range(5):
        added = c.call_v2(v2.ParsedAddRequest(2, v2.FLAG_NONE, KEY, entry(8, i, i - 1, b"e%d" % i)))
        assert added == v2.AddResponse(2, v2.EOK, 8, i)
    assert c.call_v2(v2.ReadRequest(2, 0, 8, 3)) == v2.ReadResponse(2, v2.EOK, 8, 3, entry(8, 3, 2, b"e3"))
    assert c.call_v2(v2.ReadRequest(2, 0, 8, 9)) == v2.ReadResponse(2, v2.ENOENTRY, 8, 9)
    assert c.call_v2(v2.ReadRequest(2, 0, 99, 0)).rc == v2.ENOLEDGER
    batch = c.call_v2(v2.BatchedReadRequest(2, 0, 8, 1, 77, 3, 1 << 20))
    assert (batch.rc, batch.request_id, batch.entries) == (v2.EOK, 77, tuple(entry(8, i, i - 1, b"e%d" % i) for i in (1, 2, 3)))
    two = len(entry(8, 0, -1, b"e0")) + len(entry(8, 1, 0, b"e1"))
    small = c.call_v2(v2.BatchedReadRequest(2, 0, 8, 0, 78, 0, v2.batched_read_frame_size(two, 2)))
    assert len(small.entries) == 2  # maxSize bounds the answer (maxCount 0: no count limit)
    short = c.call_v2(v2.BatchedReadRequest(2, 0, 8, 0, 78, 0, v2.batched_read_frame_size(two, 2) - 1))
    assert len(short.entries) == 1  # one byte less: the second entry does not fit
    tiny = c.call_v2(v2.BatchedReadRequest(2, 0, 8, 0, 78, 0, 1))
    assert len(tiny.entries) == 1  # the first entry always goes
    assert c.call_v2(v2.BatchedReadRequest(2, 0, 8, 6, 79, 3, 1 << 20)).rc == v2.ENOENTRY
    assert c.call_v2(v2.BatchedReadRequest(2, 0, 99, 0, 80, 3, 1 << 20)).rc == v2.ENOLEDGER
    for i in (0, 1, 3):  # ledger 10 has a hole at entry 2
        assert c.call_v2(v2.ParsedAddRequest(2, v2.FLAG_NONE, KEY, entry(10, i, -1))).rc == v2.EOK
    holed = c.call_v2(v2.BatchedReadRequest(2, 0, 10, 0, 81, 0, 1 << 20))
    assert (holed.rc, holed.entries) == (v2.EOK, (entry(10, 0, -1), entry(10, 1, -1)))  # ends before the hole
    assert c.call_v2(v2.BatchedReadRequest(2, 0, 10, 2, 82, 0, 1 << 20)).rc == v2.ENOENTRY
    after = c.call_v2(v2.BatchedReadRequest(2, 0, 10, 3, 83, 5, 1 << 20))
    assert (after.rc, after.entries) == (v2.EOK, (entry(10, 3, -1),))
    fenced = c.call_v2(v2.ReadRequest(2, v2.FLAG_DO_FENCING, 8, 4, KEY))
    assert fenced == v2.ReadResponse(2, v2.EOK, 8, 4, entry(8, 4, 3, b"e4"))
    assert c.call_v2(v2.ParsedAddRequest(2, 0, KEY, entry(8, 5, 4))).rc == v2.EFENCED
    assert c.call_v2(v2.ParsedAddRequest(2, v2.FLAG_RECOVERY_ADD, KEY, entry(8, 5, 4))).rc == v2.EOK
    auth = c.call_v2(v2.AuthRequest(2, pb.AuthMessage(authPluginName="x", payload=b"").SerializeToString()))
    assert pb.AuthMessage.FromString(auth.auth_message).authPluginName == v2.AUTHENTICATION_DISABLED_PLUGIN_NAME


def test_a_connection_with_too_many_requests_in_flight_is_not_read_until_they_drain(native_bookie, connect,
                                                                                   monkeypatch):
    monkeypatch.setattr(native_server, "MAX_CONNECTION_REQUESTS", 2)
    _, server = native_bookie
    poller, writer = connect(), connect()
    assert writer.add(2, 0).status == status.EOK
    polls = [poller.request(pb.READ_ENTRY, "readRequest", ledgerId=2, entryId=-1, previousLAC=-1, timeOut=60000)
             for _ in range(2)]
    info = poller.request(pb.GET_BOOKIE_INFO, "getBookieInfoRequest", requested=0)
    poller.send(*(r.SerializeToString() for r in (*polls, info)))
    wait_for(lambda: any(h._read_paused for h in list(server.connections)), "the poller's connection to pause")
    assert writer.add(2, 1, lac=0).status == status.EOK  # the LAC passes -1: both polls answer
    answered = {pb.Response.FromString(poller.receive()).header.txnId for _ in range(3)}
    assert answered == {r.header.txnId for r in (*polls, info)}  # the connection was read again


@pytest.mark.parametrize("bad, what", [
    (b"\x00\x20\x00\x00", "an oversized frame"),  # 2 MiB announced, 1 MiB allowed
    (encode_frames([b"\x0a\x03garbage"]), "neither v3 nor v2"),
    (encode_frames([b"\x02\x01\x00\x00short"]), "a truncated v2 add"),
    (encode_frames([b"\x02\x05\x00\x00" + bytes(16)]), "a v2 op with no v2 message (WRITE_LAC)"),
    (encode_frames([b"\x02\x63\x00\x00"]), "an unknown v2 op"),
])
def test_bad_frames_close_their_connection_only(native_bookie, connect, caplog, bad, what):
    other = connect()
    assert other.add(1, 0).status == status.EOK
    c = connect()
    with caplog.at_level(logging.WARNING, logger=native_server.__name__):
        c.sock.sendall(bad)
        assert c.is_closed_by_peer(), what
    refusals = [r for r in caplog.records if r.name == native_server.__name__]
    assert len(refusals) == 1 and refusals[0].exc_info is None and "closed" in refusals[0].getMessage()
    assert other.read(1, 0).status == status.EOK  # the bookie and its other connections go on
    assert connect().read(1, 0).status == status.EOK


def test_v3_requests_the_bookie_does_not_serve_get_ebadreq(connect, caplog):
    c = connect()
    for request in (c.request(pb.RANGE_READ_ENTRY), c.request(pb.BATCH_READ_ENTRY), c.request(pb.START_TLS),
                    c.request(pb.READ_ENTRY)):  # the last: a read without its readRequest
        answer = c.call(request)
        assert (answer.status, answer.header.operation) == (status.EBADREQ, request.header.operation)
    assert c.add(1, 0, lac=-1, payload=b"").status == status.EOK
    short = c.request(pb.ADD_ENTRY, "addRequest", ledgerId=1, entryId=1, masterKey=KEY, body=b"short")
    assert c.call(short).addResponse.status == status.EBADREQ
    negative = c.request(pb.ADD_ENTRY, "addRequest", ledgerId=1, entryId=1, masterKey=KEY, body=b"\xff" * 40)
    assert c.call(negative).status == status.EBADREQ
    deferred = c.request(pb.ADD_ENTRY, "addRequest", ledgerId=1, entryId=1, masterKey=KEY, body=entry(1, 1), writeFlags=1)
    assert c.call(deferred).status == status.EBADREQ
    assert not any(r.exc_info for r in caplog.records)


def test_a_connection_reads_up_to_byte_buf_allocator_size_max(native_bookie, connect):
    """One read of a connection takes up to byteBufAllocatorSizeMax (1 MiB, as Netty's allocator), not asyncio's
    256 KiB: a client's batch of adds arrives in few reads, each stored as one journal record."""
    server = native_bookie[1]
    assert server.read_size == native_server.DEFAULT_READ_SIZE == 1 << 20
    c = connect()
    assert c.read(999, 0).status == status.ENOLEDGER  # served: the connection is set up
    (handler,) = server.connections
    assert handler.transport.max_size == 1 << 20
