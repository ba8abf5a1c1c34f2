"""The native server's batching (bookie/server/native_server.py): the adds one read from the socket
brings go to the Bookie as one framed batch per ledger, the plain reads as one executor job; the
answers of one event-loop turn leave in one write. Each add is still answered only once its journal
record is fsynced, each request with its own txnId and status, and a bad entry among good ones is
refused alone.
"""
from __future__ import annotations

import socket
import threading

import pytest

from bookie.ledger_id import LedgerId
from bookie.proto import bookkeeper_protocol_pb2 as pb
from bookie.proto import bookie_proto_encoding as v2
from bookie.proto import status
from bookie.server import native_server
from bookie.server.journal import Journal
from tests.helpers.native_bookie import KEY
from tests.helpers.waiting import DEADLINE
from tests.integration.test_native_server import RawConnection, entry


@pytest.fixture
def conn(native_bookie):
    c = RawConnection(native_bookie[1].port)
    yield c
    c.sock.close()


def adds(c: RawConnection, ledger_id: int, entry_ids) -> list[pb.Request]:
    return [c.request(pb.ADD_ENTRY, "addRequest", ledgerId=ledger_id, entryId=i, masterKey=KEY,
                      body=entry(ledger_id, i, i - 1)) for i in entry_ids]


def test_adds_of_one_read_are_one_batch_each_answered_with_its_own_txn(native_bookie, conn, monkeypatch):
    bookie = native_bookie[0]
    calls = []
    real = bookie.add_entries
    monkeypatch.setattr(bookie, "add_entries", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    requests = adds(conn, 9, range(200)) + adds(conn, 10, range(3))
    conn.send(*(r.SerializeToString() for r in requests))  # one write: usually one read on the bookie
    answers = [pb.Response.FromString(conn.receive()) for _ in requests]
    assert sorted(a.header.txnId for a in answers) == [r.header.txnId for r in requests]
    by_txn = {a.header.txnId: a for a in answers}
    for r in requests:
        a = by_txn[r.header.txnId]
        assert (a.status, a.addResponse.status, a.addResponse.ledgerId, a.addResponse.entryId) == \
            (status.EOK, status.EOK, r.addRequest.ledgerId, r.addRequest.entryId)
    assert len(calls) < len(requests)  # batched (however TCP cut the write)
    for i in (0, 99, 199):
        assert conn.read(9, i).readResponse.body == entry(9, i, i - 1)


def test_no_add_is_answered_before_its_fsync(native_bookie, conn, monkeypatch):
    held, release = threading.Event(), threading.Event()
    real = Journal._fdatasync

    def fdatasync(self, fd):
        held.set()
        assert release.wait(DEADLINE)
        real(self, fd)
    monkeypatch.setattr(Journal, "_fdatasync", fdatasync)
    requests = adds(conn, 11, range(50))
    conn.send(*(r.SerializeToString() for r in requests))
    assert held.wait(DEADLINE)
    conn.sock.settimeout(0.5)
    with pytest.raises(socket.timeout):  # journaled, not fsynced: nothing answered
        conn.sock.recv(1 << 16)
    conn.sock.settimeout(DEADLINE)
    release.set()
    answers = [pb.Response.FromString(conn.receive()) for _ in requests]
    assert all(a.addResponse.status == status.EOK for a in answers)


def test_a_bad_entry_in_a_batch_is_refused_alone(native_bookie, conn):
    requests = adds(conn, 12, range(5))
    beyond = 2 ** 37  # past MAX_ENTRY_ID: the Bookie refuses the batch it is in
    requests.insert(2, conn.request(pb.ADD_ENTRY, "addRequest", ledgerId=12, entryId=beyond, masterKey=KEY,
                                    body=entry(12, beyond, 4)))
    requests.append(conn.request(pb.ADD_ENTRY, "addRequest", ledgerId=12, entryId=6, masterKey=KEY, body=b"short"))
    conn.send(*(r.SerializeToString() for r in requests))
    answers = {a.header.txnId: a.addResponse.status
               for a in (pb.Response.FromString(conn.receive()) for _ in requests)}
    assert [answers[r.header.txnId] for r in requests] == [status.EOK] * 2 + [status.EBADREQ] + [status.EOK] * 3 + \
        [status.EBADREQ]


def test_plain_reads_of_one_read_are_answered_each_v3_and_v2(native_bookie, conn):
    conn.send(*(r.SerializeToString() for r in adds(conn, 13, range(20))))
    for _ in range(20):
        conn.receive()
    reads = [conn.request(pb.READ_ENTRY, "readRequest", ledgerId=13, entryId=i) for i in (*range(20), 25, -1)]
    reads.append(conn.request(pb.READ_ENTRY, "readRequest", ledgerId=14, entryId=0))
    conn.send(*(r.SerializeToString() for r in reads))
    answers = {a.header.txnId: a for a in (pb.Response.FromString(conn.receive()) for _ in reads)}
    for i in range(20):
        a = answers[reads[i].header.txnId]
        assert (a.status, a.readResponse.entryId, a.readResponse.body, a.readResponse.maxLAC) == \
            (status.EOK, i, entry(13, i, i - 1), 18)
    assert answers[reads[20].header.txnId].readResponse.status == status.ENOENTRY
    assert answers[reads[21].header.txnId].readResponse.entryId == 19  # -1: the last entry
    assert answers[reads[22].header.txnId].status == status.ENOLEDGER
    other = RawConnection(native_bookie[1].port)  # v2 single reads, batched the same way
    try:
        requests = [v2.ReadRequest(v2.CURRENT_PROTOCOL_VERSION, v2.FLAG_NONE, 13, i) for i in (3, 30, 4)]
        other.send(*(v2.encode_request(r) for r in requests))
        got = sorted((r.entry_id, r.rc, r.data) for r in (v2.decode_response(other.receive()) for _ in requests))
        assert got == [(3, v2.EOK, entry(13, 3, 2)), (4, v2.EOK, entry(13, 4, 3)), (30, v2.ENOENTRY, b"")]
    finally:
        other.sock.close()


def test_a_fence_after_adds_in_the_same_read_comes_after_them(native_bookie, conn):
    requests = adds(conn, 15, range(10))
    fence = conn.request(pb.READ_ENTRY, "readRequest", ledgerId=15, entryId=9, masterKey=KEY,
                         flag=pb.ReadRequest.FENCE_LEDGER)
    late = adds(conn, 15, [10])
    conn.send(*(r.SerializeToString() for r in (*requests, fence, *late)))
    answers = {a.header.txnId: a for a in (pb.Response.FromString(conn.receive()) for _ in range(12))}
    assert all(answers[r.header.txnId].addResponse.status == status.EOK for r in requests)
    assert answers[fence.header.txnId].readResponse.body == entry(15, 9, 8)
    # An add after the fence in the same read may reach the Bookie before the fence does (as on a Java
    # bookie, whose adds and reads run on separate threads): taken or fenced, never lost unanswered.
    assert answers[late[0].header.txnId].addResponse.status in (status.EOK, status.EFENCED)


@pytest.mark.parametrize("ids", [list(range(1, 21, 3)), list(range(1, 30, 3)), [0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22]])
def test_evenly_stepped_reads_are_read_as_a_range_and_a_missing_one_still_answers_alone(native_bookie, conn, ids,
                                                                                          monkeypatch):
    stored = [i for i in range(21)]  # 21, 22, ... are not stored: a run with them cannot be one range
    conn.send(*(r.SerializeToString() for r in adds(conn, 16, stored)))
    for _ in stored:
        conn.receive()
    bookie, singles = native_bookie[0], []
    real = bookie.read_entry
    monkeypatch.setattr(bookie, "read_entry", lambda *a: singles.append(a[1]) or real(*a))
    reads = [conn.request(pb.READ_ENTRY, "readRequest", ledgerId=16, entryId=i) for i in ids]
    conn.send(*(r.SerializeToString() for r in reads))
    answers = {a.header.txnId: a.readResponse for a in (pb.Response.FromString(conn.receive()) for _ in reads)}
    for r in reads:
        i, a = r.readRequest.entryId, answers[r.header.txnId]
        if i in stored:
            assert (a.status, a.entryId, a.body, a.maxLAC) == (status.EOK, i, entry(16, i, i - 1), 19)
        else:
            assert (a.status, a.entryId, a.HasField("body")) == (status.ENOENTRY, i, False)
    if all(i in stored for i in ids):
        assert singles == []  # one range (however TCP cut the write: runs of 4 or more)


# -- v2 adds of one size: a run taken as columns (bookie/proto/v2_add_columns.py) ----------------------------
def v2_adds(ledger_id: int, entry_ids, flags: int = v2.FLAG_NONE) -> list[bytes]:
    return [v2.encode_request(v2.ParsedAddRequest(2, flags, KEY, entry(ledger_id, i, -1))) for i in entry_ids]


def v2_answers(c: RawConnection, count: int) -> dict[tuple[int, int], int]:
    """(ledger, entry) -> rc of ``count`` answers; each (ledger, entry) answered once."""
    answers = [v2.decode_response(c.receive()) for _ in range(count)]
    by_key = {(a.ledger_id, a.entry_id): a.rc for a in answers}
    assert len(by_key) == count
    return by_key


def recorded_runs(monkeypatch, columns) -> list:
    """The runs the server takes as adds of one ledger: what ``columns.scan_add_run`` gives, each call."""
    taken = []
    real = columns.scan_add_run

    def scan(*args):
        adds = real(*args)
        taken.append(adds)
        return adds
    monkeypatch.setattr(columns, "scan_add_run", scan)
    return taken


@pytest.fixture
def runs(monkeypatch):
    return recorded_runs(monkeypatch, native_server.v2_add_columns)


def v2_connection(c: RawConnection) -> None:
    """Switch the connection to v2 (its first v2 request does, for good)."""
    assert c.call_v2(v2.ReadRequest(2, 0, 999, 0)).rc == v2.ENOLEDGER


def test_a_run_of_v2_adds_is_stored_as_batches_and_each_entry_answered(native_bookie, conn, runs, monkeypatch):
    bookie = native_bookie[0]
    v2_connection(conn)
    calls = []
    real = bookie.add_entries
    monkeypatch.setattr(bookie, "add_entries", lambda *a, **k: calls.append(a[0]) or real(*a, **k))
    conn.send(*v2_adds(20, range(300)))
    assert v2_answers(conn, 300) == {(20, i): v2.EOK for i in range(300)}
    assert any(adds is not None for adds in runs) and len(calls) < 300
    for i in (0, 150, 299):
        assert bookie.read_entry(LedgerId(0, 20), i) == entry(20, i, -1)


def test_a_bad_entry_in_a_v2_run_is_refused_alone_and_a_fenced_run_as_a_whole(native_bookie, conn, runs):
    v2_connection(conn)
    beyond = 2 ** 37  # past MAX_ENTRY_ID: the Bookie refuses the batch it is in
    payloads = v2_adds(21, [0, 1, beyond, 3, 4, 5, 6, 7, 8, 9])
    conn.send(*payloads)
    answers = v2_answers(conn, len(payloads))
    assert answers.pop((21, beyond)) == v2.EBADREQ and set(answers.values()) == {v2.EOK}
    assert runs and runs[-1] is not None  # one run, then frame by frame
    native_bookie[0].fence_ledger(LedgerId(0, 21), KEY).result(DEADLINE)
    conn.send(*v2_adds(21, range(10, 30)))
    assert set(v2_answers(conn, 20).values()) == {v2.EFENCED}
    conn.send(*v2_adds(21, range(10, 30), v2.FLAG_RECOVERY_ADD))
    assert set(v2_answers(conn, 20).values()) == {v2.EOK}


def test_same_size_frames_that_are_not_adds_of_one_ledger_are_taken_one_by_one(native_bookie, conn, runs):
    v2_connection(conn)
    mixed = [p for i in range(10) for p in (v2_adds(22, [i]) + v2_adds(23, [i]))]
    conn.send(*mixed)
    assert v2_answers(conn, 20) == {(ledger, i): v2.EOK for ledger in (22, 23) for i in range(10)}
    assert runs and all(adds is None for adds in runs)
    reads = [v2.encode_request(v2.ReadRequest(2, 0, 22, i)) for i in range(10)]  # one size, not adds
    conn.send(*reads)
    answers = [v2.decode_response(conn.receive()) for _ in reads]
    assert sorted(a.entry_id for a in answers) == list(range(10)) and {a.rc for a in answers} == {v2.EOK}


@pytest.fixture
def v3_runs(monkeypatch):
    return recorded_runs(monkeypatch, native_server.v3_add_columns)


def answered(c: RawConnection, requests: list[pb.Request]) -> list[int]:
    """Each request's add status, in the requests' order (matched by txnId)."""
    by_txn = {a.header.txnId: a for a in (pb.Response.FromString(c.receive()) for _ in requests)}
    assert sorted(by_txn) == sorted(r.header.txnId for r in requests)
    for r in requests:
        a = by_txn[r.header.txnId].addResponse
        assert (a.ledgerId, a.entryId) == (r.addRequest.ledgerId, r.addRequest.entryId)
    return [by_txn[r.header.txnId].addResponse.status for r in requests]


def test_a_run_of_v3_adds_is_stored_as_batches_and_each_answered_with_its_txn(native_bookie, conn, v3_runs):
    conn._txn = 1000  # txnIds of one varint length, so that the requests have one size
    requests = adds(conn, 24, range(200, 500))
    conn.send(*(r.SerializeToString() for r in requests))
    assert answered(conn, requests) == [status.EOK] * 300
    assert any(run is not None for run in v3_runs)
    assert native_bookie[0].read_entry(LedgerId(0, 24), 350) == entry(24, 350, 349)


def test_a_bad_entry_in_a_v3_run_is_refused_alone_and_a_fenced_run_as_a_whole(native_bookie, conn, v3_runs):
    conn._txn = 1000
    requests = adds(conn, 25, range(300, 310))
    requests[5].addRequest.body = entry(25, -5, 4)  # an entry with a negative id: the Bookie refuses its batch
    assert len({r.ByteSize() for r in requests}) == 1
    conn.send(*(r.SerializeToString() for r in requests))
    assert answered(conn, requests) == [status.EOK] * 5 + [status.EBADREQ] + [status.EOK] * 4
    assert v3_runs and v3_runs[-1] is not None  # one run, then frame by frame
    requests = adds(conn, 25, range(200, 220))
    native_bookie[0].fence_ledger(LedgerId(0, 25), KEY).result(DEADLINE)
    conn.send(*(r.SerializeToString() for r in requests))
    assert answered(conn, requests) == [status.EFENCED] * 20


# -- plain v3 reads of one size at evenly stepped ids: a run read as one range (bookie/proto/v3_read_columns.py) --
@pytest.fixture
def read_runs(monkeypatch):
    """The runs the server takes as plain reads: what ``v3_read_columns.scan_read_run`` gives, each call."""
    taken = []
    real = native_server.v3_read_columns.scan_read_run
    monkeypatch.setattr(native_server.v3_read_columns, "scan_read_run", lambda *a: taken.append(real(*a)) or taken[-1])
    return taken


def stored(c: RawConnection, ledger_id: int, entry_ids, payload=lambda i: b"x") -> None:
    requests = [c.request(pb.ADD_ENTRY, "addRequest", ledgerId=ledger_id, entryId=i, masterKey=KEY,
                          body=entry(ledger_id, i, i - 1, payload(i))) for i in entry_ids]
    c.send(*(r.SerializeToString() for r in requests))
    assert answered(c, requests) == [status.EOK] * len(requests)


def read_answers(c: RawConnection, ledger_id: int, entry_ids) -> dict[int, pb.ReadResponse]:
    """Entry id -> its answer, of reads sent in one write (txnIds of one varint length: frames of one size)."""
    c._txn = max(c._txn, 1000)
    reads = [c.request(pb.READ_ENTRY, "readRequest", ledgerId=ledger_id, entryId=i) for i in entry_ids]
    c.send(*(r.SerializeToString() for r in reads))
    by_txn = {a.header.txnId: a for a in (pb.Response.FromString(c.receive()) for _ in reads)}
    assert sorted(by_txn) == [r.header.txnId for r in reads]
    for r in reads:
        assert by_txn[r.header.txnId].status == by_txn[r.header.txnId].readResponse.status
    return {r.readRequest.entryId: by_txn[r.header.txnId].readResponse for r in reads}


def test_a_run_of_striped_v3_reads_is_one_range_answered_each_with_its_txn(native_bookie, conn, read_runs,
                                                                           monkeypatch):
    stored(conn, 30, range(100))
    singles = []
    real = native_bookie[0].read_entry
    monkeypatch.setattr(native_bookie[0], "read_entry", lambda *a: singles.append(a[1]) or real(*a))
    ids = range(1, 100, 3)  # a Java client's share of a range read striped over three bookies
    answers = read_answers(conn, 30, ids)
    for i in ids:
        a = answers[i]
        assert (a.status, a.ledgerId, a.entryId, a.body, a.maxLAC) == (status.EOK, 30, i, entry(30, i, i - 1), 98)
    assert any(run is not None for run in read_runs) and singles == []


def test_a_run_with_an_absent_entry_or_entries_of_two_sizes_is_answered_read_by_read(native_bookie, conn, read_runs):
    stored(conn, 31, range(40), payload=lambda i: b"x" * (1 + i % 2))  # two entry sizes
    stored(conn, 32, range(20))
    answers = read_answers(conn, 31, range(0, 40, 2)) | read_answers(conn, 31, range(0, 40))
    assert {i: (a.status, a.body) for i, a in answers.items()} == \
        {i: (status.EOK, entry(31, i, i - 1, b"x" * (1 + i % 2))) for i in range(40)}
    answers = read_answers(conn, 32, range(10, 30))  # 20..29 were never added
    assert {i: a.status for i, a in answers.items()} == {i: status.EOK if i < 20 else status.ENOENTRY for i in range(10, 30)}
    assert answers[15].body == entry(32, 15, 14)
    assert read_runs and all(run is not None for run in read_runs)  # runs, each read again request by request
