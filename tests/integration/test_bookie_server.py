"""Bookie processes over gRPC with a real ZooKeeper: every request type, fencing, long poll,
read-only, registration, cookies, and bad requests."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import grpc
import pytest

from bookie.client.bookie_client import BookieClient
from bookie.exceptions import BKMessageTooLargeException
from bookie.ledger_id import LedgerId
from bookie.meta.zk_metadata_store import ZKMetadataStore
from bookie.proto import availability, entry_format, status
from bookie.proto import bookkeeper_pb2 as pb
from bookie.proto.checksum import DigestManager, generate_master_key
from tests.helpers.held_bookie import restart_held
from tests.helpers.waiting import wait_for

PASSWORD = b"pw"
KEY = generate_master_key(PASSWORD)


def entries(ledger: LedgerId, first: int, count: int, lac: int | None = None, size: int = 100) -> bytes:
    digest = DigestManager(ledger, PASSWORD)
    lac = first - 1 if lac is None else lac
    return digest.build_framed(first, lac, 0, [bytes([i % 256]) * size for i in range(first, first + count)])[0]


@pytest.fixture
def one_bookie(cluster):
    c = cluster(1)
    client = BookieClient(c.bookies[0].bookie_id, address=c.bookies[0].grpc_address)
    yield c, client
    client.close()


def test_every_request_type_round_trips(one_bookie):
    c, client = one_bookie
    ledger = LedgerId(0, 10)
    digest = DigestManager(ledger, PASSWORD)
    futures = [client.add(ledger, KEY, entries(ledger, i * 50, 50)) for i in range(4)]
    responses = [f.result(10) for f in futures]
    assert [(r.status, r.firstEntryId, r.lastEntryId, r.entryCount) for r in responses] == \
           [(status.EOK, i * 50, i * 50 + 49, 50) for i in range(4)]

    one = client.read_entry(ledger, 123)
    assert one.status == status.EOK and digest.verify(one.body, 123)[1].tobytes() == bytes([123]) * 100
    last = client.read_entry(ledger, -1)
    assert last.status == status.EOK and last.entryId == 199 and last.maxLAC == 149  # piggybacked by 150..199

    ids = []
    for message in client.read_entries(ledger, 0, 199, max_bytes=4096):
        assert message.status == status.EOK
        ids += [digest.verify(f)[0].entry_id for f in entry_format.iter_frames(message.entries)]
    assert ids == list(range(200))

    assert client.write_lac(ledger, KEY, 199, digest.build_lac(199)).status == status.EOK
    lac = client.read_lac(ledger)
    assert lac.status == status.EOK and digest.verify_lac(lac.lacBody) == 199
    assert digest.verify(lac.lastEntryBody, 199)
    assert client.read_entry(ledger, 0).maxLAC == 199  # the explicit LAC raised the bookie's LAC

    assert client.force_ledger(ledger).status == status.EOK
    info = client.bookie_info()
    assert info.status == status.EOK and 0 < info.freeDiskSpace < info.totalDiskCapacity and not info.readOnly
    listing = client.list_entries(ledger)
    assert listing.status == status.EOK and availability.decode(listing.availabilityOfEntriesOfLedger) == list(range(200))


def test_lists_of_entries_of_many_ledgers_in_one_request(one_bookie):
    """GetListOfEntriesOfLedgers: one answer per ledger in the request's order, each with its own status; the
    client splits a longer list at MAX_LEDGERS_PER_LIST_REQUEST; a longer request is refused, not served."""
    c, client = one_bookie
    striped, plain, absent = LedgerId(0, 21), LedgerId(5, 22), LedgerId(0, 23)
    for e in range(0, 30, 3):  # a bookie's share of a striped ledger: every third entry
        client.add(striped, KEY, entries(striped, e, 1)).result(10)
    client.add(plain, KEY, entries(plain, 0, 7)).result(10)
    asked = [absent, striped, plain] * (availability.MAX_LEDGERS_PER_LIST_REQUEST // 2)
    answers = client.list_entries_of_ledgers(asked)
    assert [(a.ledgerScopeId, a.ledgerId) for a in answers] == [tuple(ledger) for ledger in asked]
    listed = {(a.ledgerScopeId, a.ledgerId): (a.status, availability.decode(a.availabilityOfEntriesOfLedger)
                                              if a.status == status.EOK else None) for a in answers}
    assert listed == {tuple(absent): (status.ENOLEDGER, None), tuple(striped): (status.EOK, list(range(0, 30, 3))),
                      tuple(plain): (status.EOK, list(range(7)))}
    too_many = pb.GetListOfEntriesOfLedgersRequest(ledgers=[pb.GetListOfEntriesOfLedgerRequest(ledgerId=1)] *
                                                   (availability.MAX_LEDGERS_PER_LIST_REQUEST + 1))
    refused = client.stub.GetListOfEntriesOfLedgers(too_many, timeout=30)
    assert refused.status == status.EBADREQ and "at most 4096" in refused.message and not refused.ledgers


def test_an_abandoned_range_read_leaves_the_bookie_serving(one_bookie):
    """The bookie reads a range's next message while it sends one; a reader that walks away mid-range
    cancels that, and the bookie's log shows no error for it."""
    c, client = one_bookie
    ledger = LedgerId(0, 11)
    client.add(ledger, KEY, entries(ledger, 0, 500, size=1000)).result(10)
    for _ in range(5):
        stream = client.read_entries(ledger, 0, 499, max_bytes=10_000)
        assert next(stream).status == status.EOK
        stream.close()  # cancels the call with messages still to come
    whole = [m for m in client.read_entries(ledger, 0, 499, max_bytes=100_000)]
    assert sum(m.entryCount for m in whole) == 500 and all(m.status == status.EOK for m in whole)
    assert c.kill_bookie(0, signal.SIGTERM) == 0  # a clean stop: whatever the bookie had to log is logged
    with open(c.bookies[0].log_path) as f:
        log = f.read()
    assert "Traceback" not in log and "never retrieved" not in log


def test_missing_things_are_told_apart(one_bookie):
    _, client = one_bookie
    assert client.read_entry(LedgerId(0, 99), 0).status == status.ENOLEDGER
    ledger = LedgerId(0, 11)
    client.add(ledger, KEY, entries(ledger, 0, 1)).result(10)
    assert client.read_entry(ledger, 5).status == status.ENOENTRY
    assert client.read_lac(LedgerId(0, 98)).status == status.ENOLEDGER


def test_wrong_master_key_is_refused(one_bookie):
    _, client = one_bookie
    ledger = LedgerId(0, 12)
    assert client.add(ledger, KEY, entries(ledger, 0, 2)).result(10).status == status.EOK
    refused = client.add(ledger, generate_master_key(b"wrong"), entries(ledger, 2, 1)).result(10)
    assert refused.status == status.EUA and "master key" in refused.message
    assert client.read_entry(ledger, -1, fence=True, master_key=generate_master_key(b"wrong")).status == status.EUA


def test_fence_blocks_adds_survives_restart_and_lets_recovery_add(one_bookie):
    c, client = one_bookie
    ledger = LedgerId(0, 13)
    assert client.add(ledger, KEY, entries(ledger, 0, 5)).result(10).status == status.EOK
    fenced = client.read_entry(ledger, -1, fence=True, master_key=KEY)
    assert fenced.status == status.EOK and fenced.entryId == 4  # the fence read returns the last entry
    assert client.add(ledger, KEY, entries(ledger, 5, 1)).result(10).status == status.EFENCED

    c.kill_bookie(0, signal.SIGKILL)
    c.start_bookie(0)
    assert client.add(ledger, KEY, entries(ledger, 5, 1)).result(10).status == status.EFENCED
    recovery = client.add(ledger, KEY, entries(ledger, 5, 1), recovery=True).result(10)
    assert recovery.status == status.EOK and recovery.lastEntryId == 5
    # Fencing a ledger this bookie never saw creates it fenced: the answer is "no entry".
    assert client.read_entry(LedgerId(0, 14), -1, fence=True, master_key=KEY).status == status.ENOENTRY


def test_long_poll_wakes_on_a_new_lac_and_times_out_otherwise(one_bookie):
    _, client = one_bookie
    ledger = LedgerId(0, 15)
    client.add(ledger, KEY, entries(ledger, 0, 3, lac=1)).result(10)
    quiet = client.read_entry(ledger, -1, previous_lac=1, timeout_ms=300, piggyback=True)
    assert quiet.status == status.EOK and quiet.maxLAC == 1 and not quiet.body  # the timeout's answer

    waiting = client.read_entry_async(ledger, -1, previous_lac=1, timeout_ms=60000, piggyback=True)
    assert client.read_lac(ledger).status == status.EOK  # a later request is answered meanwhile
    assert not waiting.done()  # the poll waits for a new LAC (or its 60 s)
    client.add(ledger, KEY, entries(ledger, 3, 2, lac=3)).result(10)
    woke = waiting.result(5)
    assert woke.maxLAC == 3 and woke.entryId == 2  # the entry after previousLAC rides along
    assert DigestManager(ledger, PASSWORD).verify(woke.body, 2)
    bad = client.read_entry(ledger, 7, previous_lac=1, timeout_ms=10, piggyback=True)
    assert bad.status == status.EBADREQ


def test_read_only_both_ways_moves_the_registration(cluster, tmp_path):
    """The real disk fills past diskUsageThreshold (fallocate) and drains again."""
    from bookie.server.ledger_dirs_monitor import disk_usage
    probe = str(tmp_path)
    total = shutil.disk_usage(probe).total
    margin = min(256 << 20, shutil.disk_usage(probe).free // 4)
    threshold = disk_usage(probe) + margin / total
    c = cluster(1, diskUsageThreshold=round(threshold, 6), diskUsageWarnThreshold=0.0, diskCheckInterval=100)
    bookie_id = c.bookies[0].bookie_id
    client = BookieClient(bookie_id, address=c.bookies[0].grpc_address)
    ledger = LedgerId(0, 16)
    filler = os.path.join(probe, "filler")
    try:
        assert client.add(ledger, KEY, entries(ledger, 0, 1)).result(10).status == status.EOK
        with open(filler, "wb") as f:
            os.posix_fallocate(f.fileno(), 0, 2 * margin)
        with ZKMetadataStore(c.metadata_service_uri) as store:
            wait_for(lambda: store.bookies(read_only=True) == [bookie_id] and store.bookies() == [],
                     "the bookie to register read-only")
            assert client.add(ledger, KEY, entries(ledger, 1, 1)).result(10).status == status.EREADONLY
            assert client.add(ledger, KEY, entries(ledger, 1, 1), recovery=True).result(10).status == status.EOK
            assert client.bookie_info().readOnly
            os.unlink(filler)
            wait_for(lambda: store.bookies() == [bookie_id] and store.bookies(read_only=True) == [],
                     "the bookie to register writable again")
            assert client.add(ledger, KEY, entries(ledger, 2, 1)).result(10).status == status.EOK
    finally:
        if os.path.exists(filler):
            os.unlink(filler)
        client.close()


def test_registration_vanishes_on_sigkill_and_returns_on_restart(cluster):
    c = cluster(2)
    with ZKMetadataStore(c.metadata_service_uri) as store:
        ids = sorted(b.bookie_id for b in c.bookies)
        assert store.bookies() == ids
        c.kill_bookie(1, signal.SIGKILL)
        # the session expires (zkTimeout 2 s)
        wait_for(lambda: store.bookies() == [c.bookies[0].bookie_id], "the killed bookie's registration to expire")
        c.start_bookie(1)
        assert store.bookies() == ids
        assert c.kill_bookie(0, signal.SIGTERM) == 0  # a clean stop exits 0 and deregisters at once
        assert store.bookies() == [c.bookies[1].bookie_id]


def test_cookie_mismatches_are_refused(cluster, zookeeper):
    c = cluster(1)
    c.kill_bookie(0, signal.SIGTERM)
    shutil.rmtree(c.bookies[0].journal_dir)  # a wiped journal disk
    with pytest.raises(RuntimeError, match="no cookie"):
        c.start_bookie(0)

    other = cluster(1)  # a second cluster: the same bookie dirs under another instance id
    other.kill_bookie(0, signal.SIGTERM)
    bookie = other.bookies[0]
    with open(bookie.conf_path) as f:
        conf = f.read().replace(other.root, c.root + "-elsewhere")
    with ZKMetadataStore(f"zk://{zookeeper.connect_string}{c.root}-elsewhere") as store:
        store.init_new_cluster()
    with open(bookie.conf_path, "w") as f:
        f.write(conf)
    out = subprocess.run([sys.executable, "-m", "bookie.cli.main", "bookie", "--conf", bookie.conf_path],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "instance id" in out.stderr


def test_malformed_and_oversized_requests_get_an_error_and_the_bookie_stays_up(one_bookie):
    c, client = one_bookie
    ledger = LedgerId(0, 17)
    garbage = client.add(ledger, KEY, b"\x00\x00\x00\x05hello").result(10)
    assert garbage.status == status.EBADREQ and "cut short" in garbage.message
    other = client.add(ledger, KEY, entries(LedgerId(0, 18), 0, 1)).result(10)
    assert other.status == status.EBADREQ and "belongs to ledger 18" in other.message
    negative = client.stub.ReadEntry(pb.ReadRequest(ledgerId=-5, entryId=0), timeout=5)
    assert negative.status == status.EBADREQ
    assert client.read_entry(ledger, 0, fence=True).status == status.EBADREQ  # a fence needs the master key
    with pytest.raises(BKMessageTooLargeException, match="RESOURCE_EXHAUSTED"):  # not a bookie failure
        client.add(ledger, KEY, entries(ledger, 0, 1, size=6 << 20)).result(10)
    with pytest.raises(grpc.RpcError) as err:
        client.stub.ReadEntries(pb.ReadRangeRequest(ledgerId=1, firstEntryId=0, lastEntryId=0,
                                                    maxBytesPerMessage=1), timeout=5, metadata=[("x", "y" * (1 << 20))]).next()
    assert err.value.code() in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.INTERNAL)
    assert client.add(ledger, KEY, entries(ledger, 0, 3)).result(10).status == status.EOK
    assert c.bookies[0].proc.poll() is None


def test_a_burst_past_the_journal_queue_gets_too_many_requests(cluster, tmp_path):
    """The journal thread is held before it writes the first add, so the journal queue (journalQueueSize
    adds) fills behind it however fast the machine is: the rest of the burst is refused at the door."""
    queue_size = 4
    c = cluster(1, journalQueueSize=queue_size, journalMaxGroupWaitMSec=50)
    hold = restart_held(c, 0, tmp_path / "control", "write")
    client = BookieClient(c.bookies[0].bookie_id, address=c.bookies[0].grpc_address)
    try:
        ledger = LedgerId(0, 19)
        hold.arm()
        burst = [client.add(ledger, KEY, entries(ledger, 0, 8, size=4096))]
        hold.wait_holding("the journal thread to hold the first add")
        burst += [client.add(ledger, KEY, entries(ledger, i * 8, 8, size=4096)) for i in range(1, 200)]
        # Held, the journal acknowledges nothing: an add answered now was refused, and only the held one
        # and those in the queue are left unanswered.
        wait_for(lambda: sum(not f.done() for f in burst) <= queue_size, "the burst to be refused or queued")
        assert {f.result().status for f in burst if f.done()} == {status.ETOOMANYREQUESTS}
        hold.release()
        codes = [f.result(30).status for f in burst]
        assert set(codes) == {status.EOK, status.ETOOMANYREQUESTS}, "the burst should be partly refused"
        assert codes[0] == status.EOK
        assert client.add(ledger, KEY, entries(ledger, 2000, 1)).result(10).status == status.EOK
    finally:
        client.close()
