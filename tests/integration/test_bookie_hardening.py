"""What one client can do to a bookie (issue 9): oversized explicit LACs and master keys, absurd entry ids,
malformed bytes and out-of-range integers, entries of the wrong format, and a restarted bookie that waits
for its old ZooKeeper registration. Each must get a clear answer and leave the bookie checkpointing,
restartable and serving."""
from __future__ import annotations

import os
import signal
import struct
import time

import grpc
import pytest

from bookie.client.bookie_client import BookieClient
from bookie.ledger_id import LedgerId
from bookie.meta import layout
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import availability, entry_format, status
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto.checksum import DigestManager, DigestType, generate_master_key
from bookie.server.index import MAX_ENTRY_ID, MAX_MASTER_KEY_LENGTH, index_path
from tests.helpers.waiting import wait_for

PASSWORD = b"pw"
KEY = generate_master_key(PASSWORD)
SERVICE = "/bookkeeper.proto.Bookie/"


def framed(ledger: LedgerId, ids, lac: int = -1, size: int = 10, digest: str = "crc32c") -> bytes:
    manager = DigestManager(ledger, PASSWORD, digest)
    return entry_format.frame(manager.build_entry(eid, lac, 0, bytes([eid % 251]) * size) for eid in ids)


def _log(bookie) -> str:
    with open(bookie.log_path) as f:
        return f.read()


def _range_ids(client: BookieClient, ledger: LedgerId, first: int, last: int, **kwargs) -> list[int]:
    """Entry ids a range read returns, checking that the messages cover the whole range."""
    ids: list[int] = []
    covered = first - 1
    for message in client.read_entries(ledger, first, last, **kwargs):
        assert message.status == status.EOK, message.message
        ids += [entry_format.peek_ids(f, 0)[2] for f in entry_format.iter_frames(message.entries)]
        covered = message.lastEntryIdCovered
    assert covered == last
    return ids


@pytest.fixture
def one_bookie(cluster):
    c = cluster(1, flushInterval=200)  # checkpoints run all the time: a header that cannot be written shows
    client = BookieClient(c.bookies[0].bookie_id, address=c.bookies[0].grpc_address)
    yield c, client
    client.close()


def _answering(c, client: BookieClient) -> None:
    """Wait until the restarted bookie answers (its old registration may still be in ZooKeeper, so
    LocalBookKeeper.wait_registered can return before the new process listens)."""
    bookie = c.bookies[0]
    deadline = time.monotonic() + 60
    while True:
        assert bookie.proc.poll() is None, f"the bookie exited:\n{_log(bookie)[-3000:]}"
        try:
            client.bookie_info()
            return
        except Exception:
            assert time.monotonic() < deadline, "the restarted bookie answered nothing in 60 s"
            time.sleep(0.05)


def _restart(c, client: BookieClient, sig: int = signal.SIGKILL) -> None:
    c.kill_bookie(0, sig)
    c.start_bookie(0)  # raises with the bookie's log if it exits instead of registering
    _answering(c, client)


# -- item 5: the explicit LAC blob and the master key cannot brick the index header ----------------------
def test_write_lac_with_a_body_of_any_other_size_is_refused_and_the_bookie_still_checkpoints(one_bookie):
    c, client = one_bookie
    stray = LedgerId(0, 777777)
    big = client.write_lac(stray, b"any-key", 5, os.urandom(2000))
    assert big.status == status.EBADREQ and "2000 bytes" in big.message and "16, 20, 24 or 36" in big.message

    good = LedgerId(0, 31)
    manager = DigestManager(good, PASSWORD, "crc32")
    assert client.add(good, KEY, framed(good, range(3), digest="crc32")).result(10).status == status.EOK
    blob = manager.build_lac(1)
    other_ledger = DigestManager(LedgerId(0, 32), PASSWORD, "crc32").build_lac(1)
    assert client.write_lac(good, KEY, 1, other_ledger).status == status.EBADREQ  # names ledger 32
    assert client.write_lac(good, KEY, 2, blob).status == status.EBADREQ  # the blob says 1
    assert client.write_lac(good, KEY, 1, blob[:-1]).status == status.EBADREQ
    long_key = b"k" * (MAX_MASTER_KEY_LENGTH + 1)
    refused_key = client.write_lac(LedgerId(0, 33), long_key, 1, DigestManager(LedgerId(0, 33), PASSWORD).build_lac(1))
    assert refused_key.status == status.EBADREQ and "master key" in refused_key.message
    refused_add = client.add(LedgerId(0, 34), long_key, framed(LedgerId(0, 34), [0])).result(10)
    assert refused_add.status == status.EBADREQ and f"at most {MAX_MASTER_KEY_LENGTH}" in refused_add.message
    assert client.write_lac(good, KEY, 1, blob).status == status.EOK
    for digest in DigestType:  # every digest's blob size is taken
        ledger = LedgerId(0, 40 + digest)
        assert client.write_lac(ledger, KEY, 7, DigestManager(ledger, PASSWORD, digest).build_lac(7)).status == status.EOK

    # A checkpoint writes the headers (the good ledger's index file appears), and a restart replays the rest.
    wait_for(lambda: os.path.exists(index_path(c.bookies[0].ledger_dir, good)), "a checkpoint wrote the index")
    _restart(c, client)
    assert manager.verify_lac(client.read_lac(good).lacBody) == 1
    for ledger in (stray, LedgerId(0, 33), LedgerId(0, 34)):  # a refused request leaves nothing behind
        assert client.read_lac(ledger).status == status.ENOLEDGER
    assert "does not fit" not in _log(c.bookies[0])


# -- item 6: absurd entry ids ------------------------------------------------------------------------------
def test_adds_past_the_largest_entry_id_are_refused_and_the_bookie_checkpoints_and_restarts(one_bookie):
    c, client = one_bookie
    ledger = LedgerId(0, 50)
    for eid in (2 ** 62, 2 ** 63 - 1, MAX_ENTRY_ID + 1):
        refused = client.add(ledger, KEY, framed(ledger, [eid])).result(10)
        assert refused.status == status.EBADREQ and f"{MAX_ENTRY_ID}" in refused.message, refused.message
    mixed = client.add(ledger, KEY, framed(ledger, [0, 1, 2 ** 62])).result(10)  # nothing of the batch is kept
    assert mixed.status == status.EBADREQ
    assert client.add(ledger, KEY, framed(ledger, [0, 1, MAX_ENTRY_ID])).result(10).status == status.EOK
    assert client.read_entry(ledger, 2 ** 62).status == status.ENOENTRY  # no such entry, not "could not read"
    assert client.read_entry(ledger, 2 ** 63 - 1).status == status.ENOENTRY
    wait_for(lambda: os.path.exists(index_path(c.bookies[0].ledger_dir, ledger)), "a checkpoint wrote the index")
    _restart(c, client)
    assert [client.read_entry(ledger, e).status for e in (0, 1, MAX_ENTRY_ID, 2)] == \
           [status.EOK, status.EOK, status.EOK, status.ENOENTRY]
    assert availability.decode(client.list_entries(ledger).availabilityOfEntriesOfLedger) == [0, 1, MAX_ENTRY_ID]


def test_a_read_past_the_largest_entry_id_is_no_such_entry_when_the_index_file_reaches_far(one_bookie):
    """Reads of entries 2^62 and 2^63-1 from a ledger whose index file holds entries past 2^30 (slots more
    than 8 GiB into the sparse file), answered from the index file after a checkpoint and after a
    restart: 'no such entry', not EIO (the slot offset of such an id does not fit a C long)."""
    c, client = one_bookie
    ledger = LedgerId(0, 55)
    stored = [0, 1, 2 ** 30, 2 ** 36]
    assert client.add(ledger, KEY, framed(ledger, stored)).result(10).status == status.EOK
    index = index_path(c.bookies[0].ledger_dir, ledger)
    wait_for(lambda: os.path.exists(index) and os.path.getsize(index) > 8 * 2 ** 36,
             "a checkpoint wrote the far slots to the index file")
    for when in ("after a checkpoint", "after a restart"):
        for eid in (2 ** 62, 2 ** 63 - 1):
            answer = client.read_entry(ledger, eid)
            assert answer.status == status.ENOENTRY, f"{when}: entry {eid}: {answer.status} {answer.message}"
        assert _range_ids(client, ledger, 2 ** 62, 2 ** 63 - 1) == []
        assert _range_ids(client, ledger, 2 ** 36, 2 ** 63 - 1) == [2 ** 36]
        assert [client.read_entry(ledger, e).status for e in stored] == [status.EOK] * len(stored)
        if when == "after a checkpoint":
            _restart(c, client)


@pytest.mark.parametrize("far", [2 ** 24 + 5, 2 ** 36 + 3, MAX_ENTRY_ID])
def test_listing_and_range_reads_cost_what_the_ledger_holds(make_bookie, far):
    """A ledger with entries 0..9 and one far away: listing and range reads load a handful of index
    pages (the ledger cache counts them), before and after a checkpoint, not every page in between."""
    bookie = make_bookie(pageLimit=64)
    ledger = LedgerId(0, 60)
    stored = [*range(10), far]
    bookie.add_entries(ledger, KEY, framed(ledger, stored)).result(10)

    def check(engine) -> None:
        before = engine.storage.cache.pages_loaded
        assert engine.stored_entry_ids(ledger).tolist() == stored
        ids, first = [], 0
        while True:  # as the service does: one message after another until the range is covered
            blob, count, covered = engine.read_entries(ledger, first, far, max_bytes=4 << 20)
            ids += [entry_format.peek_ids(f, 0)[2] for f in entry_format.iter_frames(blob)]
            if covered >= far:
                break
            first = covered + 1
        assert ids == stored
        blob, count, covered = engine.read_entries(ledger, 0, far, stride=3, offset=far % 3)
        assert [entry_format.peek_ids(f, 0)[2] for f in entry_format.iter_frames(blob)] == [e for e in stored if e % 3 == far % 3]
        # Two pages hold entries; a page sharing a file-system block with one of them is read too. Every
        # page in between would be 16 thousand to 134 million.
        assert engine.storage.cache.pages_loaded - before <= 16

    check(bookie)
    bookie.checkpoint()
    bookie.shutdown()
    restarted = make_bookie(pageLimit=64)  # a cold cache: pages come from the index file
    check(restarted)


def test_a_sparse_ledger_is_listed_and_range_read_over_grpc_before_and_after_a_restart(one_bookie):
    c, client = one_bookie
    ledger, neighbour = LedgerId(0, 70), LedgerId(0, 71)
    far = 2 ** 36
    stored = [*range(10), far]
    assert client.add(ledger, KEY, framed(ledger, stored)).result(10).status == status.EOK
    assert client.add(neighbour, KEY, framed(neighbour, range(5))).result(10).status == status.EOK
    for _ in ("from the cache", "from the index files"):
        assert availability.decode(client.list_entries(ledger).availabilityOfEntriesOfLedger) == stored
        assert _range_ids(client, ledger, 0, far) == stored
        assert _range_ids(client, ledger, 5, far, max_bytes=30) == stored[5:]  # one entry per message
        assert _range_ids(client, ledger, 0, 2 ** 63 - 1, stride=4, offset=0) == [0, 4, 8, far]
        assert client.read_entry(neighbour, 4).status == status.EOK
        _restart(c, client, signal.SIGTERM)  # a clean stop checkpoints: the restart reads the index files


# -- item 8: malformed bytes and out-of-range integers ---------------------------------------------------
def test_malformed_request_bytes_get_invalid_argument_and_one_log_line(one_bookie):
    c, client = one_bookie
    channel = client.channel
    garbage = b"\xff\xff\xff\xff"
    for method in ("ReadEntry", "WriteLac", "GetListOfEntriesOfLedger"):
        call = channel.unary_unary(SERVICE + method)
        with pytest.raises(grpc.RpcError) as err:
            call(garbage, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and method in err.value.details()
    with pytest.raises(grpc.RpcError) as err:
        list(channel.unary_stream(SERVICE + "ReadEntries")(garbage, timeout=10))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    good = LedgerId(0, 80)
    add = pb.AddRequest(txnId=1, ledgerId=good.ledger_id, masterKey=KEY, entries=framed(good, [0])).SerializeToString()
    with pytest.raises(grpc.RpcError) as err:
        list(channel.stream_stream(SERVICE + "AddEntries")(iter([add, garbage]), timeout=10))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert client.read_entry(good, 0).status == status.EOK  # the good message before it was taken
    log = _log(c.bookies[0])
    assert "Traceback" not in log
    assert log.count(" request of 4 bytes refused") == 5, log


def test_out_of_range_integers_get_ebadreq_and_no_traceback(one_bookie):
    c, client = one_bookie
    ledger = LedgerId(0, 90)
    assert client.add(ledger, KEY, framed(ledger, range(3))).result(10).status == status.EOK
    top, bottom = 2 ** 63 - 1, -2 ** 63
    stub = client.stub

    def range_status(**fields) -> int:
        request = pb.ReadRangeRequest(ledgerId=ledger.ledger_id, **fields)
        return [m.status for m in stub.ReadEntries(request, timeout=10)][-1]

    assert range_status(firstEntryId=bottom, lastEntryId=5) == status.EBADREQ
    assert range_status(firstEntryId=0, lastEntryId=bottom) == status.EBADREQ
    assert range_status(firstEntryId=0, lastEntryId=top, maxBytesPerMessage=-1) == status.EBADREQ
    assert range_status(firstEntryId=top, lastEntryId=top) == status.EOK
    assert range_status(firstEntryId=0, lastEntryId=top, stride=2 ** 31 - 1, offset=2 ** 31 - 2) == status.EOK
    assert stub.ReadEntry(pb.ReadRequest(ledgerId=ledger.ledger_id, entryId=bottom), timeout=10).status == status.EBADREQ
    assert stub.ReadEntry(pb.ReadRequest(ledgerId=ledger.ledger_id, entryId=top), timeout=10).status == status.ENOENTRY
    assert stub.ReadEntry(pb.ReadRequest(ledgerScopeId=top, ledgerId=top, entryId=top), timeout=10).status == \
        status.ENOLEDGER
    long_poll = stub.ReadEntry(pb.ReadRequest(ledgerId=ledger.ledger_id, entryId=-1, previousLAC=1, timeOut=top,
                                              flag=pb.ReadRequest.ENTRY_PIGGYBACK), timeout=10)
    assert long_poll.status == status.EBADREQ and "timeOut" in long_poll.message
    for previous in (top, bottom):
        assert stub.ReadEntry(pb.ReadRequest(ledgerId=ledger.ledger_id, entryId=-1, previousLAC=previous, timeOut=1),
                              timeout=10).status == status.EBADREQ
    lac = stub.WriteLac(pb.WriteLacRequest(ledgerId=ledger.ledger_id, lac=bottom, masterKey=KEY,
                                           body=struct.pack(">qq", ledger.ledger_id, bottom)), timeout=10)
    assert lac.status == status.EBADREQ
    huge = LedgerId(top, top)  # the largest ledger id there is: a valid one
    assert client.add(huge, KEY, framed(huge, [0])).result(10).status == status.EOK
    assert client.read_entry(huge, 0).status == status.EOK
    assert "Traceback" not in _log(c.bookies[0])


# -- small answers that mislead --------------------------------------------------------------------------
@pytest.mark.parametrize("count", [1, 8])  # the frame-by-frame scan and the vectorized one
def test_a_v2_entry_for_a_scope_0_ledger_is_refused(one_bookie, count):
    _, client = one_bookie
    ledger = LedgerId(0, 100)
    flags = entry_format.V2_FLAG | (entry_format.ENTRY_FORMAT_V2 << 4) | DigestType.DUMMY
    v2 = entry_format.frame(entry_format.V2_HEADER.pack(flags, 0, ledger.ledger_id, eid, -1, 0) + b"payload" for eid in range(count))
    refused = client.add(ledger, KEY, v2).result(10)
    assert refused.status == status.EBADREQ and "V1" in refused.message, refused.message
    scoped = LedgerId(3, 100)
    v1 = framed(LedgerId(0, 100), range(count))
    assert client.add(scoped, KEY, v1).result(10).status == status.EBADREQ
    assert client.add(scoped, KEY, framed(scoped, range(count))).result(10).status == status.EOK


def test_a_restarted_bookie_serves_while_its_old_registration_is_still_there(cluster):
    """The restarted bookie waits for its old ephemeral node to go; meanwhile it answers requests. The
    test holds that node itself (its own session), so the wait lasts exactly as long as the test wants."""
    c = cluster(1, zkTimeout=10000)
    bookie = c.bookies[0]
    client = BookieClient(bookie.bookie_id, timeout=2.0, address=bookie.grpc_address)
    ledger = LedgerId(0, 110)
    try:
        assert client.add(ledger, KEY, framed(ledger, range(3))).result(10).status == status.EOK
        path = f"{c.root}/{layout.AVAILABLE_NODE}/{bookie.bookie_id}"
        with ZKMetadataStore(c.metadata_service_uri) as store:
            c.kill_bookie(0, signal.SIGKILL)
            store.zk.delete(path)  # the dead session's node, replaced by one this test holds
            store.zk.create(path, b"", ephemeral=True)
            c.start_bookie(0, wait=False)
            answered = None
            deadline = time.monotonic() + 60
            while answered is None:
                assert bookie.proc.poll() is None, f"the bookie exited:\n{_log(bookie)[-3000:]}"
                assert time.monotonic() < deadline, "the restarted bookie answered nothing in 60 s"
                try:
                    answered = client.read_entry(ledger, 2, timeout=1.0)
                except Exception:
                    time.sleep(0.05)
            assert answered.status == status.EOK
            assert store.zk.exists(path).ephemeralOwner == store.zk.client_id[0]  # still the old registration
            assert store.bookies() == [bookie.bookie_id]  # the node it waits on, not its own
            store.zk.delete(path)  # the old registration expires
            c.wait_registered(0)
            assert store.zk.exists(path).ephemeralOwner != store.zk.client_id[0]
    finally:
        client.close()
